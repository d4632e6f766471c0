"""The read path: plan a scan over one snapshot (an SST set plus memtable views) and stream it.

Sources are grouped per time overlap: SSTs and memtable slices whose time ranges overlap may
hold versions of the same key and go through the k-way merge; a source that overlaps nothing is
streamed on its own, with the full filter pushed into the Parquet reader. In APPEND mode nothing
needs merging. Output order is unspecified across sources.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from gnomon.errors import InvalidArgument
from node.engine.memtable import MemtableView
from node.engine.merge import merge_sorted
from node.engine.options import TableOptions, UpdateMode
from node.engine.schema import SEQ, Schema
from node.engine.sst.meta import SstMeta
from node.engine.sst.reader import SstFiles, prune_row_groups, read_sorted, scan_unordered


@dataclass(frozen=True)
class ScanRequest:
    columns: Sequence[str] | None = None
    #: [start, end) in milliseconds since the epoch; either bound may be None.
    time_range: tuple[int | None, int | None] | None = None
    predicate: pc.Expression | None = None
    batch_size: int = 65_536


@dataclass
class ScanStats:
    """What a scan touched, for EXPLAIN and for tests that prove pruning."""

    ssts_total: int = 0
    ssts_read: int = 0
    row_groups_total: int = 0
    row_groups_read: int = 0
    memtable_slices: int = 0
    merged_components: int = 0


@dataclass(frozen=True)
class _Source:
    min_ts: int
    max_ts: int
    sst: SstMeta | None = None
    mem: pa.Table | None = None


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
        self.stats = ScanStats(ssts_total=len(files))
        self._sst_files = sst_files
        self._storage = schema.storage_arrow()
        self.columns = list(request.columns) if request.columns is not None else schema.names
        for c in self.columns:
            if not schema.has_column(c):
                raise InvalidArgument(f"unknown column {c!r}")
        lo, hi = request.time_range or (None, None)
        if options.enable_ttl:
            floor = now_ms - options.ttl_ms
            lo = floor if lo is None else max(lo, floor)
        self._lo, self._hi = lo, hi
        self.filter = self._build_filter(request.predicate)
        needed = set(self.columns) | set(schema.primary_key) | {schema.timestamp_key}
        if request.predicate is not None:
            check_predicate(request.predicate, schema)
            needed |= set(referenced_columns(request.predicate, schema))
        self._read_columns = [n for n in schema.names if n in needed] + [SEQ]
        self._files = [f for f in files if self._overlaps(f.min_ts, f.max_ts)]
        self._memtables = memtables

    # -- planning --------------------------------------------------------------------------------

    def _build_filter(self, predicate: pc.Expression | None) -> pc.Expression | None:
        ts = pc.field(self.schema.timestamp_key)
        typ = self.schema.column(self.schema.timestamp_key).type.arrow()
        parts: list[pc.Expression] = []
        if self._lo is not None:
            parts.append(ts >= pa.scalar(self._lo, type=pa.int64()).cast(typ))
        if self._hi is not None:
            parts.append(ts < pa.scalar(self._hi, type=pa.int64()).cast(typ))
        if predicate is not None:
            parts.append(predicate)
        if not parts:
            return None
        out = parts[0]
        for p in parts[1:]:
            out = out & p
        return out

    def _overlaps(self, min_ts: int, max_ts: int) -> bool:
        return (self._lo is None or max_ts >= self._lo) and (self._hi is None or min_ts < self._hi)

    def _memtable_sources(self) -> list[_Source]:
        """Each memtable view, split by segment window so that it only has to be merged with
        the SSTs of the windows it really overlaps."""
        seg = self.options.segment_duration_ms
        out: list[_Source] = []
        for view in self._memtables:
            if view.batches == 0 or not self._overlaps(view.min_ts, view.max_ts):
                continue
            table = view.sorted()
            ts = table.column(self.schema.timestamp_key).cast(pa.int64()).to_numpy()
            windows = np.floor_divide(ts, seg)
            for w in np.unique(windows):
                part = table.filter(pa.array(windows == w))
                lo, hi = int(ts[windows == w].min()), int(ts[windows == w].max())
                if self._overlaps(lo, hi):
                    out.append(_Source(lo, hi, mem=part))
        return out

    def _components(self) -> list[list[_Source]]:
        sources = [_Source(f.min_ts, f.max_ts, sst=f) for f in self._files]
        sources += self._memtable_sources()
        if self.options.update_mode is UpdateMode.APPEND:
            return [[s] for s in sources]
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
        return groups

    # -- execution -------------------------------------------------------------------------------

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        direct_ssts: list[tuple[str, list[int]]] = []
        direct_mem: list[pa.Table] = []
        merged: list[list[_Source]] = []
        components = self._components()
        for group in components:
            if len(group) > 1:
                merged.append(group)
            elif group[0].sst is not None:
                direct_ssts.append(self._pruned(group[0].sst, self.schema.names))
            else:
                assert group[0].mem is not None
                direct_mem.append(group[0].mem)
        self.stats.memtable_slices = sum(1 for g in components for s in g if s.mem is not None)
        self.stats.merged_components = len(merged)
        for table in direct_mem:
            yield from self._finish(table)
        if direct_ssts:
            # pyarrow evaluates the filter on columns it does not return, so a source that
            # needs no merge reads only the requested columns.
            for batch in scan_unordered(
                direct_ssts,
                self._storage,
                self.columns,
                self.filter,
                self.request.batch_size,
            ):
                yield from self._finish(pa.Table.from_batches([batch]), filtered=True)
        for group in merged:
            yield from self._merge(group)

    def _pruned(self, sst: SstMeta, stat_columns: Sequence[str]) -> tuple[str, list[int]]:
        meta = self._sst_files.footer(sst.path)
        groups = prune_row_groups(meta, self._storage, stat_columns, self.filter)
        self.stats.row_groups_total += meta.num_row_groups
        self.stats.row_groups_read += len(groups)
        if groups:
            self.stats.ssts_read += 1
        return self._sst_files.path(sst.path), groups

    def _merge(self, group: list[_Source]) -> Iterator[pa.RecordBatch]:
        inputs: list[Iterator[pa.RecordBatch]] = []
        for s in group:
            if s.sst is not None:
                path, rgs = self._pruned(s.sst, self.schema.key_columns)
                inputs.append(
                    self._conformed(
                        read_sorted(path, rgs, self._read_columns, self.request.batch_size)
                    )
                )
            else:
                assert s.mem is not None
                mem = s.mem.select(self._read_columns)
                inputs.append(iter(mem.to_batches(max_chunksize=self.request.batch_size)))
        dedup = self.options.update_mode is UpdateMode.OVERWRITE
        for table in merge_sorted(inputs, self.schema.primary_key, dedup=dedup):
            yield from self._finish(table)

    def _conformed(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        target = pa.schema([self._storage.field(n) for n in self._read_columns])
        for b in batches:
            yield pa.RecordBatch.from_arrays(b.columns, schema=target)

    def _finish(self, table: pa.Table, *, filtered: bool = False) -> Iterator[pa.RecordBatch]:
        if not filtered and self.filter is not None:
            table = table.filter(self.filter)
        if table.num_rows == 0:
            return
        table = table.select(self.columns)
        yield from table.to_batches(max_chunksize=self.request.batch_size)
