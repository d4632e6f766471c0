"""A bare PostgreSQL protocol client: frames built and read by hand, to send what drivers
never would (row limits, out-of-order messages, hostile bytes)."""

from __future__ import annotations

import socket
import struct


def frame(kind: bytes, body: bytes = b"") -> bytes:
    return kind + struct.pack(">i", len(body) + 4) + body


def cstr(text: str) -> bytes:
    return text.encode() + b"\x00"


def startup(user: str = "gnomon") -> bytes:
    body = struct.pack(">i", 196608) + cstr("user") + cstr(user) + cstr("database")
    body += cstr("gnomon") + b"\x00"
    return struct.pack(">i", len(body) + 4) + body


def parse(sql: str, name: str = "") -> bytes:
    return frame(b"P", cstr(name) + cstr(sql) + struct.pack(">h", 0))


def bind(portal: str = "", statement: str = "", params: tuple[bytes, ...] = ()) -> bytes:
    body = cstr(portal) + cstr(statement) + struct.pack(">hh", 0, len(params))
    for p in params:
        body += struct.pack(">i", len(p)) + p
    return frame(b"B", body + struct.pack(">h", 0))


def execute(portal: str = "", most: int = 0) -> bytes:
    return frame(b"E", cstr(portal) + struct.pack(">i", most))


SYNC = frame(b"S")


class WireClient:
    """One connection, started up as ``user`` (with ``password`` when the server asks for
    one) and ready for queries."""

    def __init__(
        self, port: int, user: str = "gnomon", password: str = "", timeout_s: float = 30.0
    ) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout_s)
        self.buffer = b""
        self.sock.sendall(startup(user))
        kind, body = self.read()
        if kind == b"R" and body[:4] == struct.pack(">i", 3):
            self.sock.sendall(frame(b"p", cstr(password)))
        self.until_ready()

    def close(self) -> None:
        self.sock.close()

    def send(self, *frames: bytes) -> None:
        self.sock.sendall(b"".join(frames))

    def _recv(self, n: int) -> bytes:
        while len(self.buffer) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("the server closed the connection")
            self.buffer += chunk
        out, self.buffer = self.buffer[:n], self.buffer[n:]
        return out

    def rest(self) -> bytes:
        """Everything the server sends until it closes the connection."""
        out = self.buffer
        while chunk := self.sock.recv(65536):
            out += chunk
        return out

    def read(self) -> tuple[bytes, bytes]:
        head = self._recv(5)
        return head[:1], self._recv(struct.unpack(">i", head[1:])[0] - 4)

    def until_ready(self) -> list[tuple[bytes, bytes]]:
        """The messages up to and including ReadyForQuery."""
        got = []
        while True:
            kind, body = self.read()
            got.append((kind, body))
            if kind == b"Z":
                return got


def kinds(messages: list[tuple[bytes, bytes]]) -> bytes:
    return b"".join(k for k, _ in messages)


def error_code(messages: list[tuple[bytes, bytes]]) -> str | None:
    for kind, body in messages:
        if kind == b"E":
            for field in body.split(b"\x00"):
                if field[:1] == b"C":
                    return field[1:].decode()
    return None
