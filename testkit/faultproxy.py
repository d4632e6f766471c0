"""A fault-injecting HTTP proxy for tests: sits on 127.0.0.1 in front of one HTTP server and,
per request, passes it through, answers with an error, hangs, or drops the connection.

Each client connection carries one request (answers say ``Connection: close``), which keeps
the proxy simple and lets every fault act on exactly one request. Faults are rules matched in
the order they were added; a rule applies to ``count`` matching requests (``None``: until
:meth:`FaultProxy.clear`), then passes.

::

    with FaultProxy(upstream_port) as proxy:
        proxy.error(2)                          # the next 2 requests get 503 SlowDown
        proxy.hang(1, seconds=3, forward=True)  # upstream applies it, the answer never comes
        proxy.drop(None, method="PUT")          # every PUT: connection closed, nothing sent
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import TracebackType
from typing import BinaryIO

_MAX_LINE = 65536
_MAX_HEADERS = 200
# The longest a hang may last: hangs outliving a test would keep its threads busy.
_MAX_HANG_S = 30.0
_HOP_BY_HOP = frozenset({"connection", "keep-alive", "transfer-encoding", "content-length"})


@dataclass
class Request:
    method: str
    target: str
    headers: list[tuple[str, str]]
    body: bytes

    def header(self, name: str) -> str | None:
        for key, value in self.headers:
            if key.lower() == name.lower():
                return value
        return None


@dataclass
class _Rule:
    kind: str  # "error" | "hang" | "drop"
    count: int | None
    method: str | None = None
    path_contains: str | None = None
    status: int = 503
    code: str = "SlowDown"
    seconds: float = 0.0
    forward: bool = False
    partial: bool = False
    applied: int = field(default=0)

    def matches(self, request: Request) -> bool:
        if self.count is not None and self.applied >= self.count:
            return False
        if self.method is not None and request.method != self.method:
            return False
        return self.path_contains is None or self.path_contains in request.target


class FaultProxy:
    """Proxy on 127.0.0.1 (``port``, ``url``) forwarding to 127.0.0.1:``upstream_port``."""

    def __init__(
        self,
        upstream_port: int,
        *,
        max_connections: int = 64,
        io_timeout_s: float = 30.0,
    ) -> None:
        self._upstream_port = upstream_port
        self._io_timeout_s = io_timeout_s
        self._slots = threading.BoundedSemaphore(max_connections)
        self._lock = threading.Lock()
        self._rules: list[_Rule] = []
        self._seen: list[tuple[str, str, str]] = []  # (method, target, what was done)
        self._stop = threading.Event()
        self._connections: set[socket.socket] = set()
        self._threads: set[threading.Thread] = set()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.2)
        self.port: int = self._listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._acceptor = threading.Thread(target=self._accept, name="faultproxy-accept")
        self._acceptor.daemon = True
        self._acceptor.start()

    # -- fault control ---------------------------------------------------------------------------

    def error(
        self,
        count: int | None,
        *,
        status: int = 503,
        code: str = "SlowDown",
        method: str | None = None,
        path_contains: str | None = None,
    ) -> None:
        """Answer matching requests with ``status`` and an S3 error document naming ``code``,
        without forwarding them."""
        self._add(_Rule("error", count, method, path_contains, status=status, code=code))

    def hang(
        self,
        count: int | None,
        *,
        seconds: float,
        forward: bool = False,
        method: str | None = None,
        path_contains: str | None = None,
    ) -> None:
        """Hold matching requests for ``seconds`` and then close the connection without an
        answer. With ``forward`` the upstream server gets (and applies) the request first."""
        seconds = min(seconds, _MAX_HANG_S)
        self._add(_Rule("hang", count, method, path_contains, seconds=seconds, forward=forward))

    def drop(
        self,
        count: int | None,
        *,
        forward: bool = False,
        partial: bool = False,
        method: str | None = None,
        path_contains: str | None = None,
    ) -> None:
        """Close the connection of matching requests. With ``forward`` the upstream server
        applies the request first; with ``partial`` (which implies ``forward``) the client gets
        the answer's headers and half of its body before the connection closes."""
        self._add(
            _Rule(
                "drop",
                count,
                method,
                path_contains,
                forward=forward or partial,
                partial=partial,
            )
        )

    def clear(self) -> None:
        """Pass every request from now on."""
        with self._lock:
            self._rules.clear()

    def seen(self, method: str | None = None) -> list[tuple[str, str, str]]:
        """(method, target, action) of the requests handled so far, ``action`` being "pass" or
        the fault applied."""
        with self._lock:
            return [s for s in self._seen if method is None or s[0] == method]

    def reset_seen(self) -> None:
        with self._lock:
            self._seen.clear()

    def _add(self, rule: _Rule) -> None:
        with self._lock:
            self._rules.append(rule)

    def _decide(self, request: Request) -> _Rule | None:
        with self._lock:
            for rule in self._rules:
                if rule.matches(request):
                    rule.applied += 1
                    self._seen.append((request.method, request.target, rule.kind))
                    return rule
            self._seen.append((request.method, request.target, "pass"))
            return None

    # -- lifecycle -------------------------------------------------------------------------------

    def close(self) -> None:
        self._stop.set()
        self._acceptor.join(timeout=5)
        self._listener.close()
        with self._lock:
            connections = list(self._connections)
            threads = list(self._threads)
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        for thread in threads:
            thread.join(timeout=5)

    def __enter__(self) -> FaultProxy:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- serving ---------------------------------------------------------------------------------

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            if not self._slots.acquire(blocking=False):
                conn.close()  # over the bound: the client sees a dropped connection
                continue
            thread = threading.Thread(target=self._serve, args=(conn,), name="faultproxy-conn")
            thread.daemon = True
            with self._lock:
                self._connections.add(conn)
                self._threads.add(thread)
            thread.start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            conn.settimeout(self._io_timeout_s)
            with conn, conn.makefile("rb") as reader:
                request = _read_request(conn, reader)
                if request is not None:
                    self._handle(conn, request)
        except OSError:
            pass  # the client went away or the proxy is closing
        finally:
            with self._lock:
                self._connections.discard(conn)
                self._threads.discard(threading.current_thread())
            self._slots.release()

    def _handle(self, conn: socket.socket, request: Request) -> None:
        rule = self._decide(request)
        if rule is None:
            conn.sendall(self._forward(request))
            return
        if rule.kind == "error":
            conn.sendall(_error_response(request, rule.status, rule.code))
            return
        answer = self._forward(request) if rule.forward else b""
        if rule.kind == "hang":
            self._stop.wait(rule.seconds)
        elif rule.partial:
            head, _, body = answer.partition(b"\r\n\r\n")
            conn.sendall(head + b"\r\n\r\n" + body[: len(body) // 2])
        # Closing without (the rest of) an answer is the fault; the with-block closes.

    def _forward(self, request: Request) -> bytes:
        upstream = http.client.HTTPConnection(
            "127.0.0.1", self._upstream_port, timeout=self._io_timeout_s
        )
        try:
            upstream.putrequest(
                request.method, request.target, skip_host=True, skip_accept_encoding=True
            )
            for name, value in request.headers:
                if name.lower() not in ("expect", "connection"):
                    upstream.putheader(name, value)
            upstream.putheader("Connection", "close")
            upstream.endheaders(request.body or None)
            response = upstream.getresponse()
            body = response.read()
            lines = [f"HTTP/1.1 {response.status} {response.reason}"]
            for name, value in response.getheaders():
                if name.lower() not in _HOP_BY_HOP:
                    lines.append(f"{name}: {value}")
            if request.method == "HEAD":
                length = response.getheader("Content-Length")
                if length is not None:
                    lines.append(f"Content-Length: {length}")
            elif response.status not in (204, 304):
                lines.append(f"Content-Length: {len(body)}")
            lines.append("Connection: close")
            return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body
        finally:
            upstream.close()


def _read_request(conn: socket.socket, reader: BinaryIO) -> Request | None:
    line = reader.readline(_MAX_LINE)
    if not line:
        return None
    method, target, _version = line.decode("latin-1").split(" ", 2)
    headers: list[tuple[str, str]] = []
    for _ in range(_MAX_HEADERS):
        raw = reader.readline(_MAX_LINE)
        if raw in (b"\r\n", b"\n", b""):
            break
        name, _, value = raw.decode("latin-1").partition(":")
        headers.append((name.strip(), value.strip()))
    request = Request(method, target, headers, b"")
    if (request.header("Expect") or "").lower() == "100-continue":
        conn.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
    if (request.header("Transfer-Encoding") or "").lower() == "chunked":
        request.body = b"".join(_raw_chunks(reader))
    else:
        length = int(request.header("Content-Length") or 0)
        request.body = reader.read(length)
        if len(request.body) != length:
            return None
    return request


def _raw_chunks(reader: BinaryIO) -> Iterator[bytes]:
    """A chunked body as sent (framing included), to forward it unchanged."""
    while True:
        size_line = reader.readline(_MAX_LINE)
        yield size_line
        size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
        if size == 0:
            while True:
                trailer = reader.readline(_MAX_LINE)
                yield trailer
                if trailer in (b"\r\n", b"\n", b""):
                    return
        yield reader.read(size + 2)  # the chunk and its CRLF


def _error_response(request: Request, status: int, code: str) -> bytes:
    body = (
        b""
        if request.method == "HEAD"
        else (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            f"<Error><Code>{code}</Code><Message>injected by the fault proxy</Message>"
            "<RequestId>faultproxy</RequestId></Error>"
        ).encode()
    )
    reason = http.client.responses.get(status, "Error")
    head = (
        f"HTTP/1.1 {status} {reason}\r\n"
        "Content-Type: application/xml\r\n"
        f"Content-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    )
    return head.encode("latin-1") + body
