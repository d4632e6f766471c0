"""gnomon's HTTP server: ``POST /sql`` (HoraeDB-compatible JSON), ``POST /influxdb/v1/write``
(InfluxDB line protocol), ``GET /health``, ``GET /metrics`` (Prometheus text) and
``GET /openapi.json``.

Built on the standard library's threading HTTP server: one thread per connection, HTTP/1.1
keep-alive. Errors are JSON ``{"code": <HTTP status>, "message": ...}``.
"""

from __future__ import annotations

import contextlib
import email.utils
import functools
import json
import logging
import select
import socket
import threading
import time
import zlib
from collections.abc import Callable, Iterator, Mapping
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import MappingProxyType
from typing import Any, overload
from urllib.parse import parse_qs, urlsplit

from gnomon.errors import Cancelled, InvalidArgument, TooLarge, Unavailable
from node.ingest import line_protocol
from node.ingest.writer import Ingestor
from node.server.arrow_wire import ipc_stream, json_rows, to_wire
from node.server.listen import listen_error
from node.server.metrics import Registry
from node.server.openapi import SPEC
from node.server.status import http_status, message_of
from node.sql.cancel import Queries
from node.sql.result import QueryResult

log = logging.getLogger("gnomon.http")

#: The one database gnomon has (HoraeDB's default schema).
DATABASE = "public"
#: The media type of an Arrow IPC stream (what ``/sql?format=arrow`` answers).
ARROW_STREAM = "application/vnd.apache.arrow.stream"
#: Idle keep-alive connections are closed after this many seconds.
IDLE_TIMEOUT_S = 60.0
#: After refusing a body as too large, at most this much of it is read and dropped (for at
#: most LINGER_S seconds) before the connection closes: a client still sending would otherwise
#: get a reset instead of the 413 answer.
LINGER_BYTES = 1024**3
LINGER_S = 10.0

_ROUTES: dict[str, tuple[str, ...]] = {
    "/sql": ("POST",),
    "/influxdb/v1/write": ("POST",),
    "/health": ("GET", "HEAD"),
    "/metrics": ("GET",),
    "/openapi.json": ("GET",),
}


class _Response:
    def __init__(
        self,
        status: int,
        body: bytes | memoryview = b"",
        content_type: str = "",
        headers: dict[str, str] | None = None,
    ) -> None:
        self.status = status
        self.body = body
        self.content_type = content_type
        self.headers = headers or {}


def _json(status: int, obj: Any) -> _Response:
    body = json.dumps(obj, separators=(",", ":"), ensure_ascii=False, default=str)
    return _Response(status, body.encode(), "application/json; charset=utf-8")


def _error(status: int, message: str) -> _Response:
    return _json(status, {"code": status, "message": message})


def _json_body(body: bytes) -> Any:
    try:
        return json.loads(body or b"null")
    except (ValueError, UnicodeDecodeError) as e:
        raise InvalidArgument(f"request body is not valid JSON: {e}") from None
    except RecursionError:
        # The parser recurses once per nesting level: ``[[[[...`` exhausts the stack.
        raise InvalidArgument("request body is not valid JSON: nested too deeply") from None


def _peer_closed(conn: socket.socket) -> bool:
    """Whether the client closed or reset its connection, without waiting or reading: only
    the end of the stream (or an error) makes the socket readable with nothing to peek."""
    try:
        poller = select.poll()
        poller.register(conn, select.POLLIN)
        if not poller.poll(0):
            return False
        return conn.recv(1, socket.MSG_PEEK) == b""
    except (OSError, ValueError):  # reset, or closed under us
        return True


def _wants_arrow(params: Mapping[str, list[str]], accept: str) -> bool:
    """Whether a /sql client asks for Arrow: ``?format=arrow`` (or ``json``), else an Accept
    header naming the Arrow stream type."""
    fmt = params.get("format", [""])[-1].lower()
    if fmt not in ("", "json", "arrow"):
        raise InvalidArgument(f"unknown format {fmt!r}: use json or arrow")
    return fmt == "arrow" or (not fmt and ARROW_STREAM in accept)


class HttpApp:
    """What the endpoints do, independent of the socket handling. Queries run under
    ``queries`` (their time limit, cancelled when stopping)."""

    def __init__(
        self,
        *,
        ingestor: Ingestor,
        execute: Callable[[str], QueryResult],
        metrics: Registry,
        max_body_bytes: int,
        healthy: Callable[[], bool],
        queries: Queries | None = None,
    ) -> None:
        self.ingestor = ingestor
        self.execute = execute
        self.metrics = metrics
        self.max_body_bytes = max_body_bytes
        self.healthy = healthy
        self.queries = queries or Queries()
        self.stopping = False
        self._inflight = 0
        self._cond = threading.Condition()

    @contextlib.contextmanager
    def request(self) -> Iterator[None]:
        with self._cond:
            self._inflight += 1
        try:
            yield
        finally:
            with self._cond:
                self._inflight -= 1
                self._cond.notify_all()

    def wait_idle(self, timeout_s: float) -> bool:
        """Wait until no request is being served; False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: self._inflight == 0, timeout_s)

    # -- endpoints -------------------------------------------------------------------------------

    def sql(
        self, body: bytes, *, arrow: bool = False, gone: Callable[[], bool] | None = None
    ) -> _Response:
        """Run the statement in ``body``; a query answers JSON rows, or with ``arrow`` one
        Arrow IPC stream (types as the gRPC API sends them). ``gone`` tells whether the
        client went away, which stops the query."""
        doc = _json_body(body)
        if not isinstance(doc, dict) or not isinstance(doc.get("query"), str):
            raise InvalidArgument('request body must be a JSON object {"query": "<sql>"}')
        query: str = doc["query"]
        if not query.strip():
            raise InvalidArgument("query is empty")
        with self.queries.running(probe=gone):
            result = self.execute(query)
        if result.is_query and arrow:
            return _Response(200, ipc_stream(to_wire(result.table())), ARROW_STREAM)
        if result.is_query:
            return _json(200, {"rows": json_rows(result.table())})
        return _json(200, {"affected_rows": result.affected_rows or 0})

    def influx_write(self, body: bytes, params: Mapping[str, list[str]]) -> _Response:
        db = params.get("db", [DATABASE])[-1]
        if db and db != DATABASE:
            raise InvalidArgument(
                f"database {db!r} does not exist: gnomon has one database, {DATABASE!r}"
            )
        precision = params.get("precision", ["ns"])[-1] or "ns"
        try:
            text = body.decode()
        except UnicodeDecodeError as e:
            raise InvalidArgument(f"line protocol body is not UTF-8: {e}") from None
        written = self.ingestor.write_all(line_protocol.parse(text, precision=precision))
        self.metrics.rows_written.inc("influxdb", amount=written)
        return _Response(204)

    def health(self) -> _Response:
        if self.stopping or not self.healthy():
            return _error(503, "gnomon is stopping" if self.stopping else "engine is closed")
        return _json(200, {"status": "ok"})

    def prometheus(self) -> _Response:
        return _Response(
            200, self.metrics.render().encode(), "text/plain; version=0.0.4; charset=utf-8"
        )

    def openapi(self) -> _Response:
        return _json(200, SPEC)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # Stopping waits for requests in flight (HttpApp.wait_idle), not for idle keep-alive
    # connections, which would hold a join for up to IDLE_TIMEOUT_S.
    block_on_close = False

    def __init__(self, address: tuple[str, int], app: HttpApp) -> None:
        self.app = app
        self.connections: set[socket.socket] = set()
        self.connections_lock = threading.Lock()
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, _Handler)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Small answers go out in one write, large ones as headers then body: with Nagle's
    # algorithm the body would wait for the client's delayed ACK of the headers (40 ms per
    # request on a keep-alive connection).
    disable_nagle_algorithm = True
    server_version = "gnomon"
    timeout = IDLE_TIMEOUT_S
    server: _Server
    raw_requestline: bytes
    headers: RequestHeaders  # type: ignore[assignment]

    def setup(self) -> None:
        super().setup()
        with self.server.connections_lock:
            self.server.connections.add(self.connection)

    def finish(self) -> None:
        with self.server.connections_lock:
            self.server.connections.discard(self.connection)
        with contextlib.suppress(OSError):
            super().finish()

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """Protocol-level failures (bad request line, unsupported method) answer in the same
        JSON shape as every other error."""
        self.close_connection = True
        text = message or HTTPStatus(code).phrase
        self._send(_error(code, f"{text}: {explain}" if explain else text), head=False)

    def log_message(self, format: str, *args: Any) -> None:
        if log.isEnabledFor(logging.DEBUG):
            log.debug(format % args, extra={"client": self.client_address[0]})

    def parse_request(self) -> bool:
        """The request line and headers, as the standard library parses them but for the
        headers, which it hands to the e-mail parser: that took a tenth of a point query's
        time. HTTP/0.9 requests (no version) are refused."""
        self.command = ""
        self.request_version = self.default_request_version
        self.close_connection = True
        self.requestline = str(self.raw_requestline, "iso-8859-1").rstrip("\r\n")
        words = self.requestline.split()
        if not words:
            return False
        if len(words) != 3:
            self.send_error(HTTPStatus.BAD_REQUEST, f"Bad request syntax ({self.requestline!r})")
            return False
        command, path, version = words
        if version not in ("HTTP/1.0", "HTTP/1.1"):
            self.send_error(
                HTTPStatus.HTTP_VERSION_NOT_SUPPORTED, f"Unsupported HTTP version ({version!r})"
            )
            return False
        self.command, self.path, self.request_version = command, path, version
        if path.startswith("//"):
            self.path = "/" + path.lstrip("/")
        headers = _read_headers(self.rfile)
        if isinstance(headers, tuple):
            self.send_error(*headers)
            return False
        self.headers = headers
        connection = headers.get("Connection", "").lower()
        self.close_connection = (
            connection == "close" if version == "HTTP/1.1" else connection != "keep-alive"
        )
        if headers.get("Expect", "").lower() == "100-continue" and version == "HTTP/1.1":
            return self.handle_expect_100()
        return True

    def do_GET(self) -> None:
        self._serve("GET")

    def do_HEAD(self) -> None:
        self._serve("HEAD")

    def do_POST(self) -> None:
        self._serve("POST")

    def do_PUT(self) -> None:
        self._serve("PUT")

    def do_DELETE(self) -> None:
        self._serve("DELETE")

    def _serve(self, method: str) -> None:
        app = self.server.app
        start = time.perf_counter()
        url = urlsplit(self.path)
        endpoint = url.path if url.path in _ROUTES else "other"
        with app.request():
            try:
                resp = self._dispatch(app, method, url.path, _parameters(url.query))
            except Exception as e:
                resp = self._failure(e, endpoint)
            if app.stopping:
                self.close_connection = True
            self._send(resp, head=method == "HEAD")
            if self._body_unread:
                self._linger()
        app.metrics.observe_request("http", endpoint, resp.status, time.perf_counter() - start)

    def _dispatch(
        self, app: HttpApp, method: str, path: str, params: Mapping[str, list[str]]
    ) -> _Response:
        allowed = _ROUTES.get(path)
        if allowed is None:
            self._discard_body()
            return _error(404, f"no endpoint {path!r}; see GET /openapi.json")
        if method not in allowed:
            self._discard_body()
            resp = _error(405, f"{path} accepts {', '.join(allowed)}, not {method}")
            resp.headers["Allow"] = ", ".join(allowed)
            return resp
        if path == "/sql":
            body = self._body(app.max_body_bytes)  # read first: an error must not leave it
            arrow = _wants_arrow(params, self.headers.get("Accept", ""))
            return app.sql(body, arrow=arrow, gone=functools.partial(_peer_closed, self.connection))
        if path == "/influxdb/v1/write":
            body = self._body(app.max_body_bytes)
            app.metrics.request_bytes.inc("influxdb", amount=len(body))
            return app.influx_write(body, params)
        if path == "/health":
            return app.health()
        if path == "/metrics":
            return app.prometheus()
        return app.openapi()

    def _failure(self, e: Exception, endpoint: str) -> _Response:
        status = http_status(e)
        if isinstance(e, TooLarge):
            # The unread rest of the body would be parsed as the next request.
            self.close_connection = True
            self._body_unread = True
        fields = {"endpoint": endpoint, "status": status, "error": message_of(e)}
        if status >= 500 and not isinstance(e, Unavailable | Cancelled):
            log.error("request failed", extra=fields, exc_info=e)
        else:
            log.info("request rejected", extra=fields)
        return _error(status, message_of(e))

    # -- bodies ----------------------------------------------------------------------------------

    _body_unread = False

    def handle_expect_100(self) -> bool:
        """Refuse an announced oversize body before the client sends it."""
        limit = self.server.app.max_body_bytes
        length = self.headers.get("Content-Length", "")
        if length.isdigit() and int(length) > limit:
            self.close_connection = True
            self._send(
                _error(413, f"request body of {length} bytes exceeds the limit of {limit} bytes"),
                head=False,
            )
            return False
        return super().handle_expect_100()

    def _linger(self) -> None:
        """Read and drop what the client still sends, bounded in bytes and time, after the
        answer went out; then the connection closes."""
        deadline = time.monotonic() + LINGER_S
        dropped = 0
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_WR)
            self.connection.settimeout(1.0)
            while dropped < LINGER_BYTES and time.monotonic() < deadline:
                chunk = self.rfile.read1(256 * 1024)
                if not chunk:
                    break
                dropped += len(chunk)

    def _discard_body(self) -> None:
        length = self.headers.get("Content-Length")
        if length is not None and length.isdigit() and int(length) <= 1024**2:
            self.rfile.read(int(length))
        elif length is not None or self.headers.get("Transfer-Encoding"):
            self.close_connection = True

    def _body(self, limit: int) -> bytes:
        """The request body (de-chunked and gunzipped), at most ``limit`` bytes; TooLarge
        (413) past that."""
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            raw = self._read_chunked(limit)
        else:
            length_text = self.headers.get("Content-Length", "0")
            try:
                length = int(length_text)
            except ValueError:
                self.close_connection = True
                raise InvalidArgument(f"invalid Content-Length {length_text!r}") from None
            if length > limit:
                raise TooLarge(
                    f"request body of {length} bytes exceeds the limit of {limit} bytes; "
                    "split it into smaller requests"
                )
            raw = self.rfile.read(length) if length > 0 else b""
        encoding = self.headers.get("Content-Encoding", "identity").lower()
        if encoding == "gzip":
            return _gunzip(raw, limit)
        if encoding not in ("identity", ""):
            raise InvalidArgument(f"unsupported Content-Encoding {encoding!r}: use gzip")
        return raw

    def _read_chunked(self, limit: int) -> bytes:
        parts: list[bytes] = []
        total = 0
        while True:
            line = self.rfile.readline(1024)
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                self.close_connection = True
                raise InvalidArgument("malformed chunked request body") from None
            if size == 0:
                while self.rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                    pass
                return b"".join(parts)
            total += size
            if total > limit:
                raise TooLarge(
                    f"request body exceeds the limit of {limit} bytes; split it into smaller "
                    "requests"
                )
            parts.append(self.rfile.read(size))
            self.rfile.readline(1024)

    def _send(self, resp: _Response, *, head: bool) -> None:
        self.log_request(resp.status)
        lines = [
            f"{self.protocol_version} {resp.status} {_PHRASES[resp.status]}",
            f"Server: {self.server_version}",
            f"Date: {_http_date()}",
        ]
        if resp.content_type:
            lines.append(f"Content-Type: {resp.content_type}")
        lines.extend(f"{name}: {value}" for name, value in resp.headers.items())
        if resp.status != 204:
            lines.append(f"Content-Length: {len(resp.body)}")
        if self.close_connection:
            lines.append("Connection: close")
        header = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        body = resp.body if not head and resp.status != 204 else b""
        try:
            if len(body) <= ONE_WRITE_BYTES:
                self.wfile.write(header + body)
            else:
                self.wfile.write(header)
                self.wfile.write(body)
        except OSError as e:
            self.close_connection = True
            log.debug("client went away", extra={"error": repr(e)})


#: Reason phrases by status code (an HTTPStatus lookup per answer costs more than a dict's).
_PHRASES = {int(status): status.phrase for status in HTTPStatus}
#: Answers up to this size go out in one write, headers and body copied together.
ONE_WRITE_BYTES = 256 * 1024
#: Most request headers taken, and longest header line, as the standard library allows.
MAX_HEADERS = 100
MAX_HEADER_LINE = 65536


class RequestHeaders:
    """A request's headers by name, whatever its case. A repeated header keeps every value;
    :meth:`get` answers the first, as the standard library's message does (which stores
    them through the e-mail package's policies, at several times the cost per lookup)."""

    def __init__(self, fields: list[list[str]]) -> None:
        self._values: dict[str, list[str]] = {}
        for name, value in fields:
            self._values.setdefault(name.lower(), []).append(value)

    @overload
    def get(self, name: str) -> str | None: ...
    @overload
    def get(self, name: str, default: str) -> str: ...
    def get(self, name: str, default: str | None = None) -> str | None:
        values = self._values.get(name.lower())
        return values[0] if values else default

    def get_all(self, name: str) -> list[str]:
        return list(self._values.get(name.lower(), ()))

    def __getitem__(self, name: str) -> str | None:
        return self.get(name)


@functools.lru_cache(maxsize=256)
def _parameters(query: str) -> Mapping[str, list[str]]:
    """The parameters of a URL's query string. Clients send the same few again and again,
    and parsing even ``format=arrow`` took a fiftieth of a point query's time; the mapping
    is shared, so it is read only."""
    return MappingProxyType(parse_qs(query))


def _read_headers(rfile: Any) -> RequestHeaders | tuple[HTTPStatus, str]:
    """The headers up to the blank line, or the status and message refusing them."""
    fields: list[list[str]] = []
    for _ in range(MAX_HEADERS + 1):
        line = rfile.readline(MAX_HEADER_LINE + 1)
        if len(line) > MAX_HEADER_LINE:
            return HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "Header line too long"
        if line in (b"\r\n", b"\n", b""):
            return RequestHeaders(fields)
        text = line.decode("iso-8859-1").rstrip("\r\n")
        if text[:1] in (" ", "\t") and fields:  # an obsolete folded continuation
            fields[-1][1] += " " + text.strip()
            continue
        name, colon, value = text.partition(":")
        if not colon or not name or name != name.strip():
            return HTTPStatus.BAD_REQUEST, f"Malformed header line {text[:100]!r}"
        fields.append([name, value.strip()])
    return HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, f"More than {MAX_HEADERS} headers"


@functools.lru_cache(maxsize=2)
def _date_of(second: int) -> str:
    return email.utils.formatdate(second, usegmt=True)


def _http_date() -> str:
    """The Date header's value, formatted once a second."""
    return _date_of(int(time.time()))


def _gunzip(data: bytes, limit: int) -> bytes:
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = d.decompress(data, limit + 1)
    except zlib.error as e:
        raise InvalidArgument(f"request body is not valid gzip: {e}") from None
    if len(out) > limit:
        raise TooLarge(
            f"decompressed request body exceeds the limit of {limit} bytes; split it into "
            "smaller requests"
        )
    return out


class HttpServer:
    """The HTTP server on a background thread."""

    def __init__(
        self,
        app: HttpApp,
        *,
        bind: str = "127.0.0.1",
        port: int = 5440,
        port_setting: str = "http_port",
    ) -> None:
        self.app = app
        self.bind = bind
        self._requested_port = port
        self.port = port
        self.port_setting = port_setting
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> int:
        """Bind and serve; returns the port (useful when 0 asked for a free one). Unavailable,
        naming the port and its setting, when it cannot listen there."""
        try:
            self._server = _Server((self.bind, self._requested_port), self.app)
        except OSError as e:
            raise listen_error(
                "HTTP", self.bind, self._requested_port, self.port_setting, e
            ) from None
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.2},
            name="gnomon-http",
            daemon=True,
        )
        self._thread.start()
        log.info("HTTP server listening", extra={"address": f"{self.bind}:{self.port}"})
        return self.port

    def stop(self, grace_s: float = 10.0) -> None:
        """Stop accepting connections, let requests in flight finish (up to ``grace_s``),
        then close the idle keep-alive connections."""
        server = self._server
        if server is None:
            return
        self.app.stopping = True
        server.shutdown()
        if not self.app.wait_idle(grace_s):
            log.warning("requests still running at stop", extra={"grace_s": grace_s})
        with server.connections_lock:
            connections = list(server.connections)
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=grace_s)
        self._server = None
        log.info("HTTP server stopped", extra={"port": self.port})
