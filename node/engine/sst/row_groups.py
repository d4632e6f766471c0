"""What a SST's footer says of its row groups, for pruning: the guarantee each row group's
min/max statistics give (and the one pass that judges a filter against many files' row
groups), per-column statistics as arrays, and the series directory (which row groups, and
which runs of rows in them, hold each combination of tag values).

Pruning works by turning each row group's statistics into a guarantee expression
(``col >= min and col <= max`` per column) and letting pyarrow's dataset layer simplify the
scan filter under it: a row group whose simplified filter is ``false`` cannot hold a matching
row. Which columns' statistics may be used is the caller's choice: when a row group is merged
with other sources, only columns fixed by the primary key are safe (a newer version of a row may
change the others).
"""

from __future__ import annotations

import functools
import itertools
import json
from collections.abc import Iterable, Sequence, Set
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from node.engine.sst.writer import SERIES_KEY


def _row_group_guarantee(
    meta: pq.FileMetaData, rg: int, columns: dict[str, pa.DataType]
) -> pc.Expression:
    guarantee = pc.scalar(True)
    group = meta.row_group(rg)
    for i in range(group.num_columns):
        chunk = group.column(i)
        name = chunk.path_in_schema
        typ = columns.get(name)
        stats = chunk.statistics
        if typ is None or stats is None or not stats.has_min_max or stats.null_count:
            continue
        lo = pa.scalar(stats.min, type=typ)
        hi = pa.scalar(stats.max, type=typ)
        guarantee = guarantee & (pc.field(name) >= lo) & (pc.field(name) <= hi)
    return guarantee


def row_group_guarantees(
    meta: pq.FileMetaData, schema: pa.Schema, stat_columns: Iterable[str]
) -> list[pc.Expression]:
    """Per row group, what its min/max statistics of ``stat_columns`` guarantee."""
    usable = {name: schema.field(name).type for name in stat_columns if name in schema.names}
    return [_row_group_guarantee(meta, rg, usable) for rg in range(meta.num_row_groups)]


@dataclass(frozen=True)
class ColumnRanges:
    """One column's min/max statistics over the row groups that have them (``known``):
    integers for timestamps (in the column's unit) and integers, floats, strings."""

    known: np.ndarray
    mins: np.ndarray
    maxs: np.ndarray
    #: Per row group (all of them): its (min, max) when its statistics say it holds no null
    #: and, for floats, whose statistics leave NaN out, cannot hold NaN (never known); else
    #: None. Every value of such a row group lies in its span.
    spans: tuple[tuple[Any, Any] | None, ...]


def column_ranges(meta: pq.FileMetaData, column: str) -> ColumnRanges | None:
    """The statistics of ``column`` per row group, or None when the file has no such
    column or its statistics are of a kind bounds are not judged on."""
    names = [meta.schema.column(i).path for i in range(meta.num_columns)]
    if column not in names:
        return None
    index = names.index(column)
    described = meta.schema.column(index)
    logical = described.logical_type.to_json()
    if described.physical_type not in ("INT32", "INT64", "FLOAT", "DOUBLE", "BYTE_ARRAY"):
        return None
    timestamp = described.logical_type.type == "TIMESTAMP"
    if timestamp and '"milliseconds"' not in logical:
        return None  # bounds on timestamps are milliseconds
    if described.physical_type == "BYTE_ARRAY" and described.logical_type.type != "STRING":
        return None
    floating = described.physical_type in ("FLOAT", "DOUBLE")
    # Exact Python values for strings and integers (uint64 does not fit numpy's int64).
    dtype = np.int64 if timestamp else np.float64 if floating else object
    known: list[bool] = []
    spans: list[tuple[Any, Any] | None] = []
    mins: list[Any] = []
    maxs: list[Any] = []
    for rg in range(meta.num_row_groups):
        stats = meta.row_group(rg).column(index).statistics
        ok = stats is not None and stats.has_min_max
        known.append(ok)
        span = None
        if stats is not None and ok:
            # A timestamp's statistics come as datetimes; its integer value is the raw one.
            span = (stats.min_raw, stats.max_raw) if timestamp else (stats.min, stats.max)
            mins.append(span[0])
            maxs.append(span[1])
        complete = (
            stats is not None
            and stats.has_null_count  # type: ignore[attr-defined]
            and stats.null_count == 0
            and not floating
        )
        spans.append(span if complete else None)
    return ColumnRanges(
        np.array(known, dtype=bool),
        np.array(mins, dtype=dtype),
        np.array(maxs, dtype=dtype),
        tuple(spans),
    )


#: Runs of rows [start, end) within one row group.
Runs = list[tuple[int, int]]


@dataclass(frozen=True)
class SeriesIndex:
    """Which row groups of a file hold each series (combination of tag values) that its
    series directory lists; the directory lists nothing for the ``unlisted`` ones, which
    may hold any. Of the row groups it locates, ``runs`` has the runs of rows each holds, in
    row order, one per series of every tag: (start, end, the combination it holds)."""

    row_groups: dict[tuple[Any, ...], list[int]]
    unlisted: list[int]
    runs: dict[int, list[tuple[int, int, tuple[Any, ...]]]]

    def holding(self, series: Iterable[tuple[Any, ...]]) -> set[int]:
        """The row groups that may hold one of ``series``."""
        out = set(self.unlisted)
        for combo in series:
            out.update(self.row_groups.get(combo, ()))
        return out

    def rows(self, series: Set[tuple[Any, ...]], rg: int) -> Runs | None:
        """The runs of rows of row group ``rg`` holding one of ``series``, in order, or None
        where the directory does not say where they lie."""
        runs = self.runs.get(rg)
        if runs is None:
            return None
        return [(start, end) for start, end, combo in runs if combo in series]


def row_group_series(meta: pq.FileMetaData, tags: Sequence[str]) -> SeriesIndex:
    """The file's row groups by the combinations of the values of ``tags`` they hold, as
    its series directory lists them (every row group unlisted when it has none)."""
    directory = _series_directory(meta)
    if directory is None or not tags or not set(tags) <= set(directory["tags"]):
        return SeriesIndex({}, list(range(meta.num_row_groups)), {})
    positions = [directory["tags"].index(t) for t in tags]
    combos = [tuple(v[i] for i in positions) for v in directory["series"]]
    by_series: dict[tuple[Any, ...], list[int]] = {}
    runs: dict[int, list[tuple[int, int, tuple[Any, ...]]]] = {}
    unlisted: list[int] = []
    all_starts = directory.get("starts") or [None] * meta.num_row_groups
    for rg, indexes in enumerate(directory["row_groups"]):
        if indexes is None:
            unlisted.append(rg)
            continue
        for combo in {combos[i] for i in indexes}:
            by_series.setdefault(combo, []).append(rg)
        starts, size = all_starts[rg], meta.row_group(rg).num_rows
        if not _runs_fit(starts, len(indexes), size):
            continue  # no offsets, or offsets that do not fit: the row group is read whole
        ends = [*starts[1:], size]
        runs[rg] = [(a, b, combos[i]) for i, a, b in zip(indexes, starts, ends, strict=True)]
    return SeriesIndex(by_series, unlisted, runs)


def _runs_fit(starts: Any, series: int, rows: int) -> bool:
    """Whether ``starts`` can be the first rows of ``series`` runs that cover a row group of
    ``rows`` rows in order."""
    return (
        isinstance(starts, list)
        and len(starts) == series
        and all(type(s) is int for s in starts)
        and starts[:1] == [0]
        and all(a < b for a, b in itertools.pairwise(starts))
        and starts[-1] < rows
    )


def series_guarantee(
    schema: pa.Schema, tags: Sequence[str], values: Sequence[Any]
) -> pc.Expression:
    """What rows of one series guarantee: each tag equals its value."""
    types = tuple(schema.field(t).type for t in tags)
    return _series_guarantee(tuple(tags), types, tuple(values))


@functools.lru_cache(maxsize=65_536)
def _series_guarantee(
    tags: tuple[str, ...], types: tuple[pa.DataType, ...], values: tuple[Any, ...]
) -> pc.Expression:
    # Every query filtering on tags judges the series of the SSTs it touches: building the
    # same expressions again each time would cost more than the judging.
    guarantee = pc.scalar(True)
    for t, typ, v in zip(tags, types, values, strict=True):
        guarantee = guarantee & (pc.field(t) == pa.scalar(v, typ))
    return guarantee


def _series_directory(meta: pq.FileMetaData) -> dict[str, Any] | None:
    raw = (meta.metadata or {}).get(SERIES_KEY.encode())
    if raw is None:
        return None  # written before the directory existed
    directory: dict[str, Any] = json.loads(raw)
    # Pruning is only an optimisation: a directory of an unexpected shape is ignored.
    if not {"tags", "series", "row_groups"} <= directory.keys():
        return None
    groups = directory["row_groups"]
    if len(groups) != meta.num_row_groups:
        return None
    starts = directory.get("starts")
    if starts is not None and (not isinstance(starts, list) or len(starts) != len(groups)):
        directory.pop("starts")  # row offsets that do not fit: read whole row groups
    return directory


def select_row_groups(
    guarantees: Sequence[Sequence[Sequence[pc.Expression]]],
    schema: pa.Schema,
    filter: pc.Expression | None,
) -> list[list[int]]:
    """For each file (given by its row groups' guarantee alternatives), the row groups that
    may hold rows matching ``filter``: those with an alternative the filter does not rule
    out. All files are judged in one pass: a query touching many SSTs pays pyarrow's per-call
    cost of simplifying the filter once, not once per file."""
    if filter is None:
        return [list(range(len(g))) for g in guarantees]
    paths: list[str] = []
    partitions: list[pc.Expression] = []
    for i, groups in enumerate(guarantees):
        for rg, alternatives in enumerate(groups):
            for k, guarantee in enumerate(alternatives):
                paths.append(f"/{i}/{rg}/{k}")
                partitions.append(guarantee)
    selected: list[list[int]] = [[] for _ in guarantees]
    if not paths:
        return selected
    fake = ds.FileSystemDataset.from_paths(
        paths,
        schema=schema,
        format=ds.ParquetFileFormat(),
        filesystem=pafs.LocalFileSystem(),
        partitions=partitions,
    )
    for f in fake.get_fragments(filter=filter):
        file, rg, _ = f.path[1:].split("/")
        kept = selected[int(file)]
        if not kept or kept[-1] != int(rg):
            kept.append(int(rg))
    return selected
