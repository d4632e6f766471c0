"""The Arrow memtable: an append-only list of batches (each tagged with its write sequence and
kind, put or row deletion) plus the range tombstones written meanwhile, with memory accounting
and a cached sorted, resolved view for reads and flushes."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from node.engine.options import UpdateMode
from node.engine.rows import resolve_versions, sort_by_key
from node.engine.schema import DELETE, KIND, PUT, SEQ, Schema
from node.engine.tombstones import RangeTombstone
from node.engine.tsid import SMALL_ROWS


@dataclass(frozen=True)
class MemtableView:
    """What a reader sees of a memtable: its first ``batches`` batches and the range
    tombstones written up to then."""

    memtable: Memtable
    batches: int
    min_ts: int
    max_ts: int
    ranges: tuple[RangeTombstone, ...]

    def sorted(self) -> pa.Table:
        return self.memtable.sorted(self.batches)

    def windows(self, window_ms: int) -> list[MemtableWindow]:
        return self.memtable.windows(window_ms, self.batches)


@dataclass(frozen=True)
class MemtableWindow:
    """The rows of a sorted memtable view whose timestamps fall in one window of the table's
    segment duration, still in key order, and whether any of them is a deletion marker."""

    min_ts: int
    max_ts: int
    rows: pa.Table
    deletes: bool


def _time_range(timestamps: pa.Array[Any]) -> tuple[int, int]:
    """The least and greatest of a batch's timestamps (a NOT NULL column), read off its
    buffer: a compute call costs a small write more than the numbers take, and so do two
    numpy reductions of a few values more than Python's."""
    data: Any = timestamps.buffers()[1]
    values = np.frombuffer(data, dtype=np.int64)
    window = values[timestamps.offset : timestamps.offset + len(timestamps)]
    if len(window) <= SMALL_ROWS:
        few = window.tolist()
        return min(few), max(few)
    return int(window.min()), int(window.max())


#: The kind column of a batch, by kind, as scalars to repeat.
_KINDS = {kind: pa.scalar(kind, pa.uint8()) for kind in (PUT, DELETE)}


class Memtable:
    def __init__(self, schema: Schema, mode: UpdateMode) -> None:
        self.schema = schema
        self.mode = mode
        self._storage = schema.storage_arrow()
        self._batches: list[pa.RecordBatch] = []
        self._ranges: list[RangeTombstone] = []
        self._lock = threading.Lock()
        self._sorted_cache: tuple[int, pa.Table] | None = None
        self._windows_cache: tuple[int, int, list[MemtableWindow]] | None = None
        self.nbytes = 0
        self.rows = 0
        self.deletes = 0
        self.min_seq = 0
        self.max_seq = 0
        self.min_ts = np.iinfo(np.int64).max
        self.max_ts = np.iinfo(np.int64).min

    def __len__(self) -> int:
        """Entries held: batches and range tombstones."""
        return len(self._batches) + len(self._ranges)

    def _saw(self, seq: int) -> None:
        self.min_seq = seq if not self.min_seq else min(self.min_seq, seq)
        self.max_seq = max(self.max_seq, seq)

    def append(self, batch: pa.RecordBatch, seq: int, kind: int = PUT) -> None:
        """Add a batch of the table schema written with sequence ``seq``: rows, or (``kind``
        DELETE) markers that delete the keys they carry."""
        if batch.num_rows == 0:
            return
        n = batch.num_rows
        seqs = pa.repeat(pa.scalar(seq, pa.uint64()), n)
        stored = pa.RecordBatch.from_arrays(
            [*batch.columns, seqs, pa.repeat(_KINDS[kind], n)], schema=self._storage
        )
        self._add(stored, seq, n if kind != PUT else 0)

    def _add(self, stored: pa.RecordBatch, seq: int, deletes: int) -> None:
        lo, hi = _time_range(stored.column(self.schema.timestamp_key))
        # The whole buffers, not the bytes the batch's slices reach (nbytes): they are what
        # the batch keeps in memory, and nbytes costs a small write more than its insert.
        size = stored.get_total_buffer_size()
        with self._lock:
            self._batches.append(stored)
            self.nbytes += size
            self.rows += stored.num_rows
            self.deletes += deletes
            self._saw(seq)
            self.min_ts = min(self.min_ts, lo)
            self.max_ts = max(self.max_ts, hi)

    def after(self, seq: int) -> Memtable:
        """A memtable of what was written after ``seq``: a follower drops what its leader's
        SSTs hold now (every batch carries one sequence)."""
        kept = Memtable(self.schema, self.mode)
        with self._lock:
            batches, ranges = list(self._batches), list(self._ranges)
        for stored in batches:
            batch_seq = stored.column(SEQ)[0].as_py()
            if batch_seq > seq:
                deletes = stored.num_rows if stored.column(KIND)[0].as_py() != PUT else 0
                kept._add(stored, batch_seq, deletes)
        for tombstone in ranges:
            if tombstone.seq > seq:
                kept.add_range(tombstone)
        return kept

    def add_range(self, tombstone: RangeTombstone) -> None:
        with self._lock:
            self._ranges.append(tombstone)
            self._saw(tombstone.seq)

    def view(self) -> MemtableView:
        with self._lock:
            return MemtableView(
                self, len(self._batches), self.min_ts, self.max_ts, tuple(self._ranges)
            )

    def batches(self, upto: int | None = None) -> list[pa.RecordBatch]:
        with self._lock:
            return self._batches[: len(self._batches) if upto is None else upto]

    def ranges(self) -> list[RangeTombstone]:
        with self._lock:
            return list(self._ranges)

    def sorted(self, upto: int | None = None) -> pa.Table:
        """The first ``upto`` batches sorted by (primary key, seq), with the versions of each
        key resolved (deletion markers kept: they shadow rows of older sources). Cached until
        more batches arrive."""
        batches = self.batches(upto)
        cached = self._sorted_cache
        if cached is not None and cached[0] == len(batches):
            return cached[1]
        table = pa.Table.from_batches(batches, schema=self._storage)
        table = sort_by_key(table, self.schema.primary_key).combine_chunks()
        table = resolve_versions(
            table,
            self.schema.primary_key,
            dedup=self.mode is UpdateMode.OVERWRITE,
            keep_markers=True,
        )
        self._sorted_cache = (len(batches), table)
        return table

    def windows(self, window_ms: int, upto: int | None = None) -> list[MemtableWindow]:
        """:meth:`sorted`, split by windows of ``window_ms``. Cached with it: every scan
        would otherwise split the whole memtable again, however few rows it asks for."""
        count = len(self.batches(upto))
        cached = self._windows_cache
        if cached is not None and cached[:2] == (count, window_ms):
            return cached[2]
        table = self.sorted(count)
        if table.num_rows == 0:
            return []
        ts = table.column(self.schema.timestamp_key).cast(pa.int64()).to_numpy()
        windows = np.floor_divide(ts, window_ms)
        # A stable sort keeps each window's rows in key order.
        order = np.argsort(windows, kind="stable")
        ts, windows = ts[order], windows[order]
        deleted = table.column(KIND).to_numpy()[order] != PUT
        grouped = table.take(order).combine_chunks()
        starts = np.flatnonzero(np.diff(windows, prepend=windows[:1] - 1))
        ends = [*starts[1:].tolist(), len(order)]
        out = [
            MemtableWindow(
                int(ts[lo:hi].min()),
                int(ts[lo:hi].max()),
                grouped.slice(lo, hi - lo),
                bool(deleted[lo:hi].any()),
            )
            for lo, hi in zip(starts.tolist(), ends, strict=True)
        ]
        self._windows_cache = (count, window_ms, out)
        return out
