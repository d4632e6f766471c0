"""The Arrow memtable: an append-only list of batches (each tagged with its write sequence and
kind, put or row deletion) plus the range tombstones written meanwhile, with memory accounting
and a cached sorted, resolved view for reads and flushes. Small writes held as Python values
(node.engine.plain) wait as values until a reader or their number calls for a batch."""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

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


def _seq_range(stored: pa.RecordBatch) -> tuple[int, int]:
    """The least and greatest seq of a memtable batch."""
    bounds = pc.min_max(stored.column(SEQ))
    return bounds["min"].as_py(), bounds["max"].as_py()


#: The kind column of a batch, by kind, as scalars to repeat.
_KINDS = {kind: pa.scalar(kind, pa.uint8()) for kind in (PUT, DELETE)}
#: Rows of plain writes held as values before they are made one batch even with no reader:
#: converting them costs a few Arrow calls per column whatever their number, and a batch
#: per write would make each read sort thousands of one-row batches.
PENDING_MAX_ROWS = 1024
#: What a value held before its conversion counts for in the memtable's size (the batch's
#: true size replaces it once converted).
_PENDING_CELL_BYTES = 8


class Memtable:
    def __init__(self, schema: Schema, mode: UpdateMode) -> None:
        self.schema = schema
        self.mode = mode
        self._storage = schema.storage_arrow()
        self._batches: list[pa.RecordBatch] = []
        self._ranges: list[RangeTombstone] = []
        #: Plain writes not yet in a batch: one list per table column, and each row's seq.
        self._pending: list[list[Any]] = [[] for _ in schema.columns]
        self._pending_seqs: list[int] = []
        self._pending_bytes = 0
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
        """Entries held: batches (plain writes waiting for one count as one) and range
        tombstones."""
        return len(self._batches) + len(self._ranges) + (1 if self._pending_seqs else 0)

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

    def append_values(self, columns: list[list[Any]], seq: int) -> None:
        """Add the rows of a plain write (node.engine.plain.conform_values: one list of
        values per table column, fitting its type) written with sequence ``seq``; they join
        the batches once a reader asks for them or enough are held."""
        timestamps = columns[self._timestamp_index]
        n = len(timestamps)
        if n == 0:
            return
        lo, hi = min(timestamps), max(timestamps)
        size = n * len(columns) * _PENDING_CELL_BYTES
        with self._lock:
            for held, values in zip(self._pending, columns, strict=True):
                held += values
            self._pending_seqs += [seq] * n
            self._pending_bytes += size
            self.nbytes += size
            self.rows += n
            self._saw(seq)
            self.min_ts = min(self.min_ts, lo)
            self.max_ts = max(self.max_ts, hi)
            if len(self._pending_seqs) >= PENDING_MAX_ROWS:
                self._convert_pending()

    @functools.cached_property
    def _timestamp_index(self) -> int:
        return self.schema.names.index(self.schema.timestamp_key)

    def _convert_pending(self) -> None:
        """Turn the plain writes held into one batch. Called with ``_lock`` held."""
        n = len(self._pending_seqs)
        if not n:
            return
        fields = self._storage
        stored = pa.RecordBatch.from_arrays(
            [pa.array(values, type=fields.field(i).type) for i, values in enumerate(self._pending)]
            + [pa.array(self._pending_seqs, type=pa.uint64()), pa.repeat(_KINDS[PUT], n)],
            schema=fields,
        )
        self._pending = [[] for _ in self._pending]
        self._pending_seqs = []
        self._batches.append(stored)
        self.nbytes += stored.get_total_buffer_size() - self._pending_bytes
        self._pending_bytes = 0

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
            self._convert_pending()
            batches, ranges = list(self._batches), list(self._ranges)
        for stored in batches:
            # Plain writes converted together carry a seq per row; any other batch one.
            low, high = _seq_range(stored)
            if high <= seq:
                continue
            if low <= seq:
                stored = stored.filter(pc.greater(stored.column(SEQ), pa.scalar(seq, pa.uint64())))
                low, high = _seq_range(stored)
            deletes = stored.num_rows if stored.column(KIND)[0].as_py() != PUT else 0
            kept._add(stored, high, deletes)
            with kept._lock:
                kept._saw(low)
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
            self._convert_pending()
            return MemtableView(
                self, len(self._batches), self.min_ts, self.max_ts, tuple(self._ranges)
            )

    def batches(self, upto: int | None = None) -> list[pa.RecordBatch]:
        with self._lock:
            self._convert_pending()
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
