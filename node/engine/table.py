"""One open table: the write path (WAL, then memtable), memtable switching, flush and commit,
snapshots for reads, and recovery by WAL replay."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import pyarrow as pa

from gnomon.errors import Closed, Unavailable
from node.engine.batch import conform
from node.engine.catalog import TableInfo
from node.engine.flush import flush_memtable
from node.engine.manifest import CommitOp, Manifest, Version
from node.engine.memtable import Memtable, MemtableView
from node.engine.scan import Scan, ScanRequest
from node.engine.sst.reader import SstFiles
from node.wal.api import Wal
from objectstore.api import ObjectStore

log = logging.getLogger("gnomon.engine")


def encode_batch(batch: pa.RecordBatch) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as w:
        w.write_batch(batch)
    return sink.getvalue().to_pybytes()


def decode_batch(payload: bytes) -> pa.RecordBatch:
    table = pa.ipc.open_stream(payload).read_all()
    return table.combine_chunks().to_batches()[0] if table.num_rows else table.to_batches()[0]


class Table:
    def __init__(
        self,
        info: TableInfo,
        *,
        wal: Wal,
        region: int,
        manifest: Manifest,
        store: ObjectStore,
        sst_files: SstFiles,
        staging_dir: str,
        request_flush: Callable[[Table], None],
        max_immutables: int = 4,
        max_write_bytes: int = 256 * 1024**2,
        stall_timeout_s: float = 120.0,
    ) -> None:
        self.info = info
        self._wal = wal
        self._region = region
        self._manifest = manifest
        self._store = store
        self._sst_files = sst_files
        self._staging_dir = staging_dir
        self._request_flush = request_flush
        self._max_immutables = max_immutables
        self._max_write_bytes = max_write_bytes
        self._stall_timeout_s = stall_timeout_s
        self._cond = threading.Condition()
        self._flush_lock = threading.Lock()
        self._writers = 0
        self._freezing = False
        self._closed = False
        self._active = self._new_memtable()
        self._immutables: list[Memtable] = []
        self._version = manifest.current(info.table_id)
        self.last_flush_error: BaseException | None = None

    @property
    def name(self) -> str:
        return self.info.name

    @property
    def table_id(self) -> int:
        return self.info.table_id

    def _new_memtable(self) -> Memtable:
        return Memtable(self.info.schema, self.info.options.update_mode)

    # -- recovery --------------------------------------------------------------------------------

    def recover(self) -> int:
        """Replay the WAL above the flushed sequence into the memtable; rows replayed."""
        flushed = self._version.flushed_seq
        # Raises the WAL's sequence floor too, so new writes never reuse a flushed sequence.
        self._wal.mark_deleted(self._region, self.table_id, flushed)
        rows = 0
        for record in self._wal.read(self._region, self.table_id, flushed + 1):
            batch = decode_batch(record.payload)
            if batch.schema != self.info.schema.arrow():
                batch = conform(
                    self.name,
                    self.info.schema,
                    batch.drop_columns(
                        [n for n in batch.schema.names if not self.info.schema.has_column(n)]
                    ),
                    max_bytes=self._max_write_bytes,
                )
            self._active.append(batch, record.seq)
            rows += batch.num_rows
            if self._active.nbytes >= self.info.options.write_buffer_size:
                self.freeze(self._active)
        if rows:
            log.info("replayed WAL", extra={"table": self.name, "rows": rows, "from": flushed + 1})
        return rows

    # -- writes ----------------------------------------------------------------------------------

    def write(self, data: pa.RecordBatch | pa.Table) -> int:
        """Durably write rows; returns the number written once they are acknowledged."""
        batch = conform(self.name, self.info.schema, data, max_bytes=self._max_write_bytes)
        if batch.num_rows == 0:
            return 0
        payload = encode_batch(batch)
        deadline = time.monotonic() + self._stall_timeout_s
        with self._cond:
            while not self._closed and (
                self._freezing or len(self._immutables) >= self._max_immutables
            ):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise Unavailable(
                        f"table {self.name!r}: writes stalled for {self._stall_timeout_s}s "
                        f"waiting for flushes; last flush error: {self.last_flush_error!r}"
                    )
                self._cond.wait(min(remaining, 1.0))
            if self._closed:
                raise Closed(f"table {self.name!r} is closed")
            self._writers += 1
            memtable = self._active
        try:
            seq = self._wal.write(self._region, self.table_id, payload)
            memtable.append(batch, seq)
        finally:
            with self._cond:
                self._writers -= 1
                self._cond.notify_all()
        if memtable.nbytes >= self.info.options.write_buffer_size:
            self.freeze(memtable)
        return batch.num_rows

    def freeze(self, expected: Memtable | None = None) -> bool:
        """Make the active memtable immutable and ask for it to be flushed. With ``expected``,
        only if that memtable is still the active one (another writer may have switched)."""
        with self._cond:
            if expected is not None and self._active is not expected:
                return False
            if len(self._active) == 0:
                return False
            self._freezing = True
            try:
                # A writer between its WAL append and its memtable insert must land in the
                # memtable being frozen, or its sequence would be counted as flushed without it.
                while self._writers:
                    self._cond.wait()
                self._immutables.append(self._active)
                self._active = self._new_memtable()
            finally:
                self._freezing = False
                self._cond.notify_all()
        self._request_flush(self)
        return True

    def flush_next(self) -> bool:
        """Flush the oldest immutable memtable and commit it; False if there was none."""
        with self._flush_lock:
            with self._cond:
                if not self._immutables:
                    return False
                memtable = self._immutables[0]
            info = self.info
            metas = flush_memtable(
                memtable,
                table_id=info.table_id,
                schema=info.schema,
                options=info.options,
                store=self._store,
                staging_dir=self._staging_dir,
            )
            result = self._manifest.commit(
                info.table_id, CommitOp.APPEND, add=metas, flushed_seq=memtable.max_seq
            )
            with self._cond:
                self._immutables.pop(0)
                self._version = result.version
                self.last_flush_error = None
                self._cond.notify_all()
            self._wal.mark_deleted(self._region, info.table_id, memtable.max_seq)
            log.debug(
                "flushed memtable",
                extra={
                    "table": info.name,
                    "rows": memtable.rows,
                    "ssts": len(metas),
                    "flushed_seq": memtable.max_seq,
                },
            )
            return True

    def flush(self) -> None:
        """Freeze the active memtable and flush everything now (synchronously)."""
        self.freeze()
        while self.flush_next():
            pass

    def pending_flushes(self) -> int:
        with self._cond:
            return len(self._immutables)

    # -- reads -----------------------------------------------------------------------------------

    def snapshot(self) -> tuple[Version, list[MemtableView]]:
        with self._cond:
            views = [m.view() for m in (*self._immutables, self._active)]
            return self._version, views

    def scan(
        self,
        request: ScanRequest,
        *,
        version: int | None = None,
        timestamp_ms: int | None = None,
    ) -> Scan:
        """A scan of the live table, or (with ``version`` or ``timestamp_ms``) of the flushed
        data of an earlier manifest version."""
        views: list[MemtableView] = []
        if version is not None:
            v = self._manifest.at_version(self.table_id, version)
        elif timestamp_ms is not None:
            v = self._manifest.at_timestamp(self.table_id, timestamp_ms)
        else:
            v, views = self.snapshot()
        return Scan(
            self.info.schema,
            self.info.options,
            v.files,
            views,
            self._sst_files,
            request,
            now_ms=int(time.time() * 1000),
        )

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
