"""The WAL record codec.

A record is, little-endian::

    version u8 | crc u32 | table_id u64 | seq u64 | length u32 | value bytes

``crc`` is ``zlib.crc32`` of everything from ``table_id`` to the end of ``value``. Version 1 is
the only format written. Seqs start at 1: a record with seq 0 is invalid, which keeps a torn
header whose tail reads as zeros from passing for a record. A version byte of 0 marks the end
of the data: segments are preallocated, so the bytes after the last record are zeros.

:class:`RecordScanner` walks a buffer of records and, when it stops, says where the valid data
ends and why: a clean end, a torn tail (a bad record with no valid record after it: the remains
of a write that never completed) or corruption (a bad record with valid data after it, or a
record of an unknown version).
"""

from __future__ import annotations

import enum
import mmap
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TypeAlias

from gnomon.errors import Corrupted, InvalidArgument, TooLarge
from gnomon.wal.api import MAX_U64

VERSION = 1
HEADER = struct.Struct("<BIQQI")
HEADER_SIZE = HEADER.size
_PREFIX = struct.Struct("<BI")
_BODY = struct.Struct("<QQI")
# The crc covers the record from table_id on, i.e. everything after version and crc.
_CRC_START = _PREFIX.size
_SEQ = struct.Struct("<Q")
_SEQ_OFFSET = 1 + 4 + 8

MAX_VALUE_SIZE = (1 << 32) - 1

#: What the scanner accepts: anything sliceable and searchable with ``find``.
Buffer: TypeAlias = bytes | bytearray | mmap.mmap

_ZERO_CHUNK = 1 << 20
_VERSION_BYTE = bytes([VERSION])


@dataclass(frozen=True, slots=True)
class Record:
    table_id: int
    seq: int
    value: bytes


def encode(table_id: int, seq: int, value: bytes) -> bytes:
    """The bytes of one record."""
    if not 0 <= table_id <= MAX_U64:
        raise InvalidArgument(f"WAL record table id {table_id} is not an unsigned 64-bit int")
    if not 1 <= seq <= MAX_U64:
        raise InvalidArgument(f"WAL record seq {seq} of table {table_id} is not in [1, 2^64)")
    if len(value) > MAX_VALUE_SIZE:
        raise TooLarge(
            f"WAL record of table {table_id} has {len(value)} bytes, more than the "
            f"{MAX_VALUE_SIZE} a record can hold"
        )
    body = _BODY.pack(table_id, seq, len(value))
    crc = zlib.crc32(value, zlib.crc32(body))
    return b"".join((_PREFIX.pack(VERSION, crc), body, value))


def seq_at(buf: Buffer, offset: int) -> int:
    """The seq of the record at ``offset``, unchecked: for searching records already verified."""
    seq: int = _SEQ.unpack_from(buf, offset + _SEQ_OFFSET)[0]
    return seq


@dataclass(frozen=True, slots=True)
class _Bad:
    reason: str
    #: A version byte other than 0 or 1. A write torn at a record boundary leaves the version
    #: byte intact or zero, so this is damage or a newer format, never a torn tail to erase.
    unknown_version: bool = False


def _check(buf: Buffer, view: memoryview, offset: int, end: int) -> Record | _Bad:
    """The record at ``offset`` or, if there is no valid one, what is wrong there."""
    if end - offset < HEADER_SIZE:
        return _Bad(f"header runs past the end of the data ({end - offset} bytes left)")
    version, crc, table_id, seq, length = HEADER.unpack_from(buf, offset)
    if version != VERSION:
        return _Bad(f"unknown record version {version}", unknown_version=True)
    if seq == 0:
        # Never written; a header whose tail is zeros can otherwise pass the crc check.
        return _Bad("seq 0")
    stop = offset + HEADER_SIZE + length
    if stop > end:
        return _Bad(f"length {length} runs past the end of the data")
    if zlib.crc32(view[offset + _CRC_START : stop]) != crc:
        return _Bad("crc mismatch")
    return Record(table_id, seq, bytes(view[offset + HEADER_SIZE : stop]))


def decode_at(buf: Buffer, offset: int, end: int) -> Record:
    """The record at ``offset``; Corrupted if it is not a valid record within ``end``."""
    with memoryview(buf) as view:
        found = _check(buf, view, offset, end)
    if isinstance(found, _Bad):
        raise Corrupted(f"bad WAL record at offset {offset}: {found.reason}")
    return found


def first_nonzero(buf: Buffer, start: int, end: int) -> int | None:
    """The offset of the first non-zero byte in ``buf[start:end]``, if any."""
    pos, size = start, 4096
    while pos < end:
        stop = min(pos + size, end)
        rest = buf[pos:stop].lstrip(b"\x00")
        if rest:
            return stop - len(rest)
        pos = stop
        # Small first chunks keep the common case (garbage right here) cheap; big later ones
        # cross a zero-filled segment in few steps.
        size = min(size * 2, _ZERO_CHUNK)
    return None


def nonzero_end(buf: Buffer, start: int, end: int) -> int:
    """One past the last non-zero byte in ``buf[start:end]`` (``start`` if all are zero)."""
    stop = end
    while stop > start:
        begin = max(start, stop - _ZERO_CHUNK)
        kept = len(buf[begin:stop].rstrip(b"\x00"))
        if kept:
            return begin + kept
        stop = begin
    return start


def _valid_record_after(buf: Buffer, view: memoryview, start: int, end: int) -> int | None:
    """The offset of a valid record starting after ``start``, if any.

    Every record starts with the version byte, so only those positions are tried; ``find``
    crosses the zero-filled unused part of a segment at memchr speed.
    """
    pos = start + 1
    while pos < end:
        candidate = buf.find(_VERSION_BYTE, pos, end)
        if candidate < 0:
            return None
        if isinstance(_check(buf, view, candidate, end), Record):
            return candidate
        pos = candidate + 1
    return None


class ScanEnd(enum.Enum):
    CLEAN = "clean"
    TORN = "torn"
    CORRUPT = "corrupt"


class RecordScanner:
    """Yields ``(offset, record)`` for the records of ``buf[start:end]``, in order.

    After the iteration, :attr:`end_offset` is where valid data ends, :attr:`end` says why and
    :attr:`detail` describes the bad record, if any. With ``check_tail`` the bytes after an
    end-of-data marker must be zeros too; leftovers there are a torn write (or corruption when a
    valid record is among them). That costs a scan to the end of the buffer, so it is meant for
    the last segment of a log only.
    """

    def __init__(self, buf: Buffer, start: int, end: int, *, check_tail: bool = False) -> None:
        self._buf = buf
        self._start = start
        self._end = end
        self._check_tail = check_tail
        self.end_offset = start
        self.end = ScanEnd.CLEAN
        self.detail = ""

    def __iter__(self) -> Iterator[tuple[int, Record]]:
        buf, end = self._buf, self._end
        with memoryview(buf) as view:
            offset = self._start
            while offset < end:
                if buf[offset] == 0:
                    self._stop_at_marker(view, offset)
                    return
                found = _check(buf, view, offset, end)
                if isinstance(found, _Bad):
                    self._stop_at_bad_record(view, offset, found)
                    return
                yield offset, found
                offset += HEADER_SIZE + len(found.value)
            self.end_offset = offset

    def _stop_at_marker(self, view: memoryview, offset: int) -> None:
        self.end_offset = offset
        if not self._check_tail:
            return
        leftover = first_nonzero(self._buf, offset, self._end)
        if leftover is None:
            return
        self._classify(view, offset, f"non-zero bytes at offset {leftover} after the end of data")

    def _stop_at_bad_record(self, view: memoryview, offset: int, bad: _Bad) -> None:
        self.end_offset = offset
        if bad.unknown_version:
            self.end = ScanEnd.CORRUPT
            self.detail = bad.reason
            return
        self._classify(view, offset, bad.reason)

    def _classify(self, view: memoryview, offset: int, problem: str) -> None:
        valid = _valid_record_after(self._buf, view, offset, self._end)
        if valid is None:
            self.end = ScanEnd.TORN
            self.detail = problem
        else:
            self.end = ScanEnd.CORRUPT
            self.detail = f"{problem}, yet a valid record follows at offset {valid}"
