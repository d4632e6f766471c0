"""One scan request judged against one snapshot: what every strategy shares.

:class:`ScanContext` checks the request against the schema, folds the time range, the TTL and
the bounds into one set of bounds (and, when first asked for, one filter expression), finds
the range tombstones the scan must apply and the sources (SSTs, memtable slices) it may read,
and finishes the tables strategies produce: tombstones applied, filtered, projected, tags
dictionary encoded as asked. It also owns what the scan holds while it runs: the SSTs it has
pinned in the local cache, the footers it has parsed and its :class:`ScanStats`.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from gnomon.errors import InvalidArgument
from node.engine.bounds import Bounds, Range, all_of, bounds_expression, time_window
from node.engine.memtable import MemtableView
from node.engine.options import TableOptions
from node.engine.scan.request import (
    Order,
    ScanRequest,
    ScanStats,
    check_predicate,
    referenced_columns,
)
from node.engine.schema import KIND, SEQ, Schema
from node.engine.sst.meta import SstMeta
from node.engine.sst.reader import Part, SstFiles, conform_batches, kept, selected_mask
from node.engine.sst.row_groups import Runs
from node.engine.tombstones import RangeTombstone, columns_needed, drop_shadowed


@dataclass(frozen=True)
class Source:
    """One SST or memtable slice a scan may read, with its time range and whether it holds
    deletion markers."""

    min_ts: int
    max_ts: int
    sst: SstMeta | None = None
    mem: pa.Table | None = None
    deletes: bool = False

    @property
    def rows(self) -> int:
        if self.sst is not None:
            return self.sst.rows
        return self.mem.num_rows if self.mem is not None else 0


class ScanContext:
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
        self.sst_files = sst_files
        #: SSTs the scan opened, pinned in the local cache until it ends.
        self.pins = ExitStack()
        #: Parsed footers of the SSTs the scan opens, by local path (read once, cached).
        self.footers: dict[str, pq.FileMetaData] = {}
        self.storage = schema.storage_arrow()
        self.columns = list(request.columns) if request.columns is not None else schema.names
        for c in self.columns:
            if not schema.has_column(c):
                raise InvalidArgument(f"unknown column {c!r}")
        self.order: Order | None = request.order
        if request.limit_per_series is not None:
            if request.limit_per_series < 1:
                raise InvalidArgument("limit_per_series must be at least 1")
            if schema.primary_key[-1] != schema.timestamp_key:
                raise InvalidArgument(
                    "limit_per_series needs the timestamp key last in the primary key"
                )
            self.order = self.order or "desc"
        bounds = dict(request.bounds or {})
        for c in bounds:
            if not schema.has_column(c):
                raise InvalidArgument(f"unknown column {c!r} in scan bounds")
        lo, hi = request.time_range or (None, None)
        ts_key = schema.timestamp_key
        if ts_key in bounds:
            lo, hi = narrowed((lo, hi), time_window(bounds[ts_key]))
        if options.enable_ttl:
            floor = now_ms - options.ttl_ms
            lo = floor if lo is None else max(lo, floor)
        self.lo, self.hi = lo, hi
        # The time range (with the TTL) is a bound too, judged against row-group statistics;
        # in the filter it appears once, from the range.
        filtered = {c: r for c, r in bounds.items() if c != ts_key or r.values is not None}
        if lo is not None or hi is not None:
            window = Range(lo=lo, hi=hi, hi_inclusive=False)
            bounds[ts_key] = bounds[ts_key].intersect(window) if ts_key in bounds else window
        self.bounds: Bounds = bounds
        #: The bounds the filter expression judges (the time range appears there once).
        self.filtered_bounds: Bounds = filtered
        #: Columns the whole filter (predicate, time range, TTL, bounds) may read.
        self.filter_reads = set(bounds)
        #: Columns the predicate may read.
        self.filter_columns: set[str] = set()
        if request.predicate is not None:
            check_predicate(request.predicate, schema)
            self.filter_columns = set(referenced_columns(request.predicate, schema))
            self.filter_reads |= self.filter_columns
        data = [f for f in files if f.is_data]
        self.stats = ScanStats(ssts_total=len(data))
        #: Data SSTs overlapping the time range.
        self.files = [f for f in data if self.overlaps(f.min_ts, f.max_ts)]
        self.memtables = memtables
        self.ranges = self._range_tombstones(files, memtables)
        self.stats.range_tombstones = len(self.ranges)
        #: Columns the range tombstones judge.
        self.extra = columns_needed(self.ranges, schema) - {SEQ} if self.ranges else set[str]()
        #: Tag columns returned dictionary encoded; SSTs read on their own decode them so
        #: unless range tombstones, which compare plain values, must be applied.
        self.dictionary = (
            [t for t in schema.dictionary_tags if t in self.columns]
            if request.dictionary_tags
            else []
        )

    # -- what the scan reads ---------------------------------------------------------------------

    @functools.cached_property
    def read_columns(self) -> list[str]:
        """What merged and memtable sources read: the columns returned, the key, whatever
        the filter and the range tombstones judge, and the sequence and kind."""
        schema = self.schema
        needed = set(self.columns) | set(schema.primary_key) | {schema.timestamp_key}
        needed |= set(self.bounds) | self.filter_columns | self.extra
        return [n for n in schema.names if n in needed] + [SEQ, KIND]

    @functools.cached_property
    def read_schema(self) -> pa.Schema:
        """What merged and memtable sources are conformed to (SSTs read on their own are
        not)."""
        return self.schema.storage_projection(tuple(self.read_columns))

    @functools.cached_property
    def filter(self) -> pc.Expression | None:
        """The whole filter as one expression: the time range (with the TTL), the bounds and
        the predicate. Built when first asked for: a scan within bounds alone judges them
        without it, and building it costs as much as a point query's whole read."""
        ts = pc.field(self.schema.timestamp_key)
        typ = self.schema.column(self.schema.timestamp_key).type.arrow()
        parts: list[pc.Expression] = []
        if self.lo is not None:
            parts.append(ts >= pa.scalar(self.lo, typ))
        if self.hi is not None:
            parts.append(ts < pa.scalar(self.hi, typ))
        bounded = bounds_expression(self.filtered_bounds, self.schema.arrow())
        parts.extend(p for p in (bounded, self.request.predicate) if p is not None)
        return all_of(parts)

    @property
    def values_filtered(self) -> bool:
        """Whether the filter reads a column the primary key does not fix."""
        return bool(self.filter_reads - set(self.schema.key_columns))

    def direct_columns(self) -> list[str]:
        """What an SST read on its own returns: the columns asked for and those the range
        tombstones judge."""
        return [*self.columns, *sorted(self.extra - set(self.columns))]

    def overlaps(self, min_ts: int, max_ts: int) -> bool:
        return (self.lo is None or max_ts >= self.lo) and (self.hi is None or min_ts < self.hi)

    def _range_tombstones(
        self, files: Sequence[SstMeta], memtables: Sequence[MemtableView]
    ) -> list[RangeTombstone]:
        found: list[RangeTombstone] = []
        for f in files:
            if not f.is_data and self.overlaps(f.min_ts, f.max_ts):
                found.extend(self.sst_files.tombstones(f.path))
        for view in memtables:
            found.extend(view.ranges)
        return [t for t in found if self.overlaps(t.min_ts, t.max_ts)]

    def memtable_sources(self) -> list[Source]:
        """Each memtable view, split by segment window so that it only has to be merged with
        the SSTs of the windows it really overlaps."""
        return [
            Source(w.min_ts, w.max_ts, mem=w.rows, deletes=w.deletes)
            for view in self.memtables
            if view.batches and self.overlaps(view.min_ts, view.max_ts)
            for w in view.windows(self.options.segment_duration_ms)
            if self.overlaps(w.min_ts, w.max_ts)
        ]

    def sources(self) -> list[Source]:
        ssts = [Source(f.min_ts, f.max_ts, sst=f, deletes=f.deletes > 0) for f in self.files]
        return ssts + self.memtable_sources()

    def has_columns(self, sst: SstMeta, columns: Iterable[str]) -> bool:
        present = self.sst_files.columns(sst.path)
        return all(c in present for c in columns)

    def part(
        self,
        sst: SstMeta,
        groups: list[int],
        runs: Mapping[int, Runs] | None = None,
        decided: frozenset[str] = frozenset(),
    ) -> Part:
        """The part of ``sst`` a scan reads: ``groups``, those in ``runs`` only at those runs
        of rows (which satisfy the bounds on the ``decided`` columns), its local copy pinned
        until the scan ends; counted in the scan's stats."""
        files = self.sst_files
        footer = files.footer(sst.path)
        self.stats.row_groups_total += footer.num_row_groups
        self.stats.row_groups_read += len(groups)
        if groups:
            self.stats.ssts_read += 1
        local = self.pins.enter_context(files.pinned(sst.path))
        self.footers[local] = footer
        if runs is None:
            return Part(sst.path, local, groups)
        self.stats.row_groups_located += len(runs)
        return Part(sst.path, local, groups, runs, decided, self.schema.run_order)

    # -- finishing what strategies read ----------------------------------------------------------

    def conformed(self, batches: Sequence[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        present = set(batches[0].schema.names) if batches else set()
        selected = (b.select([c for c in self.read_columns if c in present]) for b in batches)
        return conform_batches(selected, self.read_schema, self.schema.fill_value)

    def conformed_table(self, table: pa.Table) -> pa.Table:
        return pa.Table.from_batches(
            list(self.conformed(table.to_batches())), schema=self.read_schema
        )

    def finish_all(self, tables: Iterable[pa.Table]) -> Iterator[pa.Table]:
        for table in tables:
            yield from self.finish(table)

    def finish(self, table: pa.Table, *, filtered: bool = False) -> Iterator[pa.Table]:
        yield from self.emit(self.visible(table, filtered=filtered))

    def visible(self, table: pa.Table, *, filtered: bool = False) -> pa.Table:
        """``table``'s rows no range tombstone shadows that pass the filter (unless
        ``filtered`` already)."""
        table = drop_shadowed(table, self.ranges, self.schema)
        if not filtered and self.filter is not None and table.num_rows:
            table = kept(table, self.matching(table, self.filter))
        return table

    def matching(self, table: pa.Table, whole: pc.Expression) -> np.ndarray[Any, Any]:
        """Which rows of ``table`` pass the filter ``whole``: judged as SST row groups are
        (bounds by kernels, the predicate on the columns it reads), about twice as fast as
        the whole filter through Acero, unless ``table`` lacks a column the filter reads."""
        judged = [*self.bounds, *self.filter_columns]
        if not all(c in table.column_names for c in judged):
            return selected_mask(table, {}, whole, ())
        return selected_mask(
            table, self.bounds, self.request.predicate, sorted(self.filter_columns)
        )

    def emit(self, table: pa.Table) -> Iterator[pa.Table]:
        """``table`` as the scan returns it: the columns asked for, tags dictionary encoded
        as asked; nothing for an empty table."""
        if table.num_rows == 0:
            return
        table = table.select(self.columns)
        for name in self.dictionary:
            i = table.schema.get_field_index(name)
            field = table.schema.field(i)
            if not pa.types.is_dictionary(field.type):
                encoded = pc.dictionary_encode(table.column(i))
                table = table.set_column(i, field.with_type(encoded.type), encoded)
        yield table


def narrowed(
    a: tuple[int | None, int | None], b: tuple[int | None, int | None]
) -> tuple[int | None, int | None]:
    """The intersection of two [start, end) windows (None: unbounded)."""
    lo = b[0] if a[0] is None else a[0] if b[0] is None else max(a[0], b[0])
    hi = b[1] if a[1] is None else a[1] if b[1] is None else min(a[1], b[1])
    return lo, hi
