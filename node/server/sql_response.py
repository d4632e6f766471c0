"""``SqlQueryResponse`` messages on the wire with their Arrow payload spliced in and read out
in place.

Building the protobuf message copies the payload into the message and serialising copies it
again; on a 6.5 MB answer (TSBS high-cpu-all) that cost about 30 ms of a 45 ms round trip,
most of it faulting in fresh pages. Written here, the payload is copied once, into the
response bytes; read here, its batches are views of the received bytes. Everything else
(the header, affected rows) still goes through protobuf, and the bytes are exactly what
``SqlQueryResponse.SerializeToString`` writes for the same message.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from gnomon.proto import common_pb2, storage_pb2
from gnomon.proto.wire import varint

# Field numbers of storage.proto: SqlQueryResponse.{header, affected_rows, arrow} and
# ArrowPayload.{record_batches, compression}.
_HEADER, _AFFECTED_ROWS, _ARROW = 1, 2, 3
_RECORD_BATCHES, _COMPRESSION = 1, 2
_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5

Payload = bytes | memoryview


@dataclass(frozen=True)
class EncodedSqlResponse:
    """A serialised ``SqlQueryResponse`` and its header (which the server's metrics read)."""

    header: common_pb2.ResponseHeader
    data: bytes


@dataclass
class SqlResponse:
    """A received ``SqlQueryResponse``: ``batches`` (views of the received bytes) is None
    when the response has no Arrow payload."""

    header: common_pb2.ResponseHeader = field(default_factory=common_pb2.ResponseHeader)
    affected_rows: int | None = None
    batches: list[memoryview] | None = None
    compressed: bool = False


def _varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _key(number: int, wire_type: int) -> bytes:
    return _varint(number << 3 | wire_type)


def encode(
    header: common_pb2.ResponseHeader, batches: Sequence[Payload], compressed: bool
) -> EncodedSqlResponse:
    """A response carrying ``batches`` as its ArrowPayload's ``record_batches``."""
    parts: list[Payload] = []
    for batch in batches:
        parts += [_key(_RECORD_BATCHES, _LEN), _varint(len(batch)), batch]
    if compressed:
        parts += [_key(_COMPRESSION, _VARINT), _varint(storage_pb2.ArrowPayload.ZSTD)]
    size = sum(len(p) for p in parts)
    head = storage_pb2.SqlQueryResponse(header=header).SerializeToString()
    data = b"".join([head, _key(_ARROW, _LEN), _varint(size), *parts])
    return EncodedSqlResponse(header, data)


def encode_message(message: storage_pb2.SqlQueryResponse) -> EncodedSqlResponse:
    """A response protobuf builds (no payload worth splicing: affected rows, an error)."""
    return EncodedSqlResponse(message.header, message.SerializeToString())


def _fields(data: memoryview) -> list[tuple[int, int | memoryview]]:
    """``(field number, value)`` of each field of a message: varints as ints, length-delimited
    fields as views; fixed-width fields (none in these messages) are skipped."""
    out: list[tuple[int, int | memoryview]] = []
    pos = 0
    while pos < len(data):
        key, pos = varint(data, pos, "SqlQueryResponse")
        number, wire_type = key >> 3, key & 7
        if wire_type == _VARINT:
            value, pos = varint(data, pos, "SqlQueryResponse")
            out.append((number, value))
        elif wire_type == _LEN:
            size, pos = varint(data, pos, "SqlQueryResponse")
            if pos + size > len(data):
                raise ValueError("SqlQueryResponse: truncated field")
            out.append((number, data[pos : pos + size]))
            pos += size
        elif wire_type in (_I64, _I32):
            pos += 8 if wire_type == _I64 else 4
        else:
            raise ValueError(f"SqlQueryResponse: unsupported wire type {wire_type}")
    return out


def decode(data: bytes) -> SqlResponse:
    """The response in ``data`` (as :meth:`SqlQueryResponse.FromString` reads it), its Arrow
    batches left in place."""
    out = SqlResponse()
    for number, value in _fields(memoryview(data)):
        if number == _HEADER and isinstance(value, memoryview):
            out.header.MergeFromString(bytes(value))
        elif number == _AFFECTED_ROWS and isinstance(value, int):
            out.affected_rows, out.batches = value, None
        elif number == _ARROW and isinstance(value, memoryview):
            out.affected_rows = None
            out.batches = out.batches if out.batches is not None else []
            for inner, v in _fields(value):
                if inner == _RECORD_BATCHES and isinstance(v, memoryview):
                    out.batches.append(v)
                elif inner == _COMPRESSION and isinstance(v, int):
                    out.compressed = v == storage_pb2.ArrowPayload.ZSTD
    return out
