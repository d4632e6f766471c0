"""The data-topic record format: one Kafka record per group commit, holding many entries.

A Kafka record value, little-endian::

    version u8 (2) | crc u32 | kind u8 | epoch u64 | count u32 | count x entry

``crc`` is ``zlib.crc32`` of everything after it. ``kind`` is 0 for a data record and 1 for an
epoch marker (no entries), which a writer appends when it opens the region at ``epoch``; every
data record carries its writer's epoch. Version 1 records (``version | crc | count | entries``)
are still read, as data records of epoch 0. An entry is one fragment of one WAL record::

    table_id u64 | seq u64 | total u64 | start u64 | length u32 | length bytes

``total`` is the size of the whole payload and ``start`` where this fragment begins in it. A
payload that does not fit in the room left in a Kafka record continues in the next one, so a
group larger than ``max_record_bytes`` spans several consecutive Kafka records and payloads of
any size fit under the broker's message size limit. Fragments of one payload are always in
consecutive records (a region has one writer and one group in flight at a time), so a reader
needs to hold at most one partial payload.

The fence: a data record whose epoch is below the highest epoch marker before it in the log
was written by a deposed owner after a newer one took the region over; it is never applied
(see :class:`Fence`).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

from gnomon.errors import Corrupted

VERSION = 2
HEADER = struct.Struct("<BIBQI")
_HEADER_V1 = struct.Struct("<BII")
#: The header fields after the crc, which the crc covers.
_HEAD = struct.Struct("<BQI")
DATA, MARKER = 0, 1
ENTRY = struct.Struct("<QQQQI")
#: Smallest useful ``max_record_bytes``: a header, an entry header and some payload.
MIN_RECORD_BYTES = 4096
#: Below this much room, a payload that needs splitting starts in a fresh record instead, so
#: records do not end in slivers.
_MIN_FRAGMENT = 1024


@dataclass(frozen=True, slots=True)
class Fragment:
    table_id: int
    seq: int
    total: int
    start: int
    data: memoryview


@dataclass(frozen=True, slots=True)
class Record:
    """One decoded Kafka record: an epoch marker (no fragments) or a data record."""

    epoch: int
    marker: bool
    fragments: list[Fragment]


@dataclass(frozen=True, slots=True)
class Entry:
    """A whole WAL record as found in the log: the Kafka offsets of its first and last
    fragment (equal unless the payload was split)."""

    table_id: int
    seq: int
    payload: bytes
    first_offset: int
    last_offset: int


@dataclass(frozen=True, slots=True)
class EncodedGroup:
    """A group's Kafka record values, and per entry the indexes of the records holding its
    first and its last fragment."""

    records: list[bytes]
    spans: list[tuple[int, int]]


def encode_group(
    entries: Sequence[tuple[int, int, bytes]], max_record_bytes: int, epoch: int = 0
) -> EncodedGroup:
    """Pack ``(table_id, seq, payload)`` entries, in order, into records of at most
    ``max_record_bytes`` bytes, written at ``epoch``."""
    records: list[bytes] = []
    spans: list[tuple[int, int]] = []
    parts: list[bytes | memoryview] = []
    size = HEADER.size
    count = 0

    def close_record() -> None:
        nonlocal parts, size, count
        records.append(_seal(DATA, epoch, count, b"".join(parts)))
        parts, size, count = [], HEADER.size, 0

    for table_id, seq, payload in entries:
        view = memoryview(payload)
        total = len(view)
        start = 0
        first = -1
        while True:
            room = max_record_bytes - size - ENTRY.size
            left = total - start
            if count and (room < 0 or (room < left and room < _MIN_FRAGMENT)):
                close_record()
                continue
            take = min(room, left)
            parts.append(ENTRY.pack(table_id, seq, total, start, take))
            parts.append(view[start : start + take])
            size += ENTRY.size + take
            count += 1
            if first < 0:
                first = len(records)
            start += take
            if start == total:
                break
            close_record()
        spans.append((first, len(records)))
    if count:
        close_record()
    return EncodedGroup(records, spans)


def encode_marker(epoch: int) -> bytes:
    """The epoch marker a writer appends when it opens the region at ``epoch``."""
    return _seal(MARKER, epoch, 0, b"")


def _seal(kind: int, epoch: int, count: int, body: bytes) -> bytes:
    head = _HEAD.pack(kind, epoch, count)
    crc = zlib.crc32(body, zlib.crc32(head))
    return struct.pack("<BI", VERSION, crc) + head + body


def decode_record(value: bytes, where: str) -> list[Fragment]:
    """The fragments of one Kafka record value (none for a marker); ``Corrupted`` naming
    ``where`` if it fails its checks."""
    return decode(value, where).fragments


def decode(value: bytes, where: str) -> Record:
    """One Kafka record value; ``Corrupted`` naming ``where`` if it fails its checks."""
    version = value[0] if value else None
    header = _HEADER_V1 if version == 1 else HEADER
    if len(value) < header.size:
        raise Corrupted(f"{where}: WAL record of {len(value)} bytes is shorter than its header")
    if version not in (1, VERSION):
        raise Corrupted(f"{where}: unknown WAL record version {version}")
    view = memoryview(value)
    if zlib.crc32(view[5:]) != struct.unpack_from("<I", value, 1)[0]:
        raise Corrupted(f"{where}: WAL record crc mismatch")
    if version == 1:
        kind, epoch, count = DATA, 0, _HEADER_V1.unpack_from(value, 0)[2]
    else:
        kind, epoch, count = _HEAD.unpack_from(value, 5)
    if kind not in (DATA, MARKER) or (kind == MARKER and count):
        raise Corrupted(f"{where}: bad WAL record kind {kind} with {count} entries")
    fragments: list[Fragment] = []
    position = header.size
    for _ in range(count):
        if position + ENTRY.size > len(value):
            raise Corrupted(f"{where}: WAL record entry header runs past the end")
        table_id, seq, total, start, length = ENTRY.unpack_from(value, position)
        position += ENTRY.size
        if position + length > len(value) or start + length > total or seq == 0:
            raise Corrupted(
                f"{where}: bad WAL record entry (table {table_id}, seq {seq}, "
                f"bytes {start}..{start + length} of {total})"
            )
        fragments.append(Fragment(table_id, seq, total, start, view[position : position + length]))
        position += length
    if position != len(value):
        raise Corrupted(f"{where}: {len(value) - position} stray bytes after the last entry")
    return Record(epoch, kind == MARKER, fragments)


class Fence:
    """The replay rule, fed the records of the log in order from a point where the fence
    stood at ``epoch``: a marker raises the fence (never lowers it); a data record below the
    fence is stale, the late write of a deposed owner, and is not admitted."""

    def __init__(self, epoch: int = 0) -> None:
        self.epoch = epoch
        self.stale = 0

    def admit(self, record: Record) -> bool:
        """Whether the record's entries count; False for markers and stale records."""
        if record.marker:
            self.epoch = max(self.epoch, record.epoch)
            return False
        if record.epoch < self.epoch:
            self.stale += 1
            return False
        return True


class Assembler:
    """Joins fragments back into entries, fed in log order.

    A partial payload that is not continued by the next fragment is the remains of a group a
    writer never finished (it crashed or its delivery failed, so nothing in it was
    acknowledged); it is dropped and counted in ``orphans``. With ``table_id`` set, only that
    table's payloads are copied out; other tables' fragments are still followed, to tell
    orphans apart.
    """

    def __init__(self, table_id: int | None = None) -> None:
        self._table_id = table_id
        self._partial: tuple[int, int, int, int] | None = None  # table, seq, total, first offset
        self._chunks: list[bytes] = []
        self._got = 0
        self.orphans = 0

    def feed(self, offset: int, fragment: Fragment) -> Entry | None:
        partial = self._partial
        if partial is not None and not (
            fragment.start == self._got
            and fragment.start > 0
            and (fragment.table_id, fragment.seq, fragment.total) == partial[:3]
        ):
            self._drop()
            partial = None
        wanted = self._table_id is None or fragment.table_id == self._table_id
        if fragment.start == 0:
            if len(fragment.data) == fragment.total:
                if not wanted:
                    return None
                data = bytes(fragment.data)
                return Entry(fragment.table_id, fragment.seq, data, offset, offset)
            self._partial = (fragment.table_id, fragment.seq, fragment.total, offset)
            self._chunks = [bytes(fragment.data)] if wanted else []
            self._got = len(fragment.data)
            return None
        if partial is None:
            # A continuation whose start was never seen: the tail of an unfinished group.
            self.orphans += 1
            return None
        if wanted:
            self._chunks.append(bytes(fragment.data))
        self._got += len(fragment.data)
        if self._got < partial[2]:
            return None
        self._partial = None
        chunks, self._chunks = self._chunks, []
        if not wanted:
            return None
        return Entry(partial[0], partial[1], b"".join(chunks), partial[3], offset)

    def finish(self) -> None:
        """The log ends here: a partial payload left over is an orphan."""
        if self._partial is not None:
            self._drop()

    def _drop(self) -> None:
        self._partial = None
        self._chunks = []
        self._got = 0
        self.orphans += 1
