"""Reading SSTs: local access to files of any object store, cached footers, row-group
statistics, series directories and tombstone files (what a footer says of its row groups is
worked out in :mod:`node.engine.sst.row_groups`), and reading in key order (forwards or
backwards, filling columns a file predates) or by located runs of rows.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence, Set
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np
import pyarrow as pa
import pyarrow.acero as ac
import pyarrow.compute as pc
import pyarrow.parquet as pq

from node.engine.bounds import Bounds, conjunction
from node.engine.schema import Schema, repeat
from node.engine.sst.cache import FileCache
from node.engine.sst.decoded import DecodedChunks
from node.engine.sst.row_groups import (
    ColumnRanges,
    Runs,
    SeriesIndex,
    column_ranges,
    row_group_guarantees,
    row_group_series,
)
from node.engine.tombstones import RangeTombstone, read_tombstone_file
from objectstore.api import ObjectStore
from objectstore.cache import SstCache


@runtime_checkable
class LocalPathStore(Protocol):
    def local_path(self, key: str) -> str:
        """The local file holding ``key`` (NotFound if absent)."""


class SstFiles:
    """Local paths of SST objects, their cached Parquet footers and columns, what pruning
    derives from those, and the cached contents of tombstone files: all in one
    :class:`FileCache` of ``file_bytes``.

    A store whose objects are local files hands out their paths; objects of any other store
    go through a bounded read-through cache in ``cache_dir`` (SSTs are immutable, so a cached
    copy never goes stale)."""

    def __init__(
        self,
        store: ObjectStore,
        cache_dir: str,
        *,
        file_bytes: int = 128 * 1024**2,
        cache_bytes: int = 8 * 1024**3,
        decoded_bytes: int = 0,
    ) -> None:
        self._cache = (
            None
            if isinstance(store, LocalPathStore)
            else SstCache(store, cache_dir, capacity_bytes=cache_bytes)
        )
        self._local: LocalPathStore = store if self._cache is None else self._cache  # type: ignore[assignment]
        # A local store's paths are looked up (a stat) once per file, and building the
        # guarantee expressions of every row group costs more than judging the filter
        # against them: files are immutable, so all of it is made once per file.
        self.cache = FileCache(file_bytes)
        #: Decoded column chunks scans read through (compaction reads around it: it reads each
        #: file once, and would only push out what queries read again).
        self.decoded = DecodedChunks(decoded_bytes)

    def path(self, key: str) -> str:
        if self._cache is not None:
            return self._cache.local_path(key)
        return self.cache.get_or_load(
            "path", key, None, lambda: self._local.local_path(key), _text_bytes
        )

    def pinned(self, key: str) -> AbstractContextManager[str]:
        """The local path of ``key``, kept from eviction until the context exits (a scan holds
        its files this way, since it opens them lazily)."""
        if self._cache is None:
            return nullcontext(self.path(key))
        return self._cache.pinned(key)

    def footer(self, key: str) -> pq.FileMetaData:
        return self.cache.get_or_load(
            "footer", key, None, lambda: pq.read_metadata(self.path(key)), _footer_bytes
        )

    def tombstones(self, key: str) -> list[RangeTombstone]:
        """The range tombstones of a tombstone file."""
        return self.cache.get_or_load(
            "tombstones",
            key,
            None,
            lambda: read_tombstone_file(self.path(key)),
            lambda found: _ENTRY_BYTES * (1 + len(found)),
        )

    def columns(self, key: str) -> frozenset[str]:
        """The columns the file has (older files lack those added since)."""
        return self.cache.get_or_load(
            "columns",
            key,
            None,
            lambda: file_columns(self.footer(key)),
            lambda names: sum(map(_text_bytes, names)),
        )

    def guarantees(
        self, key: str, schema: pa.Schema, stat_columns: Sequence[str]
    ) -> list[pc.Expression]:
        """:func:`row_group_guarantees` of the file, cached."""
        usable = tuple(
            (name, str(schema.field(name).type)) for name in stat_columns if name in schema.names
        )
        return self.cache.get_or_load(
            "guarantees",
            key,
            usable,
            lambda: row_group_guarantees(self.footer(key), schema, [n for n, _ in usable]),
            lambda found: _ENTRY_BYTES * (1 + len(found) * max(1, len(usable))),
        )

    def series(self, key: str, tags: Sequence[str]) -> SeriesIndex:
        """:func:`row_group_series` of the file, cached."""
        return self.cache.get_or_load(
            "series",
            key,
            tuple(tags),
            lambda: row_group_series(self.footer(key), tags),
            _series_bytes,
        )

    def row_groups_within(
        self, key: str, bounds: Bounds, among: Collection[int] | None = None
    ) -> list[int]:
        """Of the file's row groups (or those ``among``), in order, those whose min/max
        statistics may hold rows within ``bounds`` (a column the file lacks, or without
        statistics, rules nothing out)."""
        if among is not None and len(among) <= SCALAR_ROW_GROUPS:
            judged = self._judged_one_by_one(key, bounds, sorted(among))
            if judged is not None:
                return judged
        n = self.footer(key).num_row_groups
        judged_all: list[np.ndarray] = []
        for name, r in bounds.items():
            ranges = self._column_ranges(key, name)
            if ranges is None:
                continue
            try:
                within = r.overlaps(ranges.mins, ranges.maxs)
            except TypeError:  # a bound of another kind than the statistics: judge nothing
                continue
            if len(within) < n:  # row groups without statistics may hold anything
                every = np.ones(n, dtype=bool)
                every[ranges.known] = within
                within = every
            judged_all.append(within)
        kept = conjunction(judged_all, n).nonzero()[0].tolist()
        return kept if among is None else [rg for rg in kept if rg in among]

    def _judged_one_by_one(
        self, key: str, bounds: Bounds, row_groups: Sequence[int]
    ) -> list[int] | None:
        """:meth:`row_groups_within` of a few row groups, judged on their spans in Python
        (cheaper than numpy's set-up per call); None where a span is unknown."""
        kept = list(row_groups)
        for name, r in bounds.items():
            ranges = self._column_ranges(key, name)
            if ranges is None:
                continue
            spans: list[tuple[Any, Any]] = []
            for rg in kept:
                span = ranges.spans[rg]
                if span is None:
                    return None
                spans.append(span)
            try:
                kept = [rg for rg, (lo, hi) in zip(kept, spans, strict=True) if r.meets(lo, hi)]
            except TypeError:  # a bound of another kind than the statistics: judge nothing
                continue
        return kept

    def covered(self, key: str, bounds: Bounds, row_groups: Sequence[int]) -> bool:
        """Whether every row of ``row_groups`` of the file satisfies ``bounds`` by their
        statistics (no nulls, no floats whose NaNs statistics cannot show): a read of them
        needs no filter by the bounds. Judged row group by row group: a point query's few
        row groups fail at the first, which costs less than one numpy call."""
        for name, r in bounds.items():
            ranges = self._column_ranges(key, name)
            if ranges is None:
                return False
            for rg in row_groups:
                span = ranges.spans[rg]
                try:
                    if span is None or not r.covers(*span):
                        return False
                except TypeError:  # a bound of another kind than the statistics
                    return False
        return True

    def _column_ranges(self, key: str, column: str) -> ColumnRanges | None:
        return self.cache.get_or_load(
            "ranges",
            key,
            column,
            lambda: column_ranges(self.footer(key), column),
            _ranges_bytes,
        )

    def drop_caches(self) -> None:
        """Drop what memory holds of every file: paths, footers and what was derived from
        them, tombstones, decoded chunks (local copies of remote objects stay on disk, as
        the OS page cache stays). Benchmarks measure reads that start cold this way."""
        self.cache.clear()
        self.decoded.clear()

    def forget(self, key: str) -> None:
        self.cache.forget(key)
        self.decoded.forget(key)
        if self._cache is not None:
            self._cache.discard(key)


#: What an entry of the file cache is reckoned to take besides its contents (a Python object,
#: its key and its place in the cache), and each item of a list.
_ENTRY_BYTES = 200
#: Up to this many row groups are judged on their statistics one by one, in Python.
SCALAR_ROW_GROUPS = 4


def _text_bytes(text: str) -> int:
    return _ENTRY_BYTES + len(text)


def _footer_bytes(meta: pq.FileMetaData) -> int:
    # Parsed, a footer takes a few times its Thrift encoding.
    return _ENTRY_BYTES + 4 * meta.serialized_size


def _series_bytes(index: SeriesIndex) -> int:
    listed = sum(len(groups) for groups in index.row_groups.values()) + len(index.row_groups)
    runs = sum(len(r) for r in index.runs.values())
    return _ENTRY_BYTES * (1 + listed + runs + len(index.unlisted))


def _ranges_bytes(ranges: ColumnRanges | None) -> int:
    if ranges is None:
        return _ENTRY_BYTES
    arrays = ranges.known.nbytes + ranges.mins.nbytes + ranges.maxs.nbytes
    return _ENTRY_BYTES * (1 + len(ranges.spans)) + arrays


def reversed_rows(batch: pa.RecordBatch) -> pa.RecordBatch:
    return batch.take(np.arange(batch.num_rows - 1, -1, -1))


def read_sorted(
    path: str,
    row_groups: Sequence[int],
    columns: Sequence[str],
    batch_size: int,
    *,
    descending: bool = False,
    metadata: pq.FileMetaData | None = None,
    decoded: tuple[DecodedChunks, str] | None = None,
) -> Iterator[pa.RecordBatch]:
    """The chosen row groups' rows in file order (which is primary-key order), or in reverse:
    row groups last to first, each reversed in memory (one row group at a time). ``metadata``
    is the file's footer when already parsed; with ``decoded`` (the cache and the file's key)
    row groups are read through that cache."""
    if not row_groups:
        return
    if decoded is not None:
        chunks, file = decoded
        order = list(reversed(row_groups)) if descending else row_groups

        def keep() -> bool:
            return chunks.worth_keeping(_decoded_bytes(metadata, row_groups, columns))

        for table in chunks.read(file, path, order, columns, metadata=metadata, keep=keep):
            batches = table.to_batches(max_chunksize=batch_size)
            yield from (reversed_rows(b) for b in reversed(batches)) if descending else batches
        return
    pf = pq.ParquetFile(path, metadata=metadata)
    if not descending:
        yield from pf.iter_batches(
            batch_size=batch_size, row_groups=list(row_groups), columns=list(columns)
        )
        return
    for rg in reversed(row_groups):
        batches = list(
            pf.iter_batches(batch_size=batch_size, row_groups=[rg], columns=list(columns))
        )
        for batch in reversed(batches):
            yield reversed_rows(batch)


def file_columns(meta: pq.FileMetaData) -> frozenset[str]:
    return frozenset(meta.schema.to_arrow_schema().names)


def conform_batches(
    batches: Iterable[pa.RecordBatch],
    target: pa.Schema,
    fill: Callable[[str], pa.Scalar[Any]],
) -> Iterator[pa.RecordBatch]:
    """``batches`` with exactly the fields of ``target``: a column the source lacks (an SST or
    memtable from before an ADD COLUMN) is filled with ``fill(name)``."""
    for b in batches:
        names = b.schema.names
        arrays = [
            b.column(f.name) if f.name in names else repeat(fill(f.name), b.num_rows)
            for f in target
        ]
        yield pa.RecordBatch.from_arrays(arrays, schema=target)


#: Row groups are filtered together, in one call, until they hold this many rows: one call
#: per row group would pay the filter's set-up each time, all at once would hold a large
#: scan's every row in memory.
FILTER_ROWS = 262_144


@dataclass(frozen=True)
class Part:
    """Row groups of one SST: its key, its local copy and the row groups to read; of those
    in ``runs``, only the given runs of rows (each one series, as the series directory
    locates them), whose rows satisfy the bounds on the ``decided`` columns and are sorted
    by the ``run_order`` column, if any."""

    file: str
    path: str
    row_groups: Sequence[int]
    runs: Mapping[int, Runs] = field(default_factory=dict)
    decided: frozenset[str] = frozenset()
    run_order: str | None = None


def scan_unordered(
    parts: Sequence[Part],
    schema: Schema,
    columns: Sequence[str],
    *,
    decoded: DecodedChunks,
    bounds: Bounds | None = None,
    predicate: pc.Expression | None = None,
    predicate_columns: Sequence[str] = (),
    footers: Mapping[str, pq.FileMetaData] | None = None,
    dictionary: Sequence[str] = (),
) -> Iterator[pa.Table]:
    """Rows of many parts within ``bounds`` and matching ``predicate`` (which reads only
    ``predicate_columns``), in no particular order, read through the ``decoded`` chunk
    cache, as tables of up to about :data:`FILTER_ROWS` rows before filtering (a chunk per
    row group: the caller finishes each table once, not each row group). ``footers`` (by
    path) spare parsing footers already parsed. String columns named in ``dictionary`` come
    dictionary encoded, as Parquet stores them."""
    if not any(p.row_groups for p in parts):
        return
    bounds = bounds or {}
    predicate_columns = list(dict.fromkeys(predicate_columns))
    judged = list(dict.fromkeys([*bounds, *predicate_columns]))
    # With no column asked for (count(*)), one is read all the same: tables without columns
    # lose their row counts when concatenated.
    read = [*columns, *(c for c in judged if c not in columns)] or schema.names[:1]
    out = schema.storage_projection(tuple(columns), tuple(dictionary))

    keep = _keeper(decoded, parts, read, footers)
    pending: list[pa.Table] = []
    # Per pending table, the bounded columns all its rows are known to satisfy.
    satisfied: list[Set[str]] = []
    rows = 0

    def flush() -> Iterator[pa.Table]:
        table = pending[0] if len(pending) == 1 else pa.concat_tables(pending)
        known = set.intersection(*map(set, satisfied))
        judged = {c: r for c, r in bounds.items() if c not in known}
        if judged or predicate is not None:
            table = kept(table, selected_mask(table, judged, predicate, predicate_columns))
        if table.num_rows:
            yield _conformed(table, out)

    for part in parts:
        if not part.row_groups:
            continue
        metadata = None if footers is None else footers.get(part.path)
        tables = decoded.read(
            part.file,
            part.path,
            part.row_groups,
            read,
            dictionary=dictionary,
            metadata=metadata,
            keep=keep,
        )
        for rg, table in zip(part.row_groups, tables, strict=True):
            runs = part.runs.get(rg)
            known: Set[str] = frozenset()
            if runs is not None:
                table, known = _runs_within(table, runs, part, bounds)
            pending.append(table)
            satisfied.append(known)
            rows += table.num_rows
            if rows >= FILTER_ROWS:
                yield from flush()
                pending, satisfied, rows = [], [], 0
    if pending:
        yield from flush()


@dataclass(frozen=True)
class LocatedArrays:
    """A located read's rows as numpy arrays (see :func:`located_arrays`)."""

    columns: dict[str, np.ndarray]
    #: Whether the rows come sorted by the parts' ``run_order`` column (one series' runs,
    #: file after file), which spares a caller grouping them by it a check.
    in_run_order: bool

    @staticmethod
    def joined(reads: Sequence[LocatedArrays]) -> LocatedArrays:
        """The rows of several reads (of tables of one schema: a union) one after the
        other, in no run order across them."""
        if len(reads) == 1:
            return reads[0]
        columns = {c: np.concatenate([r.columns[c] for r in reads]) for c in reads[0].columns}
        return LocatedArrays(columns, in_run_order=False)


def located_arrays(
    parts: Sequence[Part],
    schema: Schema,
    columns: Sequence[str],
    *,
    decoded: DecodedChunks,
    bounds: Bounds,
    footers: Mapping[str, pq.FileMetaData],
) -> LocatedArrays | None:
    """The rows of ``parts`` whose every row group is read at its runs (a located read),
    within ``bounds``, as one numpy array per column of ``columns``, rows in the order
    :func:`scan_unordered` gives them: what an aggregation in numpy takes, without the
    tables, slices and concatenations in between (for a point query, half its read).
    None where numpy would not hold a column as read (a chunk holding nulls, a type other
    than integers, floats and timestamps: see :meth:`DecodedChunks.arrays`), where the
    runs do not decide every bound, or where no row is read (the caller reads tables,
    which know their types)."""
    read = list(dict.fromkeys([*columns, *bounds]))
    keep = _keeper(decoded, parts, read, footers)
    types = schema.storage_projection(tuple(read))
    # Where the bounded columns numpy compares as pyarrow does are among those read.
    compared = {
        c: read.index(c) for c, r in bounds.items() if r.compared_in_numpy(types.field(c).type)
    }
    pieces: list[list[np.ndarray]] = [[] for _ in read]
    order = parts[0].run_order if parts else None
    # Each run (one series) is sorted by the run order: the rows are if each run starts
    # where the one before it ended (judged run by run: joined runs are several series).
    in_order = order is not None and order in read
    last: Any = None
    for part in parts:
        metadata = footers.get(part.path)
        held = decoded.arrays(
            part.file, part.path, part.row_groups, read, metadata=metadata, keep=keep
        )
        for rg, optional in zip(part.row_groups, held, strict=True):
            runs = part.runs.get(rg)
            arrays = [a for a in optional if a is not None]
            if runs is None or len(arrays) < len(read):
                return None
            narrowing = {c: arrays[i] for c, i in compared.items()}
            runs, known = _narrowed(runs, part, bounds, narrowing.get)
            if not known >= bounds.keys():
                return None
            if in_order and runs and order is not None:
                ordered = arrays[read.index(order)]
                firsts, lasts = ordered[[a for a, _ in runs]], ordered[[b - 1 for _, b in runs]]
                in_order = (last is None or last <= firsts[0]) and bool(
                    (lasts[:-1] <= firsts[1:]).all()
                )
                last = lasts[-1]
            for values, kept in zip(arrays, pieces, strict=True):
                kept.extend(values[a:b] for a, b in _joined(runs))
    if not pieces or not pieces[0]:
        return None
    by_column = {
        c: p[0] if len(p) == 1 else np.concatenate(p)
        for c, p in zip(read, pieces, strict=True)
        if c in columns
    }
    return LocatedArrays(by_column, in_order)


def _keeper(
    decoded: DecodedChunks,
    parts: Sequence[Part],
    read: Sequence[str],
    footers: Mapping[str, pq.FileMetaData] | None,
) -> Callable[[], bool]:
    """Whether a read of ``parts``' ``read`` columns should keep what it decodes (asked on
    its first miss: see :meth:`DecodedChunks.worth_keeping`)."""

    def keep() -> bool:
        if footers is None:
            return True
        size = sum(_decoded_bytes(footers.get(p.path), p.row_groups, read) for p in parts)
        return decoded.worth_keeping(size)

    return keep


#: Runs of one series narrowed by binary search at most: each costs a numpy call, more
#: than comparing the column of a few row groups at once.
NARROWED_RUNS = 8


def _runs_within(
    table: pa.Table, runs: Runs, part: Part, bounds: Bounds
) -> tuple[pa.Table, Set[str]]:
    """The rows of ``table`` (a row group of ``part``) in ``runs``, sliced, which copies
    nothing, and the bounded columns they satisfy (see :func:`_narrowed`)."""

    def ordered(name: str) -> np.ndarray | None:
        column = table.column(name)
        return bounds[name].numeric(column.chunks, column.type)

    runs, known = _narrowed(runs, part, bounds, ordered)
    slices = [table.slice(a, b - a) for a, b in _joined(runs)]
    if len(slices) == 1:
        return slices[0], known
    return (pa.concat_tables(slices) if slices else table.slice(0, 0)), known


def _narrowed(
    runs: Runs, part: Part, bounds: Bounds, ordered: Callable[[str], np.ndarray | None]
) -> tuple[Runs, Set[str]]:
    """``runs`` of a row group of ``part``, empty ones dropped (each still one series:
    :func:`_joined` makes adjacent ones one slice), and the bounded columns their rows
    satisfy: the part's ``decided`` ones and, when the runs are few and sorted by a bounded
    column whose values ``ordered(name)`` gives in numpy (None where numpy would not compare
    them with the bounds as pyarrow does), that one too, each run narrowed to its range by
    binary search."""
    known = set(part.decided)
    order = part.run_order
    if order is not None and len(runs) <= NARROWED_RUNS and order in bounds:
        values = ordered(order)
        if values is not None:
            r = bounds[order]
            narrowed = []
            for a, b in runs:
                start, stop = r.sorted_positions(values[a:b])
                narrowed.append((a + start, a + stop))
            runs = narrowed
            known.add(order)
    return [(a, b) for a, b in runs if b > a], known


def _joined(runs: Runs) -> Runs:
    """``runs`` (in order) with adjacent ones joined: one slice each."""
    out: Runs = []
    for start, end in runs:
        if out and out[-1][1] == start:
            out[-1] = (out[-1][0], end)
        else:
            out.append((start, end))
    return out


def _conformed(table: pa.Table, out: pa.Schema) -> pa.Table:
    """``table``'s columns named in ``out``, with its nullability: the columns as they are
    when only that differs (a cast would dispatch a kernel per column)."""
    # Read columns come first, in the order asked for, judged ones after them.
    columns = table.columns[: len(out)]
    if not columns:
        return table.select([])  # keeps the row count, which a table of no arrays lacks
    if all(c.type == f.type for c, f in zip(columns, out, strict=True)):
        return pa.Table.from_arrays(columns, schema=out)
    return pa.Table.from_arrays(columns, names=out.names).cast(out)


def _decoded_bytes(
    metadata: pq.FileMetaData | None, row_groups: Sequence[int], columns: Sequence[str]
) -> int:
    """About how many bytes reading ``columns`` of ``row_groups`` decodes (the footer's
    uncompressed sizes, in proportion of the columns read; 0 without a footer)."""
    if metadata is None or metadata.num_columns == 0:
        return 0
    share = len(columns) / metadata.num_columns
    return int(sum(metadata.row_group(rg).total_byte_size for rg in row_groups) * share)


def selected_mask(
    table: pa.Table,
    bounds: Bounds,
    predicate: pc.Expression | None,
    predicate_columns: Sequence[str],
) -> np.ndarray[Any, np.dtype[np.bool_]]:
    """Which rows of ``table`` lie within ``bounds`` and match ``predicate``: bounds judged
    column by column with kernels (dictionary tags on their dictionaries), the predicate,
    if any, by :func:`matching` on the columns it reads."""
    masks = [r.mask(table.column(name)) for name, r in bounds.items()]
    if predicate is not None:
        matches = matching(table.select(list(predicate_columns) or table.column_names), predicate)
        masks.append(np.asarray(matches.to_numpy(), dtype=np.bool_))  # a null (None) is False
    return conjunction(masks, table.num_rows)


#: Kept rows coming in runs at least this long on average are sliced rather than filtered.
MIN_RUN_ROWS = 256


def kept(table: pa.Table, keep: np.ndarray[Any, np.dtype[np.bool_]]) -> pa.Table:
    """The rows of ``table`` that ``keep`` marks. Row groups are sorted by series and time,
    so a bound on both (a few hosts over some hours) keeps a few long runs: those are sliced,
    which copies nothing, where a filter would copy every kept value of every column."""
    # Where runs of kept rows begin and end: alternately, the rows where ``keep`` flips
    # (np.diff's padding would cost more than the comparison).
    padded = np.concatenate(([False], keep, [False]))
    edges = (padded[1:] != padded[:-1]).nonzero()[0]
    starts, ends = edges[0::2].tolist(), edges[1::2].tolist()
    if not starts:
        return table.slice(0, 0)
    if len(starts) == 1:
        return table.slice(starts[0], ends[0] - starts[0])
    if sum(ends) - sum(starts) < MIN_RUN_ROWS * len(starts):
        return table.filter(pa.array(keep))
    return pa.concat_tables([table.slice(a, b - a) for a, b in zip(starts, ends, strict=True)])


def matching(table: pa.Table, expr: pc.Expression) -> pa.ChunkedArray[Any]:
    """Which rows of ``table`` satisfy ``expr`` (null where it is null). Evaluated on the
    columns the filter reads, the mask then selects every column with the plain filter
    kernel: about 1.6x faster than filtering a wide table through Acero's filter node."""
    plan = ac.Declaration.from_sequence(
        [
            ac.Declaration("table_source", ac.TableSourceNodeOptions(table)),
            ac.Declaration("project", ac.ProjectNodeOptions([expr], ["matches"])),
        ]
    )
    # One thread keeps the rows in order.
    return plan.to_table(use_threads=False).column(0)
