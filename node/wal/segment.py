"""Segment files of the disk WAL.

A segment is a file ``seg_<id>`` (the id zero-padded to 20 digits, so names sort like ids) that
starts with :data:`MAGIC` and holds records after it, up to its capacity (where the log rolls
to a new segment). Its file is preallocated :data:`EXTENT` bytes at a time ahead of the
records, so most appends change neither the file size nor its allocation and ``fdatasync``
has no size to write, while an idle log holds one extent, not a whole segment, on disk; the
unused rest reads as zeros, which the codec takes as the end of the data.

A new file is built under a temporary name and renamed into place once its magic number is
durable, so a crash never leaves a ``seg_<id>`` without one.
"""

from __future__ import annotations

import contextlib
import errno
import os
from array import array
from dataclasses import dataclass, field

from gnomon.errors import Corrupted

MAGIC = b"GNMWAL01"
MAGIC_SIZE = len(MAGIC)
_PREFIX = "seg_"
_TMP_SUFFIX = ".tmp"
_ID_DIGITS = 20
#: Bytes a segment file is preallocated by at a time.
EXTENT = 4 * 1024 * 1024


def segment_name(segment_id: int) -> str:
    return f"{_PREFIX}{segment_id:0{_ID_DIGITS}d}"


def parse_segment_name(name: str) -> int | None:
    """The id of a segment file name, None for any other name (temporaries included)."""
    digits = name[len(_PREFIX) :]
    if not name.startswith(_PREFIX) or len(digits) != _ID_DIGITS or not digits.isdigit():
        return None
    return int(digits)


def is_temporary(name: str) -> bool:
    return name.startswith(_PREFIX) and name.endswith(_TMP_SUFFIX)


def fsync_dir(path: str) -> None:
    """Make creations, renames and deletions of entries in ``path`` durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _preallocate(fd: int, start: int, size: int) -> None:
    """Reserve the file's bytes from ``start`` up to ``size``."""
    try:
        os.posix_fallocate(fd, start, size - start)
    except OSError as e:
        # Some filesystems cannot reserve blocks; a sparse file still reads back as zeros,
        # which is all the format needs.
        if e.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
            raise
        os.ftruncate(fd, size)


@dataclass
class TableSpan:
    """The records of one table in one segment: seq range and record offsets, in seq order."""

    min_seq: int
    max_seq: int
    offsets: array[int] = field(default_factory=lambda: array("Q"))


class Segment:
    """An open segment file.

    ``tail`` is where the next record goes; every record before it is complete. ``size`` is
    the file's length (preallocated past ``tail``), ``capacity`` the length it may grow to.
    ``spans`` index the records by table, for reads and for deciding when the segment holds
    nothing live. The owner serialises appends and guards ``spans`` and ``tail`` with its
    own lock.
    """

    def __init__(
        self, path: str, segment_id: int, fd: int, size: int, tail: int, capacity: int
    ) -> None:
        self.path = path
        self.id = segment_id
        self.fd = fd
        self.size = size
        self.capacity = max(capacity, size)
        self.tail = tail
        self.spans: dict[int, TableSpan] = {}
        self.closed = False

    @classmethod
    def create(cls, directory: str, segment_id: int, capacity: int) -> Segment:
        """Create, preallocate (one extent) and durably name a new, empty segment."""
        path = os.path.join(directory, segment_name(segment_id))
        tmp = path + _TMP_SUFFIX
        size = min(capacity, EXTENT)
        fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        try:
            _preallocate(fd, 0, size)
            os.pwrite(fd, MAGIC, 0)
            os.fsync(fd)
            os.rename(tmp, path)
            fsync_dir(directory)
        except BaseException:
            os.close(fd)
            _unlink_quietly(tmp)
            raise
        return cls(path, segment_id, fd, size, MAGIC_SIZE, capacity)

    @classmethod
    def open(cls, path: str, segment_id: int, capacity: int) -> Segment:
        """Open an existing segment (growing up to ``capacity``, or its length if longer)
        and check its magic number; the caller scans the records and sets ``tail``."""
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        try:
            size = os.fstat(fd).st_size
            magic = os.pread(fd, MAGIC_SIZE, 0)
            if magic != MAGIC:
                raise Corrupted(
                    f"WAL segment {path}: bad magic number {magic!r} (expected {MAGIC!r})"
                )
        except BaseException:
            os.close(fd)
            raise
        return cls(path, segment_id, fd, size, MAGIC_SIZE, capacity)

    def reserve(self, end: int) -> None:
        """Preallocate the file up to at least ``end`` (at most :attr:`capacity`), a whole
        extent at a time; the next ``fdatasync`` makes the new length durable."""
        if end <= self.size:
            return
        size = min(self.capacity, max(end, self.size + EXTENT))
        _preallocate(self.fd, self.size, size)
        self.size = size

    def pwrite(self, data: bytes, offset: int) -> None:
        """Write all of ``data`` at ``offset``; a short write is resumed, not reported."""
        view = memoryview(data)
        while view:
            written = os.pwrite(self.fd, view, offset)
            view = view[written:]
            offset += written

    def add(self, table_id: int, seq: int, offset: int) -> None:
        """Index a record written at ``offset``; seqs of a table arrive in ascending order."""
        span = self.spans.get(table_id)
        if span is None:
            span = self.spans[table_id] = TableSpan(seq, seq)
        span.max_seq = seq
        span.offsets.append(offset)

    def forget_up_to(self, floors: dict[int, int]) -> None:
        """Narrow the spans to the records above their table's floor, dropping empty ones."""
        for table_id, floor in floors.items():
            span = self.spans.get(table_id)
            if span is None or span.min_seq > floor:
                continue
            if span.max_seq <= floor:
                del self.spans[table_id]
            else:
                # The offsets stay: readers skip the records below min_seq by seq.
                span.min_seq = floor + 1

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            os.close(self.fd)


def _unlink_quietly(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
