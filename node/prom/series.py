"""Reading a metric's series out of its table: label matchers, a time range, and the samples
grouped by series, all as Arrow/numpy arrays."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from gnomon.errors import GnomonError, InvalidArgument, Status
from node.engine.schema import TSID
from node.ingest.writer import TIMESTAMP_COLUMN
from node.prom.labels import METRIC_NAME, NOT_LABELS, VALUE_COLUMN
from node.sql.result import QueryResult

#: Runs one SQL statement (an HttpApp's ``execute``).
RunSql = Callable[[str], QueryResult]


class MatchOp(Enum):
    EQ = "="
    NEQ = "!="
    RE = "=~"
    NRE = "!~"


@dataclass(frozen=True)
class Matcher:
    name: str
    op: MatchOp
    value: str

    def mask(self, values: Any) -> Any:
        """Which of ``values`` (a label's strings, "" where unset) this matcher keeps, as a
        boolean array."""
        hit: Any
        if self.op in (MatchOp.EQ, MatchOp.NEQ):
            hit = pc.equal(values, pa.scalar(self.value))
        else:
            try:
                hit = pc.match_substring_regex(values, f"^(?:{self.value})$")
            except pa.ArrowInvalid as e:
                raise InvalidArgument(f"invalid regular expression {self.value!r}: {e}") from None
        return pc.invert(hit) if self.op in (MatchOp.NEQ, MatchOp.NRE) else hit


@dataclass
class Series:
    """Samples grouped by series: series ``i`` holds samples ``offsets[i]:offsets[i + 1]``
    of ``timestamps`` (milliseconds, ascending) and ``values``."""

    labels: list[dict[str, str]]
    offsets: np.ndarray[Any, np.dtype[np.int64]]
    timestamps: np.ndarray[Any, np.dtype[np.int64]]
    values: np.ndarray[Any, np.dtype[np.float64]]

    @classmethod
    def empty(cls) -> Series:
        return cls([], np.zeros(1, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float64))

    @classmethod
    def joined(cls, parts: Sequence[Series]) -> Series:
        if len(parts) == 1:
            return parts[0]
        if not parts:
            return cls.empty()
        sizes = np.cumsum([0] + [len(p.timestamps) for p in parts[:-1]])
        return cls(
            [lb for p in parts for lb in p.labels],
            np.concatenate(
                [[0]] + [p.offsets[1:] + s for p, s in zip(parts, sizes, strict=True)]
            ).astype(np.int64),
            np.concatenate([p.timestamps for p in parts]),
            np.concatenate([p.values for p in parts]),
        )


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _sql_string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def columns_of(run: RunSql, table: str) -> list[str]:
    """A table's column names; none if there is no such table. DESCRIBE has rows to answer
    where an empty SELECT has none: a cluster node forwarding an empty result to a table's
    owner gets no columns back."""
    try:
        described = run(f"DESCRIBE {_quote(table)}").table()
    except GnomonError as e:
        if e.status is Status.NOT_FOUND:
            return []
        raise
    return [str(name) for name in described.column("name").to_pylist()]


def metric_tables(run: RunSql) -> list[str]:
    """The tables holding Prometheus metrics: those with a ``value`` column."""
    names = [str(n) for n in run("SHOW TABLES").table().column(0).to_pylist()]
    return sorted(n for n in names if VALUE_COLUMN in columns_of(run, n))


def metrics_of(run: RunSql, matchers: Sequence[Matcher]) -> tuple[list[str], list[Matcher]]:
    """The metrics a selector reads and its matchers of other labels. A metric named exactly
    is read without listing the tables; other ``__name__`` matchers are tried on every
    metric's name."""
    names = [m for m in matchers if m.name == METRIC_NAME]
    others = [m for m in matchers if m.name != METRIC_NAME]
    if len(names) == 1 and names[0].op is MatchOp.EQ:
        return [names[0].value], others
    if not any(m.mask(pa.array([""])).to_pylist() == [False] for m in matchers):
        raise InvalidArgument("vector selector must contain at least one non-empty matcher")
    tables = metric_tables(run)
    keep = [True] * len(tables)
    for m in names:
        keep = [
            k and hit
            for k, hit in zip(keep, m.mask(pa.array(tables, pa.string())).to_pylist(), strict=True)
        ]
    return [t for t, k in zip(tables, keep, strict=True) if k], others


def label_columns(table: pa.Table) -> list[str]:
    return [n for n in table.column_names if n not in NOT_LABELS]


def select(run: RunSql, matchers: Sequence[Matcher], start_ms: int, end_ms: int) -> Series:
    """The samples of the series ``matchers`` select with timestamps in [start_ms, end_ms]."""
    metrics, others = metrics_of(run, matchers)
    return Series.joined([_select(run, m, others, start_ms, end_ms) for m in metrics])


#: Each series' labels by (metric, tsid), as read with its samples. A tsid is the hash of a
#: series' tag names and values, so its labels never change: a selector whose series are all
#: known reads only their samples (no tag column decoded for every row). Bounded by clearing
#: when full, as the engine's tag hashes are.
_LABELS: dict[tuple[str, int], dict[str, str]] = {}
_LABELS_MAX = 1 << 18


def _select(
    run: RunSql, metric: str, others: Sequence[Matcher], start_ms: int, end_ms: int
) -> Series:
    described = columns_of(run, metric)
    columns = set(described)
    if not columns:
        return Series.empty()
    pushed = [m for m in others if m.op is MatchOp.EQ and m.value]
    if any(m.name not in columns for m in pushed):
        return Series.empty()  # a label the metric never had is "" on all its series
    where = " AND ".join(
        [
            f"{_quote(TIMESTAMP_COLUMN)} >= to_timestamp_millis({start_ms})",
            f"{_quote(TIMESTAMP_COLUMN)} <= to_timestamp_millis({end_ms})",
            *(f"{_quote(m.name)} = {_sql_string(m.value)}" for m in pushed),
        ]
    )
    rest = [m for m in others if m not in pushed]

    def read(names: Sequence[str]) -> pa.Table:
        # The columns named (not *): a query of plain columns sorted by the series key is
        # answered by the SQL path's sorted-rows fast path, without a DataFusion plan.
        named = ", ".join(_quote(c) for c in names)
        return run(
            f"SELECT {named} FROM {_quote(metric)} WHERE {where} "
            f"ORDER BY {_quote(TSID)}, {_quote(TIMESTAMP_COLUMN)}"
        ).table()

    samples = read([TSID, TIMESTAMP_COLUMN, VALUE_COLUMN])
    starts = _starts(samples)
    tsids = samples.column(TSID).to_numpy()[starts] if samples.num_rows else []
    known = [_LABELS.get((metric, int(t))) for t in tsids]
    if all(labels is not None for labels in known):
        return _kept(_series(samples, starts, [lb for lb in known if lb is not None]), rest)
    every = read(described)
    every_starts = _starts(every)
    series = _series(every, every_starts, _first_labels(metric, every, every_starts))
    if len(_LABELS) >= _LABELS_MAX:
        _LABELS.clear()
    first_tsids = every.column(TSID).to_numpy()[every_starts] if every.num_rows else []
    for tsid, labels in zip(first_tsids, series.labels, strict=True):
        _LABELS[(metric, int(tsid))] = labels
    return _kept(series, rest)


def _kept(series: Series, matchers: Sequence[Matcher]) -> Series:
    """The series of ``series`` every matcher keeps (a label a series lacks is "")."""
    if not matchers or not series.labels:
        return series
    keep: Any = None
    for m in matchers:
        hit = m.mask(pa.array([lb.get(m.name, "") for lb in series.labels], pa.string()))
        keep = hit if keep is None else pc.and_(keep, hit)
    kept = np.asarray(keep.to_numpy(zero_copy_only=False), dtype=bool)
    if kept.all():
        return series
    counts = np.diff(series.offsets)
    rows = np.repeat(kept, counts)
    return Series(
        [lb for lb, k in zip(series.labels, kept, strict=True) if k],
        np.concatenate([[0], np.cumsum(counts[kept])]).astype(np.int64),
        series.timestamps[rows],
        series.values[rows],
    )


def _starts(table: pa.Table) -> np.ndarray[Any, np.dtype[np.intp]]:
    """Where each series' rows start in ``table`` (ordered by series id, then time)."""
    if not table.num_rows:
        return np.zeros(0, np.intp)
    tsid = table.column(TSID).to_numpy()
    return np.flatnonzero(np.r_[True, tsid[1:] != tsid[:-1]])


def _first_labels(
    metric: str, table: pa.Table, starts: np.ndarray[Any, np.dtype[np.intp]]
) -> list[dict[str, str]]:
    """Each series' labels, read off its first row."""
    names = label_columns(table)
    firsts: Any = pa.array(starts)
    columns: dict[str, list[Any]] = {n: table.column(n).take(firsts).to_pylist() for n in names}
    return [
        {METRIC_NAME: metric, **{k: v[i] for k, v in columns.items() if v[i] not in (None, "")}}
        for i in range(len(starts))
    ]


def _series(
    table: pa.Table, starts: np.ndarray[Any, np.dtype[np.intp]], labels: list[dict[str, str]]
) -> Series:
    if not table.num_rows:
        return Series.empty()
    offsets = np.append(starts, table.num_rows).astype(np.int64)
    ts: Any = table.column(TIMESTAMP_COLUMN).cast(pa.timestamp("ms")).cast(pa.int64())
    values: Any = pc.fill_null(table.column(VALUE_COLUMN).cast(pa.float64()), pa.scalar(np.nan))
    return Series(
        labels,
        offsets,
        ts.to_numpy().astype(np.int64),
        values.to_numpy().astype(np.float64),
    )


def grouped(metric: str, table: pa.Table) -> Series:
    """``table``'s rows (ordered by series id, then time) as series."""
    starts = _starts(table)
    return _series(table, starts, _first_labels(metric, table, starts))
