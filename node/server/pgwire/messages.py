"""The frames of PostgreSQL's protocol 3.0: reading a client's messages, building the
server's."""

from __future__ import annotations

import struct
from collections.abc import Sequence

from gnomon.errors import InvalidArgument
from node.server.pgwire.sqlstate import PROTOCOL_VIOLATION

PROTOCOL_3 = 196608
SSL_REQUEST = 80877103
GSSENC_REQUEST = 80877104
CANCEL_REQUEST = 80877102
#: Longest message accepted from a client: a statement is bounded by max_statement_bytes
#: later, this bounds what is buffered before anything is checked.
MAX_MESSAGE_BYTES = 64 * 1024**2
MAX_STARTUP_BYTES = 10_000


class ProtocolViolation(InvalidArgument):
    """The client broke the protocol (SQLSTATE 08P01): during startup the connection is
    closed after saying so; after it, the message is refused and the rest skipped to Sync."""

    pg_code = PROTOCOL_VIOLATION


class Reader:
    """The fields of one message body, read in order; InvalidArgument (a protocol
    violation) when the body is shorter than its fields."""

    def __init__(self, body: bytes) -> None:
        self.body = body
        self.pos = 0

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.body):
            raise ProtocolViolation("malformed message: shorter than its fields")
        chunk = self.body[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def int16(self) -> int:
        return int(struct.unpack(">h", self._take(2))[0])

    def int32(self) -> int:
        return int(struct.unpack(">i", self._take(4))[0])

    def byte(self) -> bytes:
        return self._take(1)

    def cstr(self) -> str:
        end = self.body.find(b"\x00", self.pos)
        if end < 0:
            raise ProtocolViolation("malformed message: unterminated string")
        text = self.body[self.pos : end].decode("utf-8", "replace")
        self.pos = end + 1
        return text

    def rest(self) -> bytes:
        chunk = self.body[self.pos :]
        self.pos = len(self.body)
        return chunk

    def value(self) -> bytes | None:
        n = self.int32()
        return None if n == -1 else self._take(n)


def message(kind: bytes, body: bytes = b"") -> bytes:
    return kind + struct.pack(">i", len(body) + 4) + body


def cstr(text: str) -> bytes:
    return text.encode() + b"\x00"


def authentication(code: int, data: bytes = b"") -> bytes:
    return message(b"R", struct.pack(">i", code) + data)


def parameter_status(name: str, value: str) -> bytes:
    return message(b"S", cstr(name) + cstr(value))


def backend_key(pid: int, secret: int) -> bytes:
    return message(b"K", struct.pack(">ii", pid, secret))


def ready(status: bytes = b"I") -> bytes:
    return message(b"Z", status)


def command_complete(tag: str) -> bytes:
    return message(b"C", cstr(tag))


def row_description(fields: Sequence[tuple[str, int, int, int]]) -> bytes:
    """``fields``: (name, type OID, type size, format) per column."""
    body = struct.pack(">h", len(fields))
    for name, oid, size, fmt in fields:
        body += cstr(name) + struct.pack(">ihihih", 0, 0, oid, size, -1, fmt)
    return message(b"T", body)


def data_row(values: Sequence[bytes | None]) -> bytes:
    parts = [struct.pack(">h", len(values))]
    for v in values:
        parts.append(b"\xff\xff\xff\xff" if v is None else struct.pack(">i", len(v)) + v)
    return message(b"D", b"".join(parts))


def parameter_description(oids: Sequence[int]) -> bytes:
    return message(b"t", struct.pack(f">h{len(oids)}i", len(oids), *oids))


def error(code: str, text: str, position: int | None = None, severity: str = "ERROR") -> bytes:
    body = b"S" + cstr(severity) + b"V" + cstr(severity) + b"C" + cstr(code) + b"M" + cstr(text)
    if position is not None:
        body += b"P" + cstr(str(position))
    return message(b"E", body + b"\x00")


PARSE_COMPLETE = message(b"1")
BIND_COMPLETE = message(b"2")
CLOSE_COMPLETE = message(b"3")
NO_DATA = message(b"n")
PORTAL_SUSPENDED = message(b"s")
EMPTY_QUERY = message(b"I")
