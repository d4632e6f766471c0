"""RegionMeta: what a region knows about each of its tables, and its snapshot format.

A snapshot is one record of the region's meta topic, little-endian::

    version u8 (2) | crc u32 | region_id u64 | end u64 | fence_count u32 | table_count u32
    | fence_count x (offset u64, epoch u64) | table_count x table
    table: table_id u64 | next_seq_num u64 | latest_marked_deleted u64 | high_watermark u64
           | index_count u32 | index_count x (seq u64, offset u64)

``crc`` is ``zlib.crc32`` of everything after it. ``end`` is the data-topic offset the snapshot
is complete up to: recovery scans the data topic from there. The fences are the epoch markers
of the data topic that raised the fence, ascending: a data record at an offset above a fence's
marker and below the next one is stale if its epoch is below that fence's. The last fence's
epoch is the snapshot's epoch (that of the writer that took it). Version 1 snapshots (no fence
count, no fences) are still read, as of epoch 0.

Per table, ``next_seq_num`` is one above the highest seq found in the log (0 + 1 for a table
with no record), ``latest_marked_deleted`` the deletion floor, ``high_watermark`` the data-topic
offset just after the table's last record (reads stop there), and the index a sparse,
ascending seq -> offset map: an entry ``(seq, offset)`` says the record of ``seq`` starts at
``offset`` and no live record of the table lies before it. Entries are kept at most one per
``index_interval`` Kafka records, so the map stays small however many records a table has; a
read from any seq starts at the nearest entry at or below it and skips fewer than
``index_interval`` records.
"""

from __future__ import annotations

import bisect
import struct
import zlib
from array import array
from dataclasses import dataclass, field

from gnomon.errors import Corrupted, TooLarge

VERSION = 2
_HEADER_V1 = struct.Struct("<BIQQI")
_HEADER = struct.Struct("<BIQQII")
_FENCE = struct.Struct("<QQ")
_TABLE = struct.Struct("<QQQQI")
_INDEX_ENTRY = struct.Struct("<QQ")


def _new_index() -> array[int]:
    return array("Q")


@dataclass
class TableMeta:
    next_seq_num: int = 1
    latest_marked_deleted: int = 0
    high_watermark: int = 0
    index_seqs: array[int] = field(default_factory=_new_index)
    index_offsets: array[int] = field(default_factory=_new_index)

    @property
    def last_seq(self) -> int:
        """The highest seq assigned to the table: its last record or its floor."""
        return max(self.next_seq_num - 1, self.latest_marked_deleted)

    @property
    def has_live_records(self) -> bool:
        return self.next_seq_num - 1 > self.latest_marked_deleted

    def apply(self, seq: int, first_offset: int, last_offset: int, index_interval: int) -> bool:
        """Take in a record of the log; False (and no change) for a seq already seen, which
        only a duplicated produce can leave (the first copy is the one that counts)."""
        if seq < self.next_seq_num:
            return False
        self.next_seq_num = seq + 1
        self.high_watermark = max(self.high_watermark, last_offset + 1)
        if seq > self.latest_marked_deleted and (
            not self.index_offsets or first_offset - self.index_offsets[-1] >= index_interval
        ):
            self.index_seqs.append(seq)
            self.index_offsets.append(first_offset)
        return True

    def mark_deleted(self, up_to_seq: int) -> None:
        """Raise the floor (never lower it) and drop index entries only dead records need."""
        if up_to_seq <= self.latest_marked_deleted:
            return
        self.latest_marked_deleted = up_to_seq
        if not self.has_live_records:
            del self.index_seqs[:], self.index_offsets[:]
            return
        # Keep the last entry at or below the first live seq: reads of it start there.
        keep = bisect.bisect_right(self.index_seqs, up_to_seq + 1) - 1
        if keep > 0:
            del self.index_seqs[:keep], self.index_offsets[:keep]

    def start_offset(self, seq: int) -> int:
        """Where a read of the records from ``seq`` on starts (the table has live records)."""
        at = bisect.bisect_right(self.index_seqs, seq) - 1
        return self.index_offsets[max(at, 0)]

    def lowest_live_offset(self) -> int | None:
        if not self.has_live_records or not self.index_offsets:
            return None
        return self.index_offsets[0]

    def copy(self) -> TableMeta:
        return TableMeta(
            self.next_seq_num,
            self.latest_marked_deleted,
            self.high_watermark,
            array("Q", self.index_seqs),
            array("Q", self.index_offsets),
        )


@dataclass
class RegionMeta:
    region_id: int
    #: The data-topic offset after the last record this state accounts for.
    end: int = 0
    tables: dict[int, TableMeta] = field(default_factory=dict)
    #: ``(marker offset, epoch)`` of each epoch marker that raised the fence, ascending.
    fences: list[tuple[int, int]] = field(default_factory=list)

    @property
    def epoch(self) -> int:
        """The fence at ``end``: the highest epoch marker seen (0 without one)."""
        return self.fences[-1][1] if self.fences else 0

    def fence_at(self, offset: int) -> int:
        """The fence a data record at ``offset`` is held to."""
        at = bisect.bisect_left(self.fences, (offset, 0)) - 1
        return self.fences[at][1] if at >= 0 else 0

    def raise_fence(self, offset: int, epoch: int) -> bool:
        """Take in the epoch marker at ``offset``; whether it raised the fence."""
        if epoch <= self.epoch:
            return False
        self.fences.append((offset, epoch))
        return True

    def table(self, table_id: int) -> TableMeta:
        meta = self.tables.get(table_id)
        if meta is None:
            meta = self.tables[table_id] = TableMeta()
        return meta

    def lowest_live_offset(self) -> int:
        """Every record below this offset is dead (marked deleted or superseded)."""
        lowest = self.end
        for meta in self.tables.values():
            offset = meta.lowest_live_offset()
            if offset is not None and offset < lowest:
                lowest = offset
        return lowest

    def copy(self) -> RegionMeta:
        return RegionMeta(
            self.region_id,
            self.end,
            {tid: meta.copy() for tid, meta in self.tables.items()},
            list(self.fences),
        )

    def encode(self, max_bytes: int) -> bytes:
        """The snapshot record, at most ``max_bytes`` long.

        When the index makes it too long, every other index entry (never a table's first) is
        left out until it fits: a sparser index is still correct, reads just skip more.
        """
        tables = {tid: (meta, 1) for tid, meta in self.tables.items()}
        while True:
            data = self._encode(tables)
            if len(data) <= max_bytes:
                return data
            if all(len(meta.index_seqs) <= step for meta, step in tables.values()):
                raise TooLarge(
                    f"WAL region {self.region_id}: the snapshot of {len(self.tables)} tables "
                    f"needs {len(data)} bytes, more than the {max_bytes} a Kafka record may hold"
                )
            tables = {tid: (meta, step * 2) for tid, (meta, step) in tables.items()}

    def _encode(self, tables: dict[int, tuple[TableMeta, int]]) -> bytes:
        parts: list[bytes] = []
        for table_id, (meta, step) in sorted(tables.items()):
            seqs, offsets = meta.index_seqs[::step], meta.index_offsets[::step]
            parts.append(
                _TABLE.pack(
                    table_id,
                    meta.next_seq_num,
                    meta.latest_marked_deleted,
                    meta.high_watermark,
                    len(seqs),
                )
            )
            interleaved = array("Q", bytes(16 * len(seqs)))
            interleaved[0::2], interleaved[1::2] = seqs, offsets
            parts.append(_little_endian(interleaved))
        head = struct.pack("<QQII", self.region_id, self.end, len(self.fences), len(tables))
        fences = b"".join(_FENCE.pack(offset, epoch) for offset, epoch in self.fences)
        body = head + fences + b"".join(parts)
        return struct.pack("<BI", VERSION, zlib.crc32(body)) + body

    @classmethod
    def decode(cls, data: bytes, region_id: int, where: str) -> RegionMeta:
        version = data[0] if data else None
        header = _HEADER_V1 if version == 1 else _HEADER
        if len(data) < header.size:
            raise Corrupted(f"{where}: snapshot of {len(data)} bytes is shorter than its header")
        if version not in (1, VERSION):
            raise Corrupted(f"{where}: unknown snapshot version {version}")
        if zlib.crc32(memoryview(data)[5:]) != struct.unpack_from("<I", data, 1)[0]:
            raise Corrupted(f"{where}: snapshot crc mismatch")
        if version == 1:
            _, _, stored_region, end, count = _HEADER_V1.unpack_from(data, 0)
            fence_count = 0
        else:
            _, _, stored_region, end, fence_count, count = _HEADER.unpack_from(data, 0)
        if stored_region != region_id:
            raise Corrupted(f"{where}: snapshot of region {stored_region}, not {region_id}")
        meta = cls(region_id, end)
        position = header.size
        for _ in range(fence_count):
            if position + _FENCE.size > len(data):
                raise Corrupted(f"{where}: snapshot fences run past the end")
            offset, epoch = _FENCE.unpack_from(data, position)
            position += _FENCE.size
            ascending = not meta.fences or offset > meta.fences[-1][0]
            if not ascending or offset >= end or not meta.raise_fence(offset, epoch):
                raise Corrupted(f"{where}: bad snapshot fence (epoch {epoch} at offset {offset})")
        for _ in range(count):
            if position + _TABLE.size > len(data):
                raise Corrupted(f"{where}: snapshot table entry runs past the end")
            table_id, next_seq, floor, high_watermark, entries = _TABLE.unpack_from(data, position)
            position += _TABLE.size
            size = entries * _INDEX_ENTRY.size
            if position + size > len(data) or next_seq == 0 or table_id in meta.tables:
                raise Corrupted(f"{where}: bad snapshot entry of table {table_id}")
            interleaved = array("Q", data[position : position + size])
            position += size
            interleaved = _little_endian_to_native(interleaved)
            meta.tables[table_id] = TableMeta(
                next_seq, floor, high_watermark, interleaved[0::2], interleaved[1::2]
            )
        if position != len(data):
            raise Corrupted(f"{where}: {len(data) - position} stray bytes after the snapshot")
        return meta


_NATIVE_IS_LITTLE = struct.pack("=H", 1) == struct.pack("<H", 1)


def _little_endian(values: array[int]) -> bytes:
    if _NATIVE_IS_LITTLE:
        return values.tobytes()
    swapped = array("Q", values)
    swapped.byteswap()
    return swapped.tobytes()


def _little_endian_to_native(values: array[int]) -> array[int]:
    if not _NATIVE_IS_LITTLE:
        values.byteswap()
    return values
