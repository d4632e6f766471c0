"""The read path: plan a scan over one snapshot (an SST set plus memtable views) and stream it.

Unordered scans group sources per time overlap: SSTs and memtable slices whose time ranges
overlap may hold versions of the same key; a source that overlaps nothing is streamed on its
own, with the full filter pushed into the Parquet reader. A group whose sources overlap only in
narrow time zones (typically the one timestamp where two bulk loads or flushes meet) is read
source by source: rows outside the zones cannot have another version and stream through, rows
inside are collected and resolved together. Other groups go through the k-way merge. In APPEND
mode only groups holding row deletions need either. Ordered scans (``order``, or a per-series
limit) merge every source into one stream in primary-key order, forwards or backwards, so the
newest rows of a series come first without sorting the result.

Range tombstones of the snapshot (tombstone SSTs and memtables) that overlap the scan are
applied to every batch; row deletions are resolved by the merge. Columns a source predates
(ADD COLUMN) read as their default or null.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Iterator, Sequence, Set
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from gnomon.errors import InvalidArgument
from node.engine.bounds import Bounds, Range, all_of, bounds_expression, time_window
from node.engine.memtable import MemtableView
from node.engine.merge import merge_sorted, sort_resolve
from node.engine.options import TableOptions, UpdateMode
from node.engine.rows import key_at, same_as_next, strip_markers
from node.engine.schema import KIND, PUT, SEQ, Schema
from node.engine.sst.meta import SstMeta
from node.engine.sst.reader import (
    LocatedArrays,
    Part,
    Runs,
    SeriesIndex,
    SstFiles,
    conform_batches,
    kept,
    located_arrays,
    read_sorted,
    reversed_rows,
    scan_unordered,
    select_row_groups,
    selected_mask,
    series_guarantee,
)
from node.engine.tombstones import RangeTombstone, columns_needed, drop_shadowed

Order = Literal["asc", "desc"]

#: A group of overlapping sources is read source by source (not merged) when the rows expected
#: inside its overlap zones, which are held until the group ends, are at most this many.
SPLIT_MAX_ZONE_ROWS = 262_144


@dataclass(frozen=True)
class ScanRequest:
    columns: Sequence[str] | None = None
    #: [start, end) in milliseconds since the epoch; either bound may be None.
    time_range: tuple[int | None, int | None] | None = None
    predicate: pc.Expression | None = None
    batch_size: int = 65_536
    #: Primary-key order (within a series: time ascending) or its reverse; None: unordered.
    order: Order | None = None
    #: At most this many rows per series, the first ones in ``order`` (default "desc": the
    #: latest rows).
    limit_per_series: int | None = None
    #: Per-column bounds every returned row satisfies (see :mod:`node.engine.bounds`): they
    #: filter like ``predicate`` and prune files, row groups and series without judging an
    #: expression per row group.
    bounds: Bounds | None = None
    #: Return string tag columns dictionary encoded (decoded so from Parquet where possible).
    dictionary_tags: bool = False


@dataclass
class ScanStats:
    """What a scan touched, for EXPLAIN and for tests that prove pruning."""

    ssts_total: int = 0
    ssts_read: int = 0
    row_groups_total: int = 0
    row_groups_read: int = 0
    #: Row groups read only at the rows of the series wanted, which the series directory
    #: locates.
    row_groups_located: int = 0
    memtable_slices: int = 0
    merged_components: int = 0
    #: Groups of overlapping sources read source by source, only their overlap zones resolved.
    split_components: int = 0
    range_tombstones: int = 0
    #: Read as a located read: series' runs sliced from SSTs that need no merge, without the
    #: general plan.
    located: bool = False


@dataclass(frozen=True)
class _Source:
    min_ts: int
    max_ts: int
    sst: SstMeta | None = None
    mem: pa.Table | None = None
    deletes: bool = False


def referenced_columns(expr: pc.Expression, schema: Schema) -> list[str]:
    """Columns ``expr`` may reference (a superset): pyarrow expressions cannot be walked, but
    every field reference appears by name in their text."""
    text = str(expr)
    return [n for n in schema.names if re.search(rf"(?<![\w.\-]){re.escape(n)}(?![\w.\-])", text)]


def check_predicate(expr: pc.Expression, schema: Schema) -> None:
    try:
        pa.Table.from_batches([], schema.arrow()).filter(expr)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, TypeError) as e:
        raise InvalidArgument(f"invalid predicate {expr}: {e}") from None


class Scan:
    def __init__(
        self,
        schema: Schema,
        options: TableOptions,
        files: Sequence[SstMeta],
        memtables: Sequence[MemtableView],
        sst_files: SstFiles,
        request: ScanRequest,
        *,
        now_ms: int,
    ) -> None:
        self.schema = schema
        self.options = options
        self.request = request
        self._sst_files = sst_files
        self._pins = ExitStack()
        #: Parsed footers of the SSTs the scan opens, by local path (read once, cached).
        self._footers: dict[str, pq.FileMetaData] = {}
        self._storage = schema.storage_arrow()
        self.columns = list(request.columns) if request.columns is not None else schema.names
        for c in self.columns:
            if not schema.has_column(c):
                raise InvalidArgument(f"unknown column {c!r}")
        self._order: Order | None = request.order
        if request.limit_per_series is not None:
            if request.limit_per_series < 1:
                raise InvalidArgument("limit_per_series must be at least 1")
            if schema.primary_key[-1] != schema.timestamp_key:
                raise InvalidArgument(
                    "limit_per_series needs the timestamp key last in the primary key"
                )
            self._order = self._order or "desc"
        bounds = dict(request.bounds or {})
        for c in bounds:
            if not schema.has_column(c):
                raise InvalidArgument(f"unknown column {c!r} in scan bounds")
        lo, hi = request.time_range or (None, None)
        ts_key = schema.timestamp_key
        if ts_key in bounds:
            lo, hi = _narrowed((lo, hi), time_window(bounds[ts_key]))
        if options.enable_ttl:
            floor = now_ms - options.ttl_ms
            lo = floor if lo is None else max(lo, floor)
        self._lo, self._hi = lo, hi
        # The time range (with the TTL) is a bound too, judged against row-group statistics;
        # in the filter it appears once, from the range.
        filtered = {c: r for c, r in bounds.items() if c != ts_key or r.values is not None}
        if lo is not None or hi is not None:
            window = Range(lo=lo, hi=hi, hi_inclusive=False)
            bounds[ts_key] = bounds[ts_key].intersect(window) if ts_key in bounds else window
        self._bounds = bounds
        self._filtered_bounds = filtered
        #: Columns the whole filter (predicate, time range, TTL, bounds) may read.
        self._filter_reads = set(bounds)
        if request.predicate is not None:
            self._filter_reads |= set(referenced_columns(request.predicate, schema))
        data = [f for f in files if f.is_data]
        self.stats = ScanStats(ssts_total=len(data))
        self._files = [f for f in data if self._overlaps(f.min_ts, f.max_ts)]
        self._memtables = memtables
        self._ranges = self._range_tombstones(files, memtables)
        self.stats.range_tombstones = len(self._ranges)
        self._filter_columns: set[str] = set()
        if request.predicate is not None:
            check_predicate(request.predicate, schema)
            self._filter_columns = set(referenced_columns(request.predicate, schema))
        self._extra = columns_needed(self._ranges, schema) - {SEQ} if self._ranges else set[str]()
        self._unordered_plan: _UnorderedPlan | None = None
        #: Tag columns returned dictionary encoded; SSTs read on their own decode them so
        #: unless range tombstones, which compare plain values, must be applied.
        self._dictionary = (
            [t for t in schema.dictionary_tags if t in self.columns]
            if request.dictionary_tags
            else []
        )

    # -- planning --------------------------------------------------------------------------------

    @functools.cached_property
    def _read_columns(self) -> list[str]:
        """What merged and memtable sources read: the columns returned, the key, whatever
        the filter and the range tombstones judge, and the sequence and kind."""
        schema = self.schema
        needed = set(self.columns) | set(schema.primary_key) | {schema.timestamp_key}
        needed |= set(self._bounds) | self._filter_columns | self._extra
        return [n for n in schema.names if n in needed] + [SEQ, KIND]

    @functools.cached_property
    def _read_schema(self) -> pa.Schema:
        """What merged and memtable sources are conformed to (SSTs read on their own are
        not)."""
        return self.schema.storage_projection(tuple(self._read_columns))

    @functools.cached_property
    def filter(self) -> pc.Expression | None:
        """The whole filter as one expression: the time range (with the TTL), the bounds and
        the predicate. Built when first asked for: a scan within bounds alone judges them
        without it, and building it costs as much as a point query's whole read."""
        ts = pc.field(self.schema.timestamp_key)
        typ = self.schema.column(self.schema.timestamp_key).type.arrow()
        parts: list[pc.Expression] = []
        if self._lo is not None:
            parts.append(ts >= pa.scalar(self._lo, typ))
        if self._hi is not None:
            parts.append(ts < pa.scalar(self._hi, typ))
        bounded = bounds_expression(self._filtered_bounds, self.schema.arrow())
        parts.extend(p for p in (bounded, self.request.predicate) if p is not None)
        return all_of(parts)

    def _overlaps(self, min_ts: int, max_ts: int) -> bool:
        return (self._lo is None or max_ts >= self._lo) and (self._hi is None or min_ts < self._hi)

    def _range_tombstones(
        self, files: Sequence[SstMeta], memtables: Sequence[MemtableView]
    ) -> list[RangeTombstone]:
        found: list[RangeTombstone] = []
        for f in files:
            if not f.is_data and self._overlaps(f.min_ts, f.max_ts):
                found.extend(self._sst_files.tombstones(f.path))
        for view in memtables:
            found.extend(view.ranges)
        return [t for t in found if self._overlaps(t.min_ts, t.max_ts)]

    def _memtable_sources(self) -> list[_Source]:
        """Each memtable view, split by segment window so that it only has to be merged with
        the SSTs of the windows it really overlaps."""
        return [
            _Source(w.min_ts, w.max_ts, mem=w.rows, deletes=w.deletes)
            for view in self._memtables
            if view.batches and self._overlaps(view.min_ts, view.max_ts)
            for w in view.windows(self.options.segment_duration_ms)
            if self._overlaps(w.min_ts, w.max_ts)
        ]

    def _sources(self) -> list[_Source]:
        ssts = [_Source(f.min_ts, f.max_ts, sst=f, deletes=f.deletes > 0) for f in self._files]
        return ssts + self._memtable_sources()

    def _components(self) -> list[list[_Source]]:
        sources = self._sources()
        sources.sort(key=lambda s: s.min_ts)
        groups: list[list[_Source]] = []
        end = None
        for s in sources:
            if groups and end is not None and s.min_ts <= end:
                groups[-1].append(s)
                end = max(end, s.max_ts)
            else:
                groups.append([s])
                end = s.max_ts
        if self.options.update_mode is UpdateMode.APPEND:
            # Without deletions nothing shadows anything: every source stands alone.
            groups = [
                part
                for g in groups
                for part in ([g] if any(s.deletes for s in g) else [[s] for s in g])
            ]
        return groups

    # -- execution -------------------------------------------------------------------------------

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        for table in self._tables():
            yield from table.to_batches(max_chunksize=self.request.batch_size)

    def to_table(self) -> pa.Table:
        """Every row the scan returns, as one table (for small results: a table per
        source would be cut into batches only to be put together again)."""
        tables = list(self._tables())
        if len(tables) == 1:
            return tables[0]
        if not tables:
            schema = self.schema.arrow(dictionary_tags=self.request.dictionary_tags)
            return pa.schema([schema.field(c) for c in self.columns]).empty_table()
        return pa.concat_tables(tables)

    def located_arrays(self) -> LocatedArrays | None:
        """The rows of a located read as numpy arrays, one per column asked for, in the
        order :meth:`to_table` gives them (timestamps as integers of their unit), and
        whether that is time order: what an aggregation in numpy takes, without the tables
        in between. None for any other scan, and where numpy would not hold the columns as
        read (see :func:`located_arrays`): :meth:`to_table` reads those."""
        located = self._located
        if located is None:
            return None
        ts_key = self.schema.timestamp_key
        done = True  # the files are unpinned, unless to_table is to read them after all
        try:
            arrays = located_arrays(
                located,
                self.schema,
                self.columns,
                decoded=self._sst_files.decoded,
                bounds={ts_key: self._bounds[ts_key]} if ts_key in self._bounds else {},
                footers=self._footers,
            )
            done = arrays is not None
            return arrays
        finally:
            if done:
                self._pins.close()

    def _tables(self) -> Iterator[pa.Table]:
        """The rows, a table per source or group of sources read together, keeping every
        SST the scan opens pinned in the local cache until the scan ends."""
        with self._pins:
            yield from self._ordered() if self._order is not None else self._unordered()

    def estimated_rows(self) -> int:
        """Rows the scan reads at most (before filtering): those of the row groups pruning
        keeps of SSTs read on their own, and every row of memtables and merged SSTs."""
        if self._order is not None:
            return sum(_rows(s) for s in self._sources())
        located = self._located
        if located is not None:
            return sum(b - a for p in located for runs in p.runs.values() for a, b in runs)
        plan = self._plan()
        direct = sum(
            self._footers[part.path].row_group(rg).num_rows
            for parts in plan.direct.values()
            for part in parts
            for rg in part.row_groups
        )
        mem = sum(t.num_rows for t in plan.memtables)
        grouped = sum(_rows(s) for g, _ in plan.split for s in g)
        return direct + mem + grouped + sum(_rows(s) for g in plan.merged for s in g)

    def _plan(self) -> _UnorderedPlan:
        """The unordered scan's plan, made once (pruning happens here)."""
        if self._unordered_plan is None:
            self._unordered_plan = self._make_plan()
        return self._unordered_plan

    def _make_plan(self) -> _UnorderedPlan:
        direct_ssts: dict[bool, list[SstMeta]] = {False: [], True: []}
        plan = _UnorderedPlan()
        components = self._components()
        direct_columns = self._direct_columns()
        for group in components:
            s = group[0]
            if len(group) > 1:
                zones = overlap_zones([(x.min_ts, x.max_ts) for x in group])
                if _rows_in(group, zones) <= SPLIT_MAX_ZONE_ROWS:
                    plan.split.append((group, zones))
                else:
                    plan.merged.append(group)
            elif s.mem is not None:
                plan.memtables.append(s.mem)
            elif s.sst is not None and self._has_columns(
                s.sst, [*direct_columns, *self._filter_columns, *self._bounds]
            ):
                direct_ssts[s.deletes].append(s.sst)
            else:
                plan.merged.append(group)
        self.stats.memtable_slices = sum(1 for g in components for s in g if s.mem is not None)
        self.stats.merged_components = sum(1 for g in plan.merged if len(g) > 1)
        self.stats.split_components = len(plan.split)
        plan.direct = {
            d: self._pruned_all(ssts, self.schema.names) for d, ssts in direct_ssts.items()
        }
        if self.request.predicate is None and self._bounds:
            # The filter is the bounds alone: files whose statistics prove every row read
            # satisfies them are read unfiltered (a time range query's inner files).
            plan.covered = {
                part.path
                for parts in plan.direct.values()
                for part in parts
                if part.row_groups
                and self._sst_files.covered(part.file, self._bounds, part.row_groups)
            }
        return plan

    def _direct_columns(self) -> list[str]:
        return [*self.columns, *sorted(self._extra - set(self.columns))]

    @functools.cached_property
    def _located(self) -> list[Part] | None:
        """The parts of a located read, when the scan is one: rows of the series one tag's
        values name, within a time range, from SSTs that need no merge (in the range: no
        memtable rows, range tombstones, deletion markers or, but in APPEND mode,
        overlapping files) and whose series directories locate those series' rows, read
        as sliced runs narrowed to the time range by binary search. Such a read needs no
        filter and no general plan: this planning is a point query's whole planning, at a
        fraction of the general one's calls. None for any other scan."""
        ts_key = self.schema.timestamp_key
        tags = [c for c in self._bounds if c != ts_key]
        if (
            self._order is not None
            or self.request.predicate is not None
            or self._ranges
            or self.schema.run_order != ts_key
            or len(tags) != 1
            or tags[0] not in self.schema.tags
            or self._bounds[tags[0]].values is None
            or ts_key in self._filtered_bounds  # timestamp IN (...): not a range
            or any(v.batches and self._overlaps(v.min_ts, v.max_ts) for v in self._memtables)
        ):
            return None
        ssts = sorted(self._files, key=lambda f: f.min_ts)
        columns = [*self._direct_columns(), *self._bounds]
        if any(f.deletes or not self._has_columns(f, columns) for f in ssts):
            return None
        if self.options.update_mode is UpdateMode.OVERWRITE and any(
            b.min_ts <= a.max_ts for a, b in itertools.pairwise(ssts)
        ):
            return None
        files = self._sst_files
        wanted = frozenset(_listed(self._bounds[tags[0]]))
        window = {ts_key: self._bounds[ts_key]} if ts_key in self._bounds else {}
        located: list[tuple[SstMeta, list[int], dict[int, Runs]]] = []
        for sst in ssts:
            index = files.series(sst.path, tags)
            if index.unlisted:
                return None
            groups = files.row_groups_within(sst.path, window, index.holding(wanted))
            runs = _Held(index, wanted, frozenset(groups)).runs(groups)
            if len(runs) < len(groups):
                return None  # a row group whose series' rows the directory does not place
            located.append((sst, groups, runs))
        parts = [self._part(sst, groups, runs, frozenset(tags)) for sst, groups, runs in located]
        self.stats.located = True
        return parts

    def _unordered(self) -> Iterator[pa.Table]:
        located = self._located
        if located is not None:
            # Every row read is wanted (the runs decide the tag, so it is not read unless
            # asked for, and their narrowing the time range), nothing shadows anything, and
            # the read gives the columns asked for, tags dictionary encoded as asked: the
            # rows are the answer as read.
            ts_key = self.schema.timestamp_key
            yield from scan_unordered(
                located,
                self.schema,
                self.columns,
                decoded=self._sst_files.decoded,
                bounds={ts_key: self._bounds[ts_key]} if ts_key in self._bounds else None,
                footers=self._footers,
                dictionary=self._dictionary,
            )
            return
        plan = self._plan()
        for table in plan.memtables:
            yield from self._finish(self._conformed_table(strip_markers(table)))
        for deletes, parts in plan.direct.items():
            yield from self._lone(parts, deletes=deletes, covered=plan.covered)
        for group, zones in plan.split:
            yield from self._split(group, zones)
        for group in plan.merged:
            yield from self._finish_all(self._merge(group, descending=False))

    def _lone(
        self,
        parts: Sequence[Part],
        *,
        deletes: bool,
        covered: Set[str] = frozenset(),
        outside: Sequence[tuple[int, int]] = (),
    ) -> Iterator[pa.Table]:
        """Rows of SST ``parts`` no other source has versions of (those ``outside`` the
        given [lo, hi) time zones), read through the decoded chunk cache and filtered there;
        parts in ``covered`` need no filter by the bounds."""
        if not parts:
            return
        # A lone source's deletion markers shadow nothing else: they are just left out.
        # The filter reads columns the scan may not return, so a source that needs no
        # merge reads only the requested columns and those.
        kind = pc.field(KIND) == pa.scalar(PUT, pa.uint8()) if deletes else None
        excluded = [self._outside(lo, hi) for lo, hi in outside]
        extra = all_of(p for p in (kind, *excluded) if p is not None)
        extra_columns = [KIND] if deletes else []
        if outside:
            extra_columns.append(self.schema.timestamp_key)
        predicate = all_of(p for p in (self.request.predicate, extra) if p is not None)
        columns = self._direct_columns()
        with_seq = [*columns, SEQ] if self._ranges else columns
        for whole in (True, False):
            for table in scan_unordered(
                [p for p in parts if (p.path in covered) == whole],
                self.schema,
                with_seq,
                decoded=self._sst_files.decoded,
                bounds=None if whole else self._bounds,
                predicate=extra if whole else predicate,
                predicate_columns=[*self._filter_columns, *extra_columns],
                footers=self._footers,
                dictionary=() if self._ranges else self._dictionary,
            ):
                yield from self._finish(table, filtered=True)

    def _outside(self, lo: int, hi: int) -> pc.Expression:
        """Rows whose timestamp lies outside [lo, hi)."""
        ts = pc.field(self.schema.timestamp_key)
        typ = self.schema.column(self.schema.timestamp_key).type.arrow()
        return ~((ts >= pa.scalar(lo, typ)) & (ts < pa.scalar(hi, typ)))

    def _ordered(self) -> Iterator[pa.Table]:
        sources = self._sources()
        self.stats.memtable_slices = sum(1 for s in sources if s.mem is not None)
        self.stats.merged_components = 1 if len(sources) > 1 else 0
        tables = self._merge(sources, descending=self._order == "desc")
        return self._finish_all(tables, limit=self.request.limit_per_series)

    def _has_columns(self, sst: SstMeta, columns: Sequence[str]) -> bool:
        present = self._sst_files.columns(sst.path)
        return all(c in present for c in columns)

    def _pruned(
        self, sst: SstMeta, stat_columns: Sequence[str], bounds: Bounds | None = None
    ) -> Part:
        return self._pruned_all([sst], stat_columns, bounds)[0]

    def _pruned_all(
        self, ssts: Sequence[SstMeta], stat_columns: Sequence[str], bounds: Bounds | None = None
    ) -> list[Part]:
        """Each SST's key, local path and the row groups that may hold matching rows (within
        ``bounds``, by default the scan's): when the filter names tags, first by the series
        they hold (which also locates those series' rows), then by their statistics."""
        if not ssts:
            return []
        files = self._sst_files
        bounds = self._bounds if bounds is None else bounds
        bounded = {c: r for c, r in bounds.items() if c in stat_columns}
        tags = [t for t in self.schema.tags if t in self._filter_reads and t in stat_columns]
        held = self._by_series(ssts, tags, bounds) if tags else [None] * len(ssts)
        selected: list[list[int]] = []
        for sst, series in zip(ssts, held, strict=True):
            if series is None:
                selected.append(files.row_groups_within(sst.path, bounded))
            elif series.row_groups:
                # A directory listing every row group decides the tag bounds: their
                # statistics cannot rule out a row group holding an admitted series.
                judged = (
                    bounded
                    if series.index.unlisted
                    else {c: r for c, r in bounded.items() if c not in tags}
                )
                selected.append(files.row_groups_within(sst.path, judged, series.row_groups))
            else:
                selected.append([])  # none of the series wanted: no statistics to judge
        if self.request.predicate is not None:
            # Only columns the filter names can rule anything out; a guarantee naming the
            # others too would only make pyarrow's simplification slower (it grows with the
            # guarantee).
            judged_columns = [c for c in stat_columns if c in self._filter_reads]
            stats = [files.guarantees(s.path, self._storage, judged_columns) for s in ssts]
            picked = select_row_groups(
                [[[g[rg]] for rg in groups] for g, groups in zip(stats, selected, strict=True)],
                self._storage,
                self.filter,
            )
            selected = [
                [groups[i] for i in kept] for groups, kept in zip(selected, picked, strict=True)
            ]
        # Rows sliced out by series satisfy the bounds on their tags.
        return [
            self._part(sst, groups)
            if series is None
            else self._part(sst, groups, series.runs(groups), frozenset(tags))
            for sst, groups, series in zip(ssts, selected, held, strict=True)
        ]

    def _part(
        self,
        sst: SstMeta,
        groups: list[int],
        runs: dict[int, Runs] | None = None,
        decided: frozenset[str] = frozenset(),
    ) -> Part:
        """The part of ``sst`` a scan reads: ``groups``, those in ``runs`` only at those runs
        of rows (which satisfy the bounds on the ``decided`` columns), its local copy pinned
        until the scan ends; counted in the scan's stats."""
        files = self._sst_files
        footer = files.footer(sst.path)
        self.stats.row_groups_total += footer.num_row_groups
        self.stats.row_groups_read += len(groups)
        if groups:
            self.stats.ssts_read += 1
        local = self._pins.enter_context(files.pinned(sst.path))
        self._footers[local] = footer
        if runs is None:
            return Part(sst.path, local, groups)
        self.stats.row_groups_located += len(runs)
        return Part(sst.path, local, groups, runs, decided, self.schema.run_order)

    def _by_series(
        self, ssts: Sequence[SstMeta], tags: list[str], bounds: Bounds
    ) -> list[_Held | None]:
        """Of each SST whose series directory lists ``tags``, the row groups holding a
        series the filter may match (None for one listing none). Each distinct
        series is judged once, however many row groups hold it."""
        indexes = [self._sst_files.series(s.path, tags) for s in ssts]
        bounded = [(i, bounds[t]) for i, t in enumerate(tags) if t in bounds]
        if len(tags) == 1 and bounded and bounded[0][1].values is not None:
            # One tag IN a few values: those are the candidates (a value no file holds
            # selects no row group), not every series of every file.
            admitted = _listed(bounded[0][1])
        else:
            distinct = set().union(*(i.row_groups for i in indexes))
            admitted = [c for c in distinct if all(r.admits(c[i]) for i, r in bounded)]
        if admitted and self.request.predicate is not None:
            guarantees = [[series_guarantee(self._storage, tags, c)] for c in admitted]
            (matching,) = select_row_groups([guarantees], self._storage, self.filter)
            admitted = [admitted[i] for i in matching]
        wanted = frozenset(admitted)
        return [_Held(i, wanted, i.holding(admitted)) if i.row_groups else None for i in indexes]

    def _read(self, s: _Source, *, descending: bool) -> Iterator[pa.RecordBatch]:
        """One source's rows in key order with the key, sequence and kind columns, conformed
        to the read schema; SST row groups are pruned on key columns only, so a newer version
        that does not match the filter still shadows an older one that does."""
        if s.mem is not None:
            mem = s.mem.to_batches(max_chunksize=self.request.batch_size)
            if descending:
                mem = [reversed_rows(b) for b in reversed(mem)]
            return self._conformed(mem)
        assert s.sst is not None
        part = self._pruned(s.sst, self.schema.key_columns)
        present = self._sst_files.columns(s.sst.path)
        batches = read_sorted(
            part.path,
            part.row_groups,
            [c for c in self._read_columns if c in present],
            self.request.batch_size,
            descending=descending,
            metadata=self._footers.get(part.path),
            decoded=(self._sst_files.decoded, part.file),
        )
        return conform_batches(batches, self._read_schema, self.schema.fill_value)

    def _merge(self, group: Sequence[_Source], *, descending: bool) -> Iterator[pa.Table]:
        inputs = [self._read(s, descending=descending) for s in group]
        dedup = self.options.update_mode is UpdateMode.OVERWRITE
        return merge_sorted(inputs, self.schema.primary_key, dedup=dedup, descending=descending)

    def _split(
        self, group: Sequence[_Source], zones: Sequence[tuple[int, int]]
    ) -> Iterator[pa.Table]:
        """Rows of ``group`` (sources each resolved on their own) outside the overlap
        ``zones`` [lo, hi) have no version in another source: they stream as they are read,
        without their deletion markers, which shadow nothing else. Rows inside are collected
        and resolved together once every source is read."""
        lows = np.array([lo for lo, _ in zones], dtype=np.int64)
        highs = np.array([hi for _, hi in zones], dtype=np.int64)
        inside: list[pa.Table] = []
        hull = Range(lo=int(lows.min()), hi=int(highs.max()), hi_inclusive=False)
        direct = [*self._direct_columns(), *self._filter_columns, *self._bounds]
        for s in group:
            if s.sst is not None and self._values_filtered and self._has_columns(s.sst, direct):
                # A filter on values drops most rows early: the rows outside the zones are
                # read as a lone SST's, filtered in the read; those inside apart.
                parts = self._pruned_all([s.sst], self.schema.names)
                yield from self._lone(parts, deletes=s.deletes, outside=zones)
                inside.extend(
                    t.filter(pa.array(self._in_zones(t, lows, highs)))
                    for t in self._source_rows(s, hull)
                )
                continue
            for table in self._source_rows(s):
                in_zone = self._in_zones(table, lows, highs)
                if in_zone.any():
                    inside.append(table.filter(pa.array(in_zone)))
                # Outside the zones the filter (and the markers' removal) is one mask.
                keep = ~in_zone & (table.column(KIND).to_numpy() == PUT)
                if self.filter is not None and keep.any():
                    keep &= self._matching(table, self.filter)
                if keep.any():
                    yield from self._finish(kept(table, keep), filtered=True)
        if inside:
            dedup = self.options.update_mode is UpdateMode.OVERWRITE
            rows = sort_resolve(
                pa.concat_tables(inside),
                self.schema.primary_key,
                dedup=dedup,
                keep_markers=False,
                descending=False,
            )
            yield from self._finish(rows)

    @property
    def _values_filtered(self) -> bool:
        """Whether the filter reads a column the primary key does not fix."""
        return bool(self._filter_reads - set(self.schema.key_columns))

    def _source_rows(self, s: _Source, within: Range | None = None) -> Iterator[pa.Table]:
        """One source's rows within the scan's bounds on key columns (the only ones that
        cannot drop a newer version shadowing an older one) and the time range ``within``,
        markers included, conformed to the read schema, in no particular order: an SST's
        through the decoded chunk cache."""
        if s.sst is None:
            yield from (pa.Table.from_batches([b]) for b in self._read(s, descending=False))
            return
        keyed = {c: r for c, r in self._bounds.items() if c in self.schema.key_columns}
        if within is not None:
            ts_key = self.schema.timestamp_key
            keyed[ts_key] = keyed[ts_key].intersect(within) if ts_key in keyed else within
        part = self._pruned(s.sst, self.schema.key_columns, keyed)
        present = self._sst_files.columns(s.sst.path)
        for table in scan_unordered(
            [part],
            self.schema,
            [c for c in self._read_columns if c in present],
            decoded=self._sst_files.decoded,
            bounds=keyed,
            footers=self._footers,
        ):
            yield self._conformed_table(table)

    def _in_zones(
        self,
        batch: pa.RecordBatch | pa.Table,
        lows: np.ndarray[Any, Any],
        highs: np.ndarray[Any, Any],
    ) -> np.ndarray[Any, Any]:
        """Which rows of ``batch`` lie in one of the zones [``lows[i]``, ``highs[i]``)."""
        ts = batch.column(self.schema.timestamp_key).cast(pa.int64()).to_numpy()
        zone = np.searchsorted(lows, ts, side="right") - 1
        return (zone >= 0) & (ts < highs[np.maximum(zone, 0)])

    def _conformed(self, batches: Sequence[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        present = set(batches[0].schema.names) if batches else set()
        selected = (b.select([c for c in self._read_columns if c in present]) for b in batches)
        return conform_batches(selected, self._read_schema, self.schema.fill_value)

    def _conformed_table(self, table: pa.Table) -> pa.Table:
        return pa.Table.from_batches(
            list(self._conformed(table.to_batches())), schema=self._read_schema
        )

    def _finish_all(
        self, tables: Iterator[pa.Table], *, limit: int | None = None
    ) -> Iterator[pa.Table]:
        visible: Iterator[pa.Table] = (self._visible(t) for t in tables)
        if limit is not None:
            visible = _limit_per_series(visible, self.schema.series_key, limit)
        for table in visible:
            yield from self._emit(table)

    def _finish(self, table: pa.Table, *, filtered: bool = False) -> Iterator[pa.Table]:
        yield from self._emit(self._visible(table, filtered=filtered))

    def _visible(self, table: pa.Table, *, filtered: bool = False) -> pa.Table:
        table = drop_shadowed(table, self._ranges, self.schema)
        if not filtered and self.filter is not None and table.num_rows:
            table = kept(table, self._matching(table, self.filter))
        return table

    def _matching(self, table: pa.Table, whole: pc.Expression) -> np.ndarray[Any, Any]:
        """Which rows of ``table`` pass the filter ``whole``: judged as SST row groups are
        (bounds by kernels, the predicate on the columns it reads), about twice as fast as
        the whole filter through Acero, unless ``table`` lacks a column the filter reads."""
        judged = [*self._bounds, *self._filter_columns]
        if not all(c in table.column_names for c in judged):
            return selected_mask(table, {}, whole, ())
        return selected_mask(
            table, self._bounds, self.request.predicate, sorted(self._filter_columns)
        )

    def _emit(self, table: pa.Table) -> Iterator[pa.Table]:
        if table.num_rows == 0:
            return
        table = table.select(self.columns)
        for name in self._dictionary:
            i = table.schema.get_field_index(name)
            field = table.schema.field(i)
            if not pa.types.is_dictionary(field.type):
                encoded = pc.dictionary_encode(table.column(i))
                table = table.set_column(i, field.with_type(encoded.type), encoded)
        yield table


def _limit_per_series(
    tables: Iterator[pa.Table], series: Sequence[str], limit: int
) -> Iterator[pa.Table]:
    """The first ``limit`` rows of each run of equal ``series`` values, across tables that
    continue one another (a run may span many)."""
    last: tuple[object, ...] | None = None
    carried = 0
    for table in tables:
        n = table.num_rows
        if n == 0:
            continue
        starts = np.append(True, ~same_as_next(table, series)) if series else np.zeros(n, bool)
        if not series:
            starts[0] = True
        run = np.cumsum(starts) - 1
        first = np.flatnonzero(starts)
        pos = np.arange(n) - first[run]
        if last is not None and key_at(table, series, 0) == last:
            pos[run == 0] += carried
        last, carried = key_at(table, series, n - 1), int(pos[-1]) + 1
        kept = table.filter(pa.array(pos < limit))
        if kept.num_rows:
            yield kept


@dataclass
class _UnorderedPlan:
    """What an unordered scan reads and how: memtable slices and SSTs (with the row groups
    pruning keeps, split by whether they hold deletion markers) read on their own, groups
    of overlapping sources read one by one with their overlap zones, and groups merged."""

    memtables: list[pa.Table] = field(default_factory=list)
    direct: dict[bool, list[Part]] = field(default_factory=dict)
    split: list[tuple[list[_Source], list[tuple[int, int]]]] = field(default_factory=list)
    merged: list[list[_Source]] = field(default_factory=list)
    #: Local paths of direct SSTs whose statistics prove every row read passes the filter.
    covered: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class _Held:
    """Of one SST, the series a scan admits and the row groups that may hold them."""

    index: SeriesIndex
    admitted: Set[tuple[Any, ...]]
    row_groups: Set[int]

    def runs(self, groups: Sequence[int]) -> dict[int, Runs]:
        """Of ``groups``, those whose admitted series the directory locates, with their rows."""
        out: dict[int, Runs] = {}
        for rg in groups:
            rows = self.index.rows(self.admitted, rg)
            if rows is not None:
                out[rg] = rows
        return out


def _listed(r: Range) -> list[tuple[Any, ...]]:
    """The series (of one tag) a bound listing that tag's values admits."""
    return [(v,) for v in r.values or () if r.admits(v)]


def _rows(s: _Source) -> int:
    return s.sst.rows if s.sst is not None else s.mem.num_rows if s.mem is not None else 0


def _narrowed(
    a: tuple[int | None, int | None], b: tuple[int | None, int | None]
) -> tuple[int | None, int | None]:
    """The intersection of two [start, end) windows (None: unbounded)."""
    lo = b[0] if a[0] is None else a[0] if b[0] is None else max(a[0], b[0])
    hi = b[1] if a[1] is None else a[1] if b[1] is None else min(a[1], b[1])
    return lo, hi


def overlap_zones(ranges: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """The time zones [lo, hi) covered by two or more of ``ranges`` (inclusive bounds)."""
    # Half-open ends; at one instant ends sort before starts, so touching ranges do not meet.
    events = sorted([(lo, 1) for lo, _ in ranges] + [(hi + 1, -1) for _, hi in ranges])
    zones: list[tuple[int, int]] = []
    depth = 0
    start = 0
    for at, step in events:
        depth += step
        if step > 0 and depth == 2:
            start = at
        elif step < 0 and depth == 1:
            if zones and zones[-1][1] == start:
                zones[-1] = (zones[-1][0], at)
            else:
                zones.append((start, at))
    return zones


def _rows_in(group: Sequence[_Source], zones: Sequence[tuple[int, int]]) -> float:
    """The rows of ``group`` expected inside ``zones``, taking each source's rows as spread
    evenly over its time range."""
    total = 0.0
    for s in group:
        rows = _rows(s)
        span = s.max_ts - s.min_ts + 1
        covered = sum(max(0, min(hi, s.max_ts + 1) - max(lo, s.min_ts)) for lo, hi in zones)
        total += rows * covered / span
    return total
