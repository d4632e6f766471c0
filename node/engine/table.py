"""One open table: the write path (WAL, then memtable) for rows, row deletions and range
tombstones, memtable switching, flush and commit, schema changes, snapshots for reads, and
recovery by WAL replay."""

from __future__ import annotations

import functools
import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

import pyarrow as pa

from gnomon.errors import Closed, NotOwner, Unavailable
from gnomon.wal.api import Ticket, Wal
from node.engine import plain
from node.engine.batch import conform, conform_keys, deletion_markers
from node.engine.catalog import TableInfo
from node.engine.flush import flush_memtable
from node.engine.ipc import ipc_stream
from node.engine.manifest import CommitOp, Manifest, Version
from node.engine.memtable import Memtable, MemtableView
from node.engine.plain import PlainRows, conform_values
from node.engine.scan import Scan, ScanRequest
from node.engine.schema import DELETE, TSID, Schema
from node.engine.shard import ShardGuard
from node.engine.sst.meta import SstKind
from node.engine.sst.reader import SstFiles
from node.engine.stats import TableStats
from node.engine.tombstones import RangeTombstone
from node.engine.tsid import KnownSeries
from objectstore.api import ObjectStore

log = logging.getLogger("gnomon.engine")


#: Schema metadata naming what a WAL record holds; records without it are rows (the first
#: format, which had no other kind).
_OP = b"gnomon.op"
_RANGE = b"gnomon.range"


class RecordOp(StrEnum):
    PUT = "put"
    #: Primary keys (with the tags of implicit-tsid tables) of rows to delete.
    DELETE = "delete"
    #: One range tombstone, as JSON in the metadata of an empty batch.
    RANGE = "range"
    #: Nothing: a sequence taken for rows that reach SSTs without the memtable (revisioned
    #: batch ingest, see revisions.py); replays as nothing.
    MARK = "mark"


def encode_batch(batch: pa.RecordBatch, op: RecordOp = RecordOp.PUT) -> bytes:
    if op is not RecordOp.PUT:
        meta = {**(batch.schema.metadata or {}), _OP: op.value.encode()}
        batch = batch.replace_schema_metadata(meta)
    return bytes(ipc_stream(batch.schema, [batch]))


def decode_record(payload: bytes) -> tuple[RecordOp, pa.RecordBatch]:
    if plain.is_plain(payload):
        return RecordOp.PUT, plain.decode(payload)
    table = pa.ipc.open_stream(payload).read_all()
    meta = table.schema.metadata or {}
    op = RecordOp(meta[_OP].decode()) if _OP in meta else RecordOp.PUT
    table = table.replace_schema_metadata(None) if op is RecordOp.PUT else table
    batches = table.combine_chunks().to_batches()
    batch = batches[0] if batches else pa.RecordBatch.from_pylist([], schema=table.schema)
    return op, batch


class Logged:
    """A write logged and applied, acknowledged once ``ticket`` (its WAL record's) settles,
    which :meth:`wait` sees to."""

    __slots__ = ("_table", "rows", "ticket")

    def __init__(self, table: Table | None, rows: int, ticket: Ticket) -> None:
        self._table = table
        self.rows = rows
        self.ticket = ticket

    def wait(self) -> int:
        """Wait until the record is durable, syncing the WAL on this thread if no sync is
        running (and so covering every write appended before it): the rows written, or why
        the write is not acknowledged."""
        table = self._table
        if table is None:
            return self.rows
        try:
            table._wal.sync_to(table._region, self.ticket)
        except NotOwner as e:
            # The region was fenced or let go of after the record was appended and applied:
            # it is in the memtable, which a flush may still commit, and maybe in the log.
            return table._acknowledge(self.rows, self.ticket.seq, lost=e)
        return table._acknowledge(self.rows, self.ticket.seq)


@dataclass(frozen=True)
class _Entry:
    """One write as the WAL logs it and as the memtable takes it once logged (``apply``,
    given the memtable and the record's seq)."""

    payload: bytes
    rows: int
    apply: Callable[[Memtable, int], None]


@dataclass(frozen=True)
class Pinned:
    """One snapshot of a table, to scan any number of times (in pieces, by several readers):
    a manifest version and, of the live table, its memtable views."""

    version: Version
    views: tuple[MemtableView, ...]


class Table:
    def __init__(
        self,
        info: TableInfo,
        *,
        wal: Wal,
        guard: ShardGuard,
        manifest: Manifest,
        store: ObjectStore,
        sst_files: SstFiles,
        staging_dir: str,
        request_flush: Callable[[Table], None],
        on_flushed: Callable[[Table], None] = lambda _: None,
        max_immutables: int = 4,
        max_write_bytes: int = 256 * 1024**2,
        stall_timeout_s: float = 120.0,
    ) -> None:
        self.info = info
        self._wal = wal
        self.guard = guard
        self._region = guard.region
        self.manifest = manifest
        self.store = store
        self.sst_files = sst_files
        self.staging_dir = staging_dir
        self._request_flush = request_flush
        self._on_flushed = on_flushed
        self._max_immutables = max_immutables
        self._max_write_bytes = max_write_bytes
        self._stall_timeout_s = stall_timeout_s
        self._cond = threading.Condition()
        #: Held while a flush writes and commits, and while a compaction commits: a version
        #: becomes the table's read version only together with the memtable it replaces.
        self.commit_lock = threading.Lock()
        self._writers = 0
        self._freezing = False
        self._closed = False
        #: Set once the table is moving to another shard: writes answer it (nothing logged,
        #: so the server may retry them at the table's next home).
        self._moving: NotOwner | None = None
        #: Highest sequence applied from the leader's log while this table followed it: a
        #: promoted follower replays only what comes after.
        self._followed_to = 0
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

    @property
    def closed(self) -> bool:
        return self._closed

    def _new_memtable(self) -> Memtable:
        return Memtable(self.info.schema, self.info.options.update_mode)

    # -- recovery --------------------------------------------------------------------------------

    def recover(self) -> int:
        """Replay the WAL above the flushed sequence (and above what it applied following
        the shard's former leader) into the memtable; records replayed."""
        flushed = self._version.flushed_seq
        # Raises the WAL's sequence floor too, so new writes never reuse a flushed sequence.
        self._wal.mark_deleted(self._region, self.table_id, flushed)
        records = 0
        start = self.followed_to + 1
        for record in self._wal.read(self._region, self.table_id, start):
            op, batch = decode_record(record.payload)
            self._apply(self._active, op, batch, record.seq)
            records += 1
            if self._active.nbytes >= self.info.options.write_buffer_size:
                self.freeze(self._active)
        if records:
            log.info(
                "replayed WAL", extra={"table": self.name, "records": records, "from": start}
            )
        return records

    def _apply(self, memtable: Memtable, op: RecordOp, batch: pa.RecordBatch, seq: int) -> None:
        """Insert a logged record into ``memtable``; records logged under an older schema are
        conformed to the memtable's."""
        schema = memtable.schema
        if op is RecordOp.MARK:
            return
        if op is RecordOp.RANGE:
            meta = batch.schema.metadata or {}
            memtable.add_range(replace(RangeTombstone.from_json(json.loads(meta[_RANGE])), seq=seq))
            return
        if op is RecordOp.PUT and batch.schema == schema.arrow():
            memtable.append(batch, seq)  # what a write just logged: conformed already
            return
        # The logged tsid is dropped with the unknown columns: conform recomputes it from the
        # same tags, and refuses a batch that carries one.
        known = batch.drop_columns(
            [
                n
                for n in batch.schema.names
                if not schema.has_column(n) or (n == TSID and schema.has_tsid)
            ]
        )
        if op is RecordOp.DELETE:
            keys = conform_keys(self.name, schema, known, max_bytes=self._max_write_bytes)
            memtable.append(deletion_markers(schema, keys), seq, DELETE)
            return
        memtable.append(conform(self.name, schema, known, max_bytes=self._max_write_bytes), seq)

    # -- writes ----------------------------------------------------------------------------------

    def write(self, data: pa.RecordBatch | pa.Table, *, series: KnownSeries | None = None) -> int:
        """Durably write rows (their tsids those of ``series`` when given); returns the number
        written once they are acknowledged."""
        return self._log(RecordOp.PUT, self._conform(data, series))

    def start_write(self, data: pa.RecordBatch | pa.Table) -> Logged | None:
        """Log and apply rows without waiting for anything but the disk: the write is
        acknowledged once :meth:`Logged.wait` returns. None (nothing done) if the table is
        waiting for flushes or its WAL's appends may block (on the network): write it with
        :meth:`write` on a thread that may wait that long."""
        if self._wal.append_blocks:
            return None
        return self._start(RecordOp.PUT, self._conform(data), wait=False)

    def write_rows(self, rows: PlainRows) -> int:
        """:meth:`write` of a few rows held as Python values (see node.engine.plain)."""
        return self._wait(self._start_entry(functools.partial(self._rows_entry, rows), wait=True))

    def start_write_rows(self, rows: PlainRows) -> Logged | None:
        """:meth:`start_write` of a few rows held as Python values (see node.engine.plain)."""
        if self._wal.append_blocks:
            return None
        return self._start_entry(functools.partial(self._rows_entry, rows), wait=False)

    def _rows_entry(self, rows: PlainRows, schema: Schema) -> _Entry | None:
        """Plain rows logged as they are and held in the memtable as values, or, if they do
        not conform as plain values, as an Arrow batch like any write (refused, if they must
        be, by the same check with the same error)."""
        values = conform_values(schema, rows)
        payload = rows.encode() if values is not None else b""
        if values is None or len(payload) > self._max_write_bytes:
            return self._put_entry(
                conform(self.name, schema, rows.arrow(), max_bytes=self._max_write_bytes)
            )
        if not rows.num_rows:
            return None
        return _Entry(
            payload, rows.num_rows, lambda memtable, seq: memtable.append_values(values, seq)
        )

    def _conform(
        self, data: pa.RecordBatch | pa.Table, series: KnownSeries | None = None
    ) -> Callable[[Schema], pa.RecordBatch]:
        return lambda schema: conform(
            self.name, schema, data, max_bytes=self._max_write_bytes, series=series
        )

    def delete_rows(self, keys: pa.RecordBatch | pa.Table) -> int:
        """Durably delete the rows with these primary keys (for implicit-tsid tables: tags and
        timestamp); returns how many keys were given."""
        return self._log(
            RecordOp.DELETE,
            lambda schema: conform_keys(self.name, schema, keys, max_bytes=self._max_write_bytes),
        )

    def delete_range(
        self,
        tags: Mapping[str, Any] | None,
        time_range: tuple[int | None, int | None] | None,
    ) -> None:
        """Durably delete every row matching ``tags`` with a timestamp in ``time_range``."""

        def build(schema: Schema) -> pa.RecordBatch:
            tombstone = RangeTombstone.build(schema, 0, tags, time_range)
            empty = pa.RecordBatch.from_pylist([], schema=pa.schema([]))
            return empty.replace_schema_metadata({_RANGE: json.dumps(tombstone.to_json()).encode()})

        self._log(RecordOp.RANGE, build)

    def _log(self, op: RecordOp, prepare: Callable[[Schema], pa.RecordBatch]) -> int:
        """Log a record built by ``prepare`` and apply it (see :meth:`_start`), then wait
        until it is durable, syncing the WAL on this thread if no sync is running."""
        return self._wait(self._start(op, prepare, wait=True))

    def _wait(self, logged: Logged | None) -> int:
        assert logged is not None
        return logged.wait()

    def _start(
        self, op: RecordOp, prepare: Callable[[Schema], pa.RecordBatch], *, wait: bool
    ) -> Logged | None:
        """:meth:`_start_entry` of a record of ``op`` holding the batch ``prepare`` builds."""

        def entry(schema: Schema) -> _Entry | None:
            batch = prepare(schema)
            if batch.num_rows == 0 and op is not RecordOp.RANGE:
                return None
            return self._batch_entry(op, batch)

        return self._start_entry(entry, wait=wait)

    def _put_entry(self, batch: pa.RecordBatch) -> _Entry | None:
        return self._batch_entry(RecordOp.PUT, batch) if batch.num_rows else None

    def _batch_entry(self, op: RecordOp, batch: pa.RecordBatch) -> _Entry:
        return _Entry(
            encode_batch(batch, op),
            batch.num_rows,
            lambda memtable, seq: self._apply(memtable, op, batch, seq),
        )

    def _start_entry(
        self, prepare: Callable[[Schema], _Entry | None], *, wait: bool
    ) -> Logged | None:
        """Append the record of the entry ``prepare`` builds for the current schema (None:
        nothing to log) to the WAL, then apply it to the active memtable; an ALTER between
        the two makes it prepare again. Without ``wait``, None if the table would wait for
        flushes. The caller's :meth:`Logged.wait` makes the record durable.

        Rows are readable from the memtable as soon as they are applied, a moment before
        their record is durable and the write acknowledged (as with most databases' group
        commit); a write is acknowledged only once durable, and one whose sync fails is
        answered as not acknowledged, its rows maybe stored."""
        while True:
            info = self.info
            entry = prepare(info.schema)
            if entry is None:
                return Logged(None, 0, Ticket.durable(0))  # nothing logged, nothing to check
            deadline = time.monotonic() + self._stall_timeout_s
            with self._cond:
                while not self._closed and (
                    self._freezing or len(self._immutables) >= self._max_immutables
                ):
                    if not wait and not self._freezing:
                        return None
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise Unavailable(
                            f"table {self.name!r}: writes stalled for {self._stall_timeout_s}s "
                            f"waiting for flushes; last flush error: {self.last_flush_error!r}"
                        )
                    self._cond.wait(min(remaining, 1.0))
                if self._moving is not None:
                    raise self._moving
                if self._closed:
                    raise Closed(f"table {self.name!r} is closed")
                if self.info is not info:
                    continue
                self._writers += 1
                memtable = self._active
            break
        try:
            # NotOwner here means nothing was logged: the caller may take the write to the owner.
            self.guard.check()
            try:
                ticket = self._wal.append(self._region, self.table_id, entry.payload)
            except NotOwner as e:  # the region was fenced with this write on its way
                raise self._outcome_unknown(e) from None
            entry.apply(memtable, ticket.seq)
        finally:
            with self._cond:
                self._writers -= 1
                self._cond.notify_all()
        if memtable.nbytes >= self.info.options.write_buffer_size:
            self.freeze(memtable)
        return Logged(self, entry.rows, ticket)

    def _acknowledge(self, rows: int, seq: int, *, lost: NotOwner | None = None) -> int:
        """``rows`` once their record (``seq``) is durable: checked again, as the shard may
        have been lost while the write waited for the WAL (``lost``: the WAL said so), and
        then the write must not be acknowledged (a new owner replays it or not) — unless a
        flush committed it before the shard was let go of: then it is in the table's SSTs
        whoever owns it next."""
        try:
            if lost is not None:
                raise lost
            self.guard.check()
        except NotOwner as e:
            if seq <= self._version.flushed_seq:
                return rows
            raise self._outcome_unknown(e) from None
        return rows

    def _outcome_unknown(self, lost: NotOwner) -> Unavailable:
        """The shard was lost after this write's record may have reached the log, which the
        next owner replays: refused, but not as NotOwner, which tells servers nothing was
        written and sends the write on to the owner, storing it twice."""
        return Unavailable(
            f"table {self.name!r}: {lost.message}; the write was not acknowledged and may or "
            "may not be stored (its record may have reached the log the next owner replays)",
            retryable=False,
        )

    # -- following the shard's leader ------------------------------------------------------------

    def follow(self, seq: int, payload: bytes) -> None:
        """Apply a record of the leader's log: a follower's table takes no writes of its own
        and never flushes (its rows reach SSTs through the leader)."""
        op, batch = decode_record(payload)
        with self._cond:
            self._followed_to = max(self._followed_to, seq)
            if seq <= self._version.flushed_seq:
                # The leader flushed it before this copy read it (a copy reading behind takes
                # the leader's newer manifest versions meanwhile): its SSTs hold it already,
                # and a second copy in the memtable would be read twice, and flushed twice
                # once this copy leads.
                return
            self._apply(self._active, op, batch, seq)
            if self._active.nbytes >= self.info.options.write_buffer_size:
                self._freeze_locked()

    @property
    def followed_to(self) -> int:
        """The highest sequence this table holds: in its SSTs or, following a leader,
        applied to its memtables (a follower reads the log, and a promoted one replays it,
        from after it)."""
        return max(self._version.flushed_seq, self._followed_to)

    def catch_up(self) -> bool:
        """Take the leader's newest manifest version and drop from the memtables what its
        SSTs hold now (so no row is read twice); whether it moved."""
        version = self.manifest.current(self.table_id)
        if version.version <= self._version.version:
            return False
        flushed = version.flushed_seq
        with self._cond:
            self._immutables = [
                m.after(flushed) if m.min_seq <= flushed else m
                for m in self._immutables
                if m.max_seq > flushed
            ]
            if self._active.min_seq and self._active.min_seq <= flushed:
                self._active = self._active.after(flushed)
            self._version = version
        return True

    def lead(
        self,
        guard: ShardGuard,
        request_flush: Callable[[Table], None],
        on_flushed: Callable[[Table], None],
    ) -> None:
        """This follower's shard was promoted here: take writes under ``guard`` and flush
        as a leader (call :meth:`recover` next for the log's tail)."""
        self.catch_up()
        self.guard = guard
        self._request_flush = request_flush
        self._on_flushed = on_flushed

    def stop_writes(self, moving: NotOwner) -> None:
        """Refuse new writes with ``moving`` and wait for those logging now, so that a
        flush after this holds every write this table will ever acknowledge."""
        with self._cond:
            self._moving = moving
            self._cond.notify_all()
            self._cond.wait_for(lambda: self._writers == 0)

    def reserve_seq(self) -> int:
        """A WAL sequence for rows written straight to SSTs (revisioned ingest): they order
        against the table's other writes as if written now."""
        if self._closed:
            raise Closed(f"table {self.name!r} is closed")
        empty = pa.RecordBatch.from_pylist([], schema=pa.schema([]))
        return self._wal.write(self._region, self.table_id, encode_batch(empty, RecordOp.MARK))

    def freeze(self, expected: Memtable | None = None) -> bool:
        """Make the active memtable immutable and ask for it to be flushed. With ``expected``,
        only if that memtable is still the active one (another writer may have switched)."""
        with self._cond:
            if expected is not None and self._active is not expected:
                return False
            if len(self._active) == 0:
                return False
            self._freeze_locked()
        self._request_flush(self)
        return True

    def _freeze_locked(self, info: TableInfo | None = None) -> None:
        self._freezing = True
        try:
            # A writer between its WAL append and its memtable insert must land in the
            # memtable being frozen, or its sequence would be counted as flushed without it.
            while self._writers:
                self._cond.wait()
            if len(self._active):
                self._immutables.append(self._active)
            if info is not None:
                self.info = info
            self._active = self._new_memtable()
        finally:
            self._freezing = False
            self._cond.notify_all()

    def alter(self, info: TableInfo) -> None:
        """Switch to a new schema/options version: the active memtable (of the old schema) is
        frozen, so every memtable holds rows of one schema."""
        with self._cond:
            self._freeze_locked(info)
            pending = bool(self._immutables)
        if pending:
            self._request_flush(self)

    def flush_next(self) -> bool:
        """Flush the oldest immutable memtable and commit it; False if there was none."""
        with self.commit_lock:
            with self._cond:
                if self._closed or not self._immutables:
                    return False
                memtable = self._immutables[0]
            info = self.info
            metas = flush_memtable(
                memtable,
                table_id=info.table_id,
                options=info.options,
                store=self.store,
                staging_dir=self.staging_dir,
            )
            result = self.manifest.commit(
                info.table_id, CommitOp.APPEND, add=metas, flushed_seq=memtable.max_seq
            )
            with self._cond:
                self._immutables.pop(0)
                self.advance(result.version)
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
        self._on_flushed(self)
        return True

    def advance(self, version: Version) -> None:
        """Make ``version`` the one reads see, unless a newer one already is."""
        if version.version > self._version.version:
            self._version = version

    def flush(self) -> None:
        """Freeze the active memtable and flush everything now (synchronously)."""
        self.freeze()
        while self.flush_next():
            pass

    def pending_flushes(self) -> int:
        with self._cond:
            return len(self._immutables)

    # -- reads -----------------------------------------------------------------------------------

    def stats(self) -> TableStats:
        version, views = self.snapshot()
        data = [f for f in version.files if f.kind is SstKind.DATA]
        return TableStats(
            name=self.name,
            table_id=self.table_id,
            version=version.version,
            sst_files=len(data),
            sst_bytes=sum(f.size for f in data),
            sst_rows=sum(f.rows for f in data),
            memtable_rows=sum(v.memtable.rows for v in views),
            memtable_bytes=sum(v.memtable.nbytes for v in views),
            pending_flushes=len(views) - 1,
            flush_failing=self.last_flush_error is not None,
        )

    def snapshot(self) -> tuple[Version, list[MemtableView]]:
        with self._cond:
            views = [m.view() for m in (*self._immutables, self._active)]
            return self._version, views

    def pin(self, *, version: int | None = None, timestamp_ms: int | None = None) -> Pinned:
        """The live table now, or (with ``version`` or ``timestamp_ms``) the flushed data of
        an earlier manifest version, held for any number of scans."""
        if version is not None:
            return Pinned(self.manifest.at_version(self.table_id, version), ())
        if timestamp_ms is not None:
            return Pinned(self.manifest.at_timestamp(self.table_id, timestamp_ms), ())
        v, views = self.snapshot()
        return Pinned(v, tuple(views))

    def scan(self, request: ScanRequest, pinned: Pinned) -> Scan:
        return Scan(
            self.info.schema,
            self.info.options,
            pinned.version.files,
            pinned.views,
            self.sst_files,
            request,
            now_ms=int(time.time() * 1000),
        )

    def close(self) -> None:
        # After a commit in progress: from here on this instance commits nothing, so a flush
        # retried after its shard moved (and maybe came back in a new instance) cannot
        # install rows the shard's next owner replays from the log.
        with self.commit_lock, self._cond:
            self._closed = True
            self._cond.notify_all()
