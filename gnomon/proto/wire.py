"""Protobuf's wire format read by hand, where a decoder walks a message's bytes instead of
building its objects (answers checked byte for byte, remote-write bodies)."""

from __future__ import annotations


def varint(data: bytes | memoryview, pos: int, message: str = "message") -> tuple[int, int]:
    """The varint at ``pos`` of ``data`` (a ``message``) and the position after it;
    ValueError if ``data`` ends inside it."""
    value = shift = 0
    end = len(data)
    while True:
        if pos >= end:
            raise ValueError(f"{message}: truncated varint")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
