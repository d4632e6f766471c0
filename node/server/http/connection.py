"""One HTTP/1.1 client connection on the event loop: httptools parses what it sends, requests
are answered in order, one at a time."""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import logging
import socket
import threading
import time
from collections import deque
from collections.abc import Mapping
from typing import Any, cast

import httptools

from gnomon.error_codes import http_status, message_of
from gnomon.errors import Cancelled, TooLarge, Unavailable
from node.security.connections import ConnectionRate
from node.security.context import acting_as
from node.server import console
from node.server.auth import CHALLENGE, OPEN_PATHS
from node.server.http.answers import (
    NO_CONTENT,
    ONE_WRITE_BYTES,
    Response,
    error,
    head,
    http_date,
    no_content_head,
)
from node.server.http.app import HttpApp
from node.server.http.bodies import too_large
from node.server.http.headers import MAX_HEAD_BYTES, MAX_HEADER_LINE, MAX_HEADERS, RequestHeaders
from node.server.http.routes import WITH_BODY, SmallWrite, Work, endpoint, route, target
from node.server.http.writes import Writes

log = logging.getLogger("gnomon.http")

#: Idle keep-alive connections are closed after this many seconds.
IDLE_TIMEOUT_S = 60.0
#: After refusing a body as too large, at most this much of it is read and dropped (for at
#: most LINGER_S seconds) before the connection closes: a client still sending would otherwise
#: get a reset instead of the 413 answer.
LINGER_BYTES = 1024**3
LINGER_S = 10.0
#: Requests parsed ahead on one connection while an earlier one is served; past this the
#: connection is not read until they are answered.
MAX_PIPELINED = 16


class _Refused(Exception):
    """A request refused while it is parsed, with its status and message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _protocol_error(e: httptools.HttpParserError) -> _Refused:
    """What a request the parser rejects is answered."""
    if isinstance(e.__context__, _Refused):
        return e.__context__
    if isinstance(e, httptools.HttpParserInvalidMethodError):
        return _Refused(501, f"Unsupported method ({e})")
    return _Refused(400, f"Malformed header or request line ({e})")


class _Request:
    """One request as parsed, until it is answered."""

    __slots__ = (
        "answer",
        "body",
        "close",
        "fields",
        "headers",
        "keep_alive",
        "method",
        "path",
        "query",
        "size",
        "start",
        "storing",
    )

    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.method = ""
        self.path = ""
        self.query = ""
        self.headers: list[list[str]] = []
        #: ``headers`` by name, once a body endpoint looked them up.
        self.fields: RequestHeaders | None = None
        self.body: list[bytes] = []
        self.size = 0
        self.storing = False
        self.keep_alive = True
        #: Whether the connection closes after the answer.
        self.close = False
        #: Set when the answer is known before the request is complete (a refusal).
        self.answer: Response | None = None


class Shared:
    """What the connections share: the app, the thread pool, the rate new connections are
    admitted at (None: any) and the open connections (their sockets, read from other threads
    under ``connections_lock``)."""

    def __init__(
        self,
        app: HttpApp,
        pool: concurrent.futures.ThreadPoolExecutor,
        loop: asyncio.AbstractEventLoop,
        connection_rate: ConnectionRate | None = None,
    ) -> None:
        self.app = app
        self.pool = pool
        self.connection_rate = connection_rate
        self.writes = Writes(app, pool, loop)
        self.connections: dict[Any, Connection] = {}
        self.connections_lock = threading.Lock()

    def close_idle(self) -> None:
        """Close the connections not serving a request (on the loop's thread, at stop)."""
        for conn in self._open():
            conn.close_if_idle()

    def close_all(self) -> None:
        """Close every connection (on the loop's thread, at the end of stop)."""
        for conn in self._open():
            if conn.transport is not None:
                conn.transport.abort()

    def _open(self) -> list[Connection]:
        with self.connections_lock:
            return list(self.connections.values())


class Connection(asyncio.Protocol):
    """One client connection: httptools parses what it sends; requests are answered in
    order, one at a time."""

    def __init__(self, server: Shared) -> None:
        self.server = server
        self.app = server.app
        self.parser = httptools.HttpRequestParser(self)
        # Folded header lines (obsolete, still sent by old clients) continue their header.
        self.parser.set_dangerous_leniencies(lenient_headers=True)
        self.transport: asyncio.Transport | None = None
        self.socket: Any = None
        self.loop = asyncio.get_running_loop()
        self.request: _Request | None = None
        self.ready: deque[_Request] = deque()
        self.serving: _Request | None = None
        self.head_bytes = 0
        self.in_head = True
        self.peer_done = False
        self.paused = False
        self.broken = False
        self.lingered = 0
        #: When the connection last became idle (nothing sent, nothing to answer), None while
        #: it is not. One timer per connection checks it, instead of a timer per request.
        self.idle_since: float | None = None
        self.idle_timer: asyncio.TimerHandle | None = None

    # -- the connection --------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, but have its methods.
        transport = cast(asyncio.Transport, transport)
        self.transport = transport
        rate = self.server.connection_rate
        if rate is not None:
            address = str(transport.get_extra_info("peername", ("",))[0])
            if not rate.admit(address):
                self._refuse_new(transport, address, rate)
                return
        self.socket = transport.get_extra_info("socket")
        # A large answer goes out as headers then body: with Nagle's algorithm the body would
        # wait for the client's delayed ACK of the headers (40 ms per request).
        self.socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self.server.connections_lock:
            self.server.connections[self.socket] = self
        self.idle_since = self.loop.time()
        self._check_idle()

    def _refuse_new(self, transport: asyncio.Transport, address: str, rate: ConnectionRate) -> None:
        """Answer a connection over its address's rate 429 and close it, unread."""
        self.broken = True
        self.app.metrics.connections_refused.inc("http", "rate")
        log.info("connection refused", extra={"address": address, "limit": "rate"})
        resp = error(429, rate.refusal(address))
        resp.headers["Retry-After"] = "1"
        transport.write(head(resp, http_date(), True) + resp.body)
        transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.peer_done = True
        if self.idle_timer is not None:
            self.idle_timer.cancel()
        with self.server.connections_lock:
            self.server.connections.pop(self.socket, None)

    def eof_received(self) -> bool | None:
        """The client is done sending: it may still wait for its answers (a half-close), so
        the connection stays open until they are written."""
        self.peer_done = True
        if self.serving is None and not self.ready:
            return None
        return True

    def gone(self) -> bool:
        """Whether the client closed its connection (asked from a query's thread)."""
        return self.peer_done

    def data_received(self, data: bytes) -> None:
        if self.broken:
            self._linger(len(data))
            return
        self.idle_since = None
        if self.in_head:
            self.head_bytes += len(data)
        try:
            if self.head_bytes > MAX_HEAD_BYTES:
                raise _Refused(431, f"Request head larger than {MAX_HEAD_BYTES} bytes")
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            pass  # no protocol is upgraded to: the request was answered as HTTP/1.1
        except httptools.HttpParserError as e:
            self._refuse_connection(_protocol_error(e))
        except _Refused as e:
            self._refuse_connection(e)
        if len(self.ready) >= MAX_PIPELINED and self.transport is not None:
            self.paused = True
            self.transport.pause_reading()
        self._serve_next()

    def close_if_idle(self) -> None:
        if self.serving is None and not self.ready and self.transport is not None:
            self.transport.close()

    def _check_idle(self) -> None:
        """Close the connection once it has been idle for IDLE_TIMEOUT_S, else look again
        when it could be."""
        since = self.idle_since
        wait = IDLE_TIMEOUT_S if since is None else since + IDLE_TIMEOUT_S - self.loop.time()
        if wait <= 0 and self.transport is not None:
            self.transport.close()
        else:
            self.idle_timer = self.loop.call_later(max(wait, 0.0), self._check_idle)

    # -- parser callbacks ------------------------------------------------------------------------

    def on_message_begin(self) -> None:
        self.request = _Request()
        self.in_head = True

    def on_url(self, url: bytes) -> None:
        assert self.request is not None
        self.request.path += url.decode("iso-8859-1")

    def on_header(self, name: bytes, value: bytes) -> None:
        request = self.request
        assert request is not None
        if len(name) + len(value) + 2 > MAX_HEADER_LINE:
            raise _Refused(431, "Header line too long")
        if len(request.headers) >= MAX_HEADERS:
            raise _Refused(431, f"More than {MAX_HEADERS} headers")
        request.headers.append([name.decode("iso-8859-1"), value.decode("iso-8859-1")])

    def on_headers_complete(self) -> None:
        request = self.request
        assert request is not None
        self.in_head = False
        self.head_bytes = 0
        parser = self.parser
        request.method = parser.get_method().decode("ascii")
        version = parser.get_http_version()
        if version == "0.9":
            raise _Refused(400, f"Bad request syntax ({request.method} {request.path!r})")
        if version not in ("1.0", "1.1"):
            raise _Refused(505, f"Unsupported HTTP version ('HTTP/{version}')")
        request.keep_alive = parser.should_keep_alive()
        request.path, request.query = target(request.path.encode("iso-8859-1"))
        if request.path in WITH_BODY and request.method == "POST":
            self._admit_body(request)

    def _admit_body(self, request: _Request) -> None:
        """Refuse an announced oversize body at once (before a client expecting 100-continue
        sends it); invite the others to send theirs."""
        headers = request.fields = RequestHeaders(request.headers)
        limit = self.app.max_body_bytes
        length = headers.get("Content-Length", "")
        if length.isdigit() and int(length) > limit:
            self._refuse_body(request, too_large(limit, int(length)))
            return
        request.storing = True
        expect = headers.get("Expect", "").lower()
        if expect == "100-continue" and self.transport is not None:
            self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    def on_body(self, body: bytes) -> None:
        request = self.request
        assert request is not None
        if not request.storing:
            return
        request.size += len(body)
        if request.size > self.app.max_body_bytes:
            request.body.clear()
            self._refuse_body(request, too_large(self.app.max_body_bytes))
            return
        request.body.append(body)

    def on_message_complete(self) -> None:
        request, self.request = self.request, None
        self.in_head = True
        if request is not None and request.answer is None:
            self.ready.append(request)

    # -- refusals --------------------------------------------------------------------------------

    def _refuse_body(self, request: _Request, refusal: TooLarge) -> None:
        """Answer 413 as soon as it is due; what the client still sends is read and dropped
        (see LINGER_BYTES) so that it gets the answer rather than a reset."""
        request.storing = False
        request.answer = self._failure(refusal, request.path)
        request.close = True
        self.ready.append(request)

    def _refuse_connection(self, refused: _Refused) -> None:
        """Answer a request the parser cannot take, then close: where the next request
        would start is unknown."""
        request = self.request or _Request()
        self.request = None
        request.answer = error(refused.status, refused.message)
        request.close = True
        self.broken = True
        if not request.method:
            request.method = "GET"
        self.ready.append(request)

    def _linger(self, size: int) -> None:
        self.lingered += size
        if self.lingered > LINGER_BYTES and self.transport is not None:
            self.transport.close()

    # -- answering -------------------------------------------------------------------------------

    def _serve_next(self) -> None:
        while self.serving is None and self.ready:
            request = self.ready.popleft()
            if self.paused and self.transport is not None:
                self.paused = False
                self.transport.resume_reading()
            self.serving = request
            self.app.begin()
            if request.answer is not None:
                self._answer(request, request.answer)
                continue
            try:
                outcome = self._dispatch(request)
            except Exception as e:
                self._answer(request, self._failure(e, request.path))
                continue
            if isinstance(outcome, Response):
                self._answer(request, outcome)
            elif outcome is None:
                return  # a small write, answered through _written
            else:
                future = self.loop.run_in_executor(self.server.pool, outcome)
                future.add_done_callback(functools.partial(self._ran, request))

    def _ran(self, request: _Request, future: asyncio.Future[Response]) -> None:
        try:
            response = future.result()
        except BaseException as e:
            response = self._failure(e, request.path)
        self._answer(request, response)
        self._serve_next()

    def _written(self, request: _Request, outcome: Response | Exception) -> None:
        if isinstance(outcome, Exception):
            outcome = self._failure(outcome, request.path)
        self._answer(request, outcome)
        self._serve_next()

    def _dispatch(self, request: _Request) -> Response | Work | None:
        """The answer, the blocking work that makes it (run on the pool), or None: a small
        write, queued to be answered with its batch. A request to authenticate is all work
        for the pool (small writes are not batched then)."""
        authenticator = self.app.authenticator
        headers = request.fields or RequestHeaders(request.headers)
        body = b"".join(request.body)
        # The console's files hold no data: its page asks for credentials itself.
        if authenticator is None or request.path in OPEN_PATHS or console.is_console(request.path):
            small_write = functools.partial(self._small_write, request)
            return self._route(request, headers, body, small_write)
        authorization = headers.get("Authorization")

        def run() -> Response:
            with acting_as(authenticator.authenticate(authorization)):
                outcome = self._route(request, headers, body, None)
                return outcome() if callable(outcome) else outcome  # type: ignore[return-value]

        return run

    def _route(
        self,
        request: _Request,
        headers: RequestHeaders,
        body: bytes,
        small_write: SmallWrite | None,
    ) -> Response | Work | None:
        return route(
            self.app,
            request.method,
            request.path,
            request.query,
            headers,
            body,
            gone=self.gone,
            small_write=small_write,
        )

    def _small_write(self, request: _Request, body: bytes, params: Mapping[str, list[str]]) -> None:
        self.server.writes.add(body, params, functools.partial(self._written, request))

    def _failure(self, e: BaseException, path: str) -> Response:
        status = http_status(e)
        fields = {"endpoint": endpoint(path), "status": status, "error": message_of(e)}
        if status >= 500 and not isinstance(e, Unavailable | Cancelled):
            log.error("request failed", extra=fields, exc_info=e)
        else:
            log.info("request rejected", extra=fields)
        resp = error(status, message_of(e))
        if status == 401:
            resp.headers["WWW-Authenticate"] = CHALLENGE
        return resp

    def _answer(self, request: _Request, resp: Response) -> None:
        """Write the answer to the request being served; close the connection after it if
        the request or the server says so, or if the client is done sending."""
        app = self.app
        close = request.close or not request.keep_alive or app.stopping
        self._write(resp, bodiless=request.method == "HEAD", close=close)
        self.serving = None
        app.metrics.observe_request(
            "http", endpoint(request.path), resp.status, time.perf_counter() - request.start
        )
        app.end()
        transport = self.transport
        if transport is None:
            return
        if close:
            self.ready.clear()
            if request.answer is not None and request.answer.status == 413:
                self._linger_then_close(transport)
            else:
                transport.close()
        elif self.peer_done and not self.ready:
            transport.close()
        elif not self.ready:
            self.idle_since = self.loop.time()

    def _linger_then_close(self, transport: asyncio.Transport) -> None:
        self.broken = True
        transport.write_eof()
        self.loop.call_later(LINGER_S, transport.close)

    def _write(self, resp: Response, *, bodiless: bool, close: bool) -> None:
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        if resp is NO_CONTENT:
            transport.write(no_content_head(http_date(), close))
            return
        header = head(resp, http_date(), close)
        body = resp.body if not bodiless and resp.status != 204 else b""
        if len(body) <= ONE_WRITE_BYTES:
            transport.write(header + body)
        else:
            transport.write(header)
            transport.write(body)
