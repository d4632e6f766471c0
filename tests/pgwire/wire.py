"""A bare PostgreSQL protocol client: frames built and read by hand, to send what drivers
never would (row limits, out-of-order messages, hostile bytes)."""

from __future__ import annotations

import base64
import secrets
import socket
import struct

from node.security import scram


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
#: The authentication request codes a client answers.
AUTH_CLEARTEXT = 3
AUTH_SASL = 10


def sasl_initial(first: str, mechanism: str = scram.MECHANISM) -> bytes:
    data = first.encode()
    return frame(b"p", cstr(mechanism) + struct.pack(">i", len(data)) + data)


def client_first_bare() -> str:
    return f"n=,r={secrets.token_urlsafe(18)}"


def client_final(password: str, bare: str, server_first: bytes, gs2: str = "n,,") -> str:
    """The client-final-message proving ``password`` to the server that answered
    ``server_first`` to ``bare``."""
    fields = dict(part.split("=", 1) for part in server_first.decode().split(","))
    without_proof = f"c={base64.b64encode(gs2.encode()).decode()},r={fields['r']}"
    proof = scram.client_proof(
        password,
        base64.b64decode(fields["s"]),
        int(fields["i"]),
        f"{bare},{server_first.decode()},{without_proof}".encode(),
    )
    return f"{without_proof},p={base64.b64encode(proof).decode()}"


def auth_code(body: bytes) -> int:
    return int(struct.unpack(">i", body[:4])[0])


class WireClient:
    """One connection, started up as ``user`` (with ``password`` when the server asks for
    one) and ready for queries; with ``login`` False, only its StartupMessage sent."""

    def __init__(
        self,
        port: int,
        user: str = "gnomon",
        password: str = "",
        timeout_s: float = 30.0,
        *,
        login: bool = True,
    ) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout_s)
        self.buffer = b""
        self.sock.sendall(startup(user))
        if not login:
            return
        kind, body = self.read()
        if kind == b"R" and auth_code(body) == AUTH_CLEARTEXT:
            self.sock.sendall(frame(b"p", cstr(password)))
        elif kind == b"R" and auth_code(body) == AUTH_SASL:
            self.scram(password)
        self.until_ready()

    def scram(self, password: str, gs2: str = "n,,") -> None:
        """Answer the server's AuthenticationSASL with a SCRAM-SHA-256 exchange."""
        bare = client_first_bare()
        self.send(sasl_initial(gs2 + bare))
        kind, body = self.read()
        if kind == b"R":
            self.send(frame(b"p", client_final(password, bare, body[4:], gs2).encode()))

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


def split(data: bytes) -> list[tuple[bytes, bytes]]:
    """The messages of ``data``, the server's bytes read in one piece."""
    out = []
    while len(data) >= 5:
        end = 1 + struct.unpack(">i", data[1:5])[0]
        out.append((data[:1], data[5:end]))
        data = data[end:]
    return out


def kinds(messages: list[tuple[bytes, bytes]]) -> bytes:
    return b"".join(k for k, _ in messages)


def error_code(messages: list[tuple[bytes, bytes]]) -> str | None:
    for kind, body in messages:
        if kind == b"E":
            for field in body.split(b"\x00"):
                if field[:1] == b"C":
                    return field[1:].decode()
    return None
