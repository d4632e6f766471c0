"""The disk WAL of standalone mode: one directory of segment files per region.

Layout under ``root``::

    region_<id>/LOCK        flock'ed while a DiskWal has the region open
    region_<id>/marks       per-table deletion floors (see _write_marks)
    region_<id>/seg_<id>    segment files (see node.wal.segment and node.wal.record)

Appends and syncs are apart (see :class:`_Region`): each append writes its record at the
segment's tail, and one ``fdatasync`` makes every record appended before it durable, run by
the first writer to wait for it while the next records are appended. A failed
write or sync fails every record not yet durable and stops the region taking writes until it
is reopened.

See README.md in this folder for the format and the recovery rules.
"""

from __future__ import annotations

import bisect
import fcntl
import functools
import logging
import mmap
import os
import struct
import threading
import zlib
from array import array
from collections import deque
from collections.abc import Iterator
from typing import Literal

from gnomon.errors import Closed, Corrupted, InvalidArgument, Unavailable
from gnomon.wal.api import MAX_U64, Ticket, WalRecord
from gnomon.wal.group_commit import failed_error
from gnomon.wal.region_wal import RegionWal
from node.wal.record import (
    HEADER_SIZE,
    MAX_VALUE_SIZE,
    RecordScanner,
    ScanEnd,
    decode_at,
    encode,
    nonzero_end,
    seq_at,
)
from node.wal.segment import (
    MAGIC_SIZE,
    Segment,
    fsync_dir,
    is_temporary,
    parse_segment_name,
    segment_name,
)

logger = logging.getLogger("gnomon.wal")

SyncPolicy = Literal["always", "never"]
DEFAULT_SEGMENT_SIZE = 64 * 1024 * 1024

_LOCK_NAME = "LOCK"
_MARKS_NAME = "marks"
_MARKS_TMP = "marks.tmp"
_MARKS_MAGIC = b"GNMMRK01"
_MARKS_COUNT = struct.Struct("<I")
_MARK = struct.Struct("<QQ")
_MARKS_CRC = struct.Struct("<I")
_ZERO_BLOCK = bytes(1 << 20)


def _region_dir(root: str, region_id: int) -> str:
    return os.path.join(root, f"region_{region_id}")


class DiskWal(RegionWal["_Region"]):
    append_blocks = False

    """A :class:`gnomon.wal.api.Wal` on local disk.

    ``segment_size`` is the size a segment file grows to (preallocated an extent at a time)
    before the log rolls to a new one; a record too big for an empty segment gets a segment
    of its own, sized to fit it (records are capped only by their u32 length field:
    TooLarge above 4 GiB - 1). ``sync="always"`` makes ``write`` return after
    ``fdatasync``; ``sync="never"`` leaves flushing to the OS (data survives a process crash,
    not a machine crash) and syncs only when a segment fills up and on close.

    ``sync_count`` counts the ``fdatasync`` calls made on segment files.
    """

    def __init__(
        self,
        root: str,
        *,
        segment_size: int = DEFAULT_SEGMENT_SIZE,
        sync: SyncPolicy = "always",
    ) -> None:
        if sync not in ("always", "never"):
            raise InvalidArgument(f"WAL sync policy must be 'always' or 'never', got {sync!r}")
        if isinstance(segment_size, bool) or not isinstance(segment_size, int):
            raise InvalidArgument(f"WAL segment size must be an int, got {segment_size!r}")
        if segment_size < MAGIC_SIZE + HEADER_SIZE:
            raise InvalidArgument(
                f"WAL segment size {segment_size} is below the minimum "
                f"{MAGIC_SIZE + HEADER_SIZE} (magic number plus one empty record)"
            )
        super().__init__(f"WAL at {root}", max_payload=MAX_VALUE_SIZE)
        self.root = root
        self.segment_size = segment_size
        self.sync: SyncPolicy = sync
        self.sync_count = 0
        self._count_lock = threading.Lock()
        try:
            os.makedirs(root, exist_ok=True)
        except OSError as e:
            raise Unavailable(f"WAL root {root}: cannot create it: {e}") from e

    def close(self) -> None:
        with self._open_lock:
            for region in self._take_regions() or []:
                region.close()

    def _open_region(self, region_id: int, epoch: int) -> _Region:
        return _Region.open(self, region_id)

    def _region_name(self, region_id: int) -> str:
        return f"WAL region {region_id} at {self.root}"

    def _fdatasync(self, segment: Segment) -> None:
        os.fdatasync(segment.fd)
        with self._count_lock:
            self.sync_count += 1


class _Region:
    """The open state of one region. ``_cond`` guards every field below.

    An append assigns the record its seq and writes it at the active segment's tail (no
    sync). Under ``sync="always"`` a sync round then makes durable whatever has been appended
    (one ``fdatasync`` for all of it), indexes those records and settles their tickets, while
    the next appends go on. The round is run by a writer waiting in ``sync_to`` that finds none
    running, as a group commit's leader. There is no sync thread: handing each round to one
    cost every write two thread switches, more than the overlap won (bench/small_writes.py,
    HTTP writes synced by the event loop itself against by such a thread: 1.3x the rows/s
    with 8 clients, 1.1x with one, the same with 64).
    A failed write or sync fails every record not yet durable and stops the region taking
    writes until it is reopened.
    """

    def __init__(
        self,
        wal: DiskWal,
        region_id: int,
        directory: str,
        lock_fd: int,
        segments: list[Segment],
        last: dict[int, int],
        floors: dict[int, int],
    ) -> None:
        self._where = f"WAL region {region_id} at {directory}"
        self._wal = wal
        self._id = region_id
        self._dir = directory
        self._lock_fd = lock_fd
        lock = threading.Lock()
        #: Writers waiting for a sync round (and a roll-over waiting for one to end).
        self._cond = threading.Condition(lock)
        # Held across the whole of mark_deleted (the marks file is rewritten outside _cond)
        # and by close, which must not close segments under a running mark_deleted.
        self._marks_lock = threading.Lock()
        #: Ascending by id; the last one is the active segment, the only one written to.
        self._segments = segments
        self._floors = floors
        #: The highest seq assigned per table (including deletion floors and appends not yet
        #: durable).
        self._last = last
        #: Appended, not yet durable, in log order: all in the active segment (a roll-over
        #: syncs the full segment first).
        self._unsynced: deque[_Appended] = deque()
        #: Records appended, and made durable, since the region opened (their positions).
        self._appended = 0
        self._synced = 0
        self._syncing = False
        self._failure: BaseException | None = None
        self._closed = False

    @classmethod
    def open(cls, wal: DiskWal, region_id: int) -> _Region:
        directory = _region_dir(wal.root, region_id)
        try:
            if not os.path.isdir(directory):
                os.makedirs(directory, exist_ok=True)
                fsync_dir(wal.root)
            lock_path = os.path.join(directory, _LOCK_NAME)
            lock_fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as e:
            raise Unavailable(f"WAL region {region_id}: cannot open {directory}: {e}") from e
        try:
            fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(lock_fd)
            raise Unavailable(
                f"WAL region {region_id} at {directory} is open in another DiskWal "
                f"(lock file {lock_path} is held)"
            ) from e
        try:
            segments, last, floors = _recover(wal, region_id, directory)
        except OSError as e:
            os.close(lock_fd)
            raise Unavailable(f"WAL region {region_id}: cannot recover {directory}: {e}") from e
        except BaseException:
            os.close(lock_fd)
            raise
        return cls(wal, region_id, directory, lock_fd, segments, last, floors)

    # -- writes -----------------------------------------------------------------------------

    def append(self, table_id: int, payload: bytes) -> Ticket:
        """Append a record; the caller's ``sync_to`` makes it durable."""
        durable: list[_Appended] = []
        failed: list[_Appended] = []
        failure: BaseException | None = None
        try:
            with self._cond:
                try:
                    segment = self._room(HEADER_SIZE + len(payload), durable)
                    seq = self._last.get(table_id, 0) + 1
                    if seq > MAX_U64:
                        # Only a floor set at the very top of the range gets here.
                        raise InvalidArgument(f"{self._where}: table {table_id} has no seq left")
                    record = encode(table_id, seq, payload)
                    offset = segment.tail
                    segment.reserve(offset + len(record))
                    segment.pwrite(record, offset)
                except OSError as e:
                    failure = e
                    failed = self._fail(e)
                    raise failed_error(self._where, "the disk", e) from None
                segment.tail = offset + len(record)
                self._last[table_id] = seq
                self._appended += 1
                appended = _Appended(Ticket(seq, self._appended), table_id, offset)
                if self._wal.sync == "never":
                    self._index([appended])
                    self._synced = self._appended
                    durable.append(appended)
                else:
                    self._unsynced.append(appended)
        finally:
            _settle(durable, None)
            if failure is not None:
                _settle(failed, failed_error(self._where, "the disk", failure))
        return appended.ticket

    def sync_to(self, ticket: Ticket) -> int:
        self._sync_until(ticket.position)
        return ticket.wait()

    def _room(self, record_size: int, durable: list[_Appended]) -> Segment:
        """The active segment once the region takes appends and it has room for a record of
        ``record_size`` bytes, rolling over to a new one if it has not (the records that made
        durable are added to ``durable``). Called with ``_cond`` held, which a roll-over
        waits on: the region's appends stall for it (once per segment)."""
        while True:
            if self._closed:
                raise Closed(f"{self._where} is closed")
            if self._failure is not None:
                raise failed_error(self._where, "the disk", self._failure)
            segment = self._segments[-1]
            if segment.tail + record_size <= segment.capacity:
                return segment
            if self._syncing:
                self._cond.wait()
            else:
                durable += self._roll(segment, record_size)

    def _roll(self, full: Segment, record_size: int) -> list[_Appended]:
        """Sync the full segment and start its successor: recovery treats a bad record in any
        but the last segment as corruption, and a sync round syncs the active segment
        only. Returns the records this made durable. Called with ``_cond`` held and no sync
        running."""
        self._wal._fdatasync(full)
        size = max(self._wal.segment_size, MAGIC_SIZE + record_size)
        successor = Segment.create(self._dir, full.id + 1, size)
        durable = list(self._unsynced)
        self._unsynced.clear()
        self._index(durable)
        self._segments.append(successor)
        return durable

    def _sync_until(self, position: int) -> None:
        """Wait until the records up to ``position`` are durable (or failed), running sync
        rounds while none is running."""
        while True:
            with self._cond:
                if self._synced >= position or self._failure is not None:
                    return
                if self._syncing:
                    self._cond.wait()
                    continue
                done, outcome = self._sync_round()
            _settle(done, outcome)

    def _sync_round(self) -> tuple[list[_Appended], Unavailable | None]:
        """One ``fdatasync`` of the active segment, covering every record appended so far;
        the records it settles and their error. Called with ``_cond`` held (released while
        syncing), records waiting and no round running."""
        count = len(self._unsynced)
        position = self._unsynced[-1].ticket.position
        segment = self._segments[-1]
        self._syncing = True
        outcome: Unavailable | None = None
        self._cond.release()
        try:
            self._wal._fdatasync(segment)
        except BaseException as e:
            outcome = failed_error(self._where, "the disk", e)
        finally:
            self._cond.acquire()
            self._syncing = False
        if outcome is None:
            done = [self._unsynced.popleft() for _ in range(count)]
            self._index(done)
            self._synced = position
        else:
            done = self._fail(outcome.__cause__ or outcome)
        self._cond.notify_all()
        return done, outcome

    def _index(self, durable: list[_Appended]) -> None:
        """Index records now durable, so reads see them; those already below their table's
        floor (flushed before their sync finished) stay out. Called with ``_cond`` held."""
        segment = self._segments[-1]
        floors = self._floors
        for appended in durable:
            table_id, seq = appended.table_id, appended.ticket.seq
            if seq > floors.get(table_id, 0):
                segment.add(table_id, seq, appended.offset)

    def _fail(self, failure: BaseException) -> list[_Appended]:
        """Stop the region taking writes; the records not yet durable, to fail. Called with
        ``_cond`` held."""
        if self._failure is None:
            self._failure = failure
            logger.error(
                "%s: a write or sync failed, region takes no more writes until reopened: %r",
                self._where,
                failure,
            )
        failed = list(self._unsynced)
        self._unsynced.clear()
        return failed

    # -- reads ------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise Closed(f"{self._where} is closed")

    def read(self, table_id: int, from_seq: int) -> Iterator[WalRecord]:
        with self._cond:
            self._check_open()
            low = max(from_seq, self._floors.get(table_id, 0) + 1)
            # The maps are taken now, not as the iterator advances: an mmap keeps its file
            # alive, so the read sees the log as of this call even if mark_deleted removes
            # segments meanwhile, and it never sees a record from before its own floor.
            plan: list[_Planned] = []
            try:
                for segment in self._segments:
                    span = segment.spans.get(table_id)
                    if span is not None and span.max_seq >= low:
                        mapped = mmap.mmap(segment.fd, 0, access=mmap.ACCESS_READ)
                        plan.append((segment.path, mapped, span.offsets, len(span.offsets)))
            except BaseException:
                _unmap(plan)
                raise
        return self._records(table_id, low, plan)

    def _records(self, table_id: int, low: int, plan: list[_Planned]) -> Iterator[WalRecord]:
        try:
            for path, mapped, offsets, count in plan:
                first = bisect.bisect_left(
                    offsets, low, 0, count, key=functools.partial(seq_at, mapped)
                )
                for index in range(first, count):
                    self._check_open()
                    offset = offsets[index]
                    try:
                        record = decode_at(mapped, offset, len(mapped))
                    except Corrupted as e:
                        raise Corrupted(f"WAL segment {path}: {e.message}") from None
                    if record.table_id != table_id:
                        raise Corrupted(
                            f"WAL segment {path}: record at offset {offset} belongs to table "
                            f"{record.table_id}, indexed under {table_id}"
                        )
                    yield WalRecord(record.table_id, record.seq, record.value)
        finally:
            _unmap(plan)

    # -- deletion ---------------------------------------------------------------------------

    def mark_deleted(self, table_id: int, up_to_seq: int) -> None:
        with self._marks_lock:
            with self._cond:
                self._check_open()
                if up_to_seq <= self._floors.get(table_id, 0):
                    return
                floors = dict(self._floors)
            floors[table_id] = up_to_seq
            try:
                _write_marks(self._dir, floors)
            except OSError as e:
                raise Unavailable(
                    f"WAL region {self._id}: cannot persist deletion marks in {self._dir}: {e}"
                ) from e
            with self._cond:
                self._floors[table_id] = up_to_seq
                self._last[table_id] = max(self._last.get(table_id, 0), up_to_seq)
                dead = _sweep(self._segments, {table_id: up_to_seq})
            _remove(self._dir, dead)

    def last_seq(self, table_id: int) -> int:
        with self._cond:
            self._check_open()
            return self._last.get(table_id, 0)

    # -- life cycle -------------------------------------------------------------------------

    def close(self) -> None:
        """Refuse new appends, make those already accepted durable, then close the
        files."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            appended = self._appended
        self._sync_until(appended)
        with self._marks_lock, self._cond:
            try:
                if self._wal.sync == "never" and self._failure is None:
                    self._wal._fdatasync(self._segments[-1])
            except OSError as e:
                raise Unavailable(
                    f"WAL region {self._id}: cannot sync {self._segments[-1].path} on close: {e}"
                ) from e
            finally:
                for segment in self._segments:
                    segment.close()
                os.close(self._lock_fd)


class _Appended:
    """A record appended to the active segment: its ticket, table and offset."""

    __slots__ = ("offset", "table_id", "ticket")

    def __init__(self, ticket: Ticket, table_id: int, offset: int) -> None:
        self.ticket = ticket
        self.table_id = table_id
        self.offset = offset


def _settle(records: list[_Appended], error: BaseException | None) -> None:
    """Settle the tickets of ``records`` (called without the region's lock: their waiters
    wake)."""
    for appended in records:
        appended.ticket.settle(error)


#: A segment a read will visit: path (for errors), private map, record offsets, offsets to use.
_Planned = tuple[str, mmap.mmap, "array[int]", int]


def _unmap(plan: list[_Planned]) -> None:
    for _, mapped, _, _ in plan:
        mapped.close()


def _recover(
    wal: DiskWal, region_id: int, directory: str
) -> tuple[list[Segment], dict[int, int], dict[int, int]]:
    """Rebuild a region's state from its files: segments, last seqs, deletion floors."""
    names = os.listdir(directory)
    for name in names:
        # Temporaries are written before being renamed into place, so they never hold state.
        if is_temporary(name) or name == _MARKS_TMP:
            os.unlink(os.path.join(directory, name))
    floors = _read_marks(directory)
    ids = sorted(i for i in map(parse_segment_name, names) if i is not None)
    segments: list[Segment] = []
    newest: dict[int, int] = {}
    try:
        for position, segment_id in enumerate(ids):
            path = os.path.join(directory, segment_name(segment_id))
            segment = Segment.open(path, segment_id, wal.segment_size)
            segments.append(segment)
            _scan(wal, region_id, segment, newest, last=position == len(ids) - 1)
        if not segments:
            segments.append(Segment.create(directory, 1, wal.segment_size))
        last = dict(floors)
        for table_id, seq in newest.items():
            last[table_id] = max(last.get(table_id, 0), seq)
        dead = _sweep(segments, floors)
        active = segments[-1]
        if not active.spans and active.tail > MAGIC_SIZE:
            dead += _fresh_segment(wal, directory, segments)
    except BaseException:
        for segment in segments:
            segment.close()
        raise
    _remove(directory, dead)
    return segments, last, floors


def _fresh_segment(wal: DiskWal, directory: str, segments: list[Segment]) -> list[Segment]:
    """Every record of the active segment is dead (a node restarted after flushing): writes
    go to a fresh segment of one extent, and the old one is returned dead, to be deleted.
    Like deleting, this only reclaims space: if the new segment cannot be made, writes go
    on in the old one."""
    try:
        segments.append(Segment.create(directory, segments[-1].id + 1, wal.segment_size))
    except OSError as e:
        logger.warning("WAL: cannot start a fresh segment in %s: %s", directory, e)
        return []
    return _sweep(segments, {})


def _scan(
    wal: DiskWal, region_id: int, segment: Segment, newest: dict[int, int], *, last: bool
) -> None:
    """Index the records of ``segment`` and set its tail; repair a torn tail if ``last``."""
    with mmap.mmap(segment.fd, 0, access=mmap.ACCESS_READ) as mapped:
        scanner = RecordScanner(mapped, MAGIC_SIZE, segment.size, check_tail=last)
        for offset, record in scanner:
            previous = newest.get(record.table_id, 0)
            if record.seq <= previous:
                raise Corrupted(
                    f"WAL segment {segment.path}: record at offset {offset} has seq {record.seq} "
                    f"of table {record.table_id}, not above the previous seq {previous}"
                )
            newest[record.table_id] = record.seq
            segment.add(record.table_id, record.seq, offset)
        torn = scanner.end is ScanEnd.TORN and last
        if scanner.end is not ScanEnd.CLEAN and not torn:
            raise Corrupted(
                f"WAL segment {segment.path}: bad record at offset {scanner.end_offset}: "
                f"{scanner.detail}"
            )
        dirty_end = nonzero_end(mapped, scanner.end_offset, segment.size) if torn else 0
    segment.tail = scanner.end_offset
    if torn:
        logger.warning(
            "WAL region %d: torn tail in segment %s at offset %d (%s); zeroing %d bytes "
            "from there (writes after that point were never acknowledged)",
            region_id,
            segment.path,
            scanner.end_offset,
            scanner.detail,
            dirty_end - scanner.end_offset,
        )
        offset = scanner.end_offset
        while offset < dirty_end:
            count = min(len(_ZERO_BLOCK), dirty_end - offset)
            segment.pwrite(_ZERO_BLOCK[:count], offset)
            offset += count
        wal._fdatasync(segment)


def _sweep(segments: list[Segment], floors: dict[int, int]) -> list[Segment]:
    """Apply new floors to the spans; take out (and close) the segments left holding nothing
    live, except the active one. Called with the region's lock held, if any."""
    for segment in segments:
        segment.forget_up_to(floors)
    dead = [segment for segment in segments[:-1] if not segment.spans]
    if dead:
        segments[:] = [segment for segment in segments[:-1] if segment.spans] + segments[-1:]
        for segment in dead:
            segment.close()
    return dead


def _remove(directory: str, dead: list[Segment]) -> None:
    """Delete dead segment files. Reclaiming space is best effort: the deletion marks are
    already durable, and a file left behind is found dead again on the next open."""
    try:
        for segment in dead:
            os.unlink(segment.path)
        if dead:
            fsync_dir(directory)
    except OSError as e:
        logger.warning("WAL: cannot delete dead segments in %s: %s", directory, e)


def _write_marks(directory: str, floors: dict[int, int]) -> None:
    """Persist the floors atomically: temp file, fsync, rename, directory fsync.

    Layout: magic | count u32 | count x (table_id u64, floor u64) | crc32 u32 of all before it.
    """
    body = b"".join(
        [_MARKS_MAGIC, _MARKS_COUNT.pack(len(floors))]
        + [_MARK.pack(table_id, floor) for table_id, floor in sorted(floors.items())]
    )
    data = body + _MARKS_CRC.pack(zlib.crc32(body))
    tmp = os.path.join(directory, _MARKS_TMP)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, os.path.join(directory, _MARKS_NAME))
    fsync_dir(directory)


def _read_marks(directory: str) -> dict[int, int]:
    path = os.path.join(directory, _MARKS_NAME)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return {}
    header = len(_MARKS_MAGIC) + _MARKS_COUNT.size
    if len(data) < header + _MARKS_CRC.size or not data.startswith(_MARKS_MAGIC):
        raise Corrupted(f"WAL marks file {path}: bad magic number or truncated")
    (count,) = _MARKS_COUNT.unpack_from(data, len(_MARKS_MAGIC))
    body_size = header + count * _MARK.size
    if len(data) != body_size + _MARKS_CRC.size:
        raise Corrupted(f"WAL marks file {path}: {len(data)} bytes do not hold {count} marks")
    (crc,) = _MARKS_CRC.unpack_from(data, body_size)
    if zlib.crc32(data[:body_size]) != crc:
        raise Corrupted(f"WAL marks file {path}: crc mismatch")
    return dict(_MARK.iter_unpack(data[header:body_size]))
