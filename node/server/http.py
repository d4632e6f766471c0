"""gnomon's HTTP server: ``POST /sql`` (HoraeDB-compatible JSON), ``POST /influxdb/v1/write``
(InfluxDB line protocol), ``GET /health``, ``GET /metrics`` (Prometheus text) and
``GET /openapi.json``.

Requests are parsed by httptools (llhttp, the parser uvicorn uses): request line, headers,
Content-Length and chunked bodies, pipelining and keep-alive are its. Connections are served
by one asyncio event loop on a thread of its own; what blocks (SQL, writes) runs on a thread
pool, so the loop keeps reading (and notices a client that leaves mid-query). Errors are JSON
``{"code": <HTTP status>, "message": ...}``, protocol errors included.

Why not a whole server library: aiohttp's and h11's parsers refuse HTTP/1.1 requests without
a Host header and folded header lines, which clients of the hand-written server sent; uvicorn
writes every response header name in lower case and answers every malformed request with one
plain-text 400. Both also close a connection as soon as the client half-closes it, dropping
the answers to requests it sent before.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import email.utils
import functools
import json
import logging
import socket
import threading
import time
import zlib
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from http import HTTPStatus
from types import MappingProxyType
from typing import Any, overload
from urllib.parse import parse_qs, unquote, urlsplit

import httptools

from gnomon.errors import (
    Cancelled,
    Closed,
    GnomonError,
    InvalidArgument,
    NotOwner,
    TooLarge,
    Unavailable,
)
from gnomon.wal.api import Ticket
from node.engine.table import Logged
from node.ingest import line_protocol
from node.ingest.rows import TableRows
from node.ingest.writer import Ingestor
from node.security.authn import Authenticates
from node.security.context import acting_as
from node.security.tls import ServerTls
from node.server.arrow_wire import ipc_stream, json_rows, to_wire
from node.server.auth import CHALLENGE, OPEN_PATHS
from node.server.listen import listen_error
from node.server.metrics import Registry
from node.server.openapi import SPEC
from node.server.reads import wants_follower
from node.server.status import http_status, message_of
from node.sql import influxql
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
#: Connections waiting to be accepted: a burst of clients connecting at once (the kernel caps
#: it at net.core.somaxconn) would otherwise wait out SYN retries of a second or more.
BACKLOG = 1024
#: Threads running SQL and the writes too large to batch (as many as the gRPC server has).
DEFAULT_WORKERS = 32
#: Line-protocol bodies up to this size are written in batches with the others that arrive
#: together (see _Writes), each of at most WRITE_BATCH_MAX writes.
SMALL_WRITE_BYTES = 64 * 1024
WRITE_BATCH_MAX = 1024
#: Batches of small writes started on the loop and not yet answered. Writes arriving while
#: one is being synced wait and go as the next batch (one conversion, one memtable insert)
#: once it is answered: the classic group-commit pipeline. A second batch appended behind
#: the first took whatever single write came next: with 8 clients, batches of 2.2 writes on
#: average and 170 us of loop time per write, against 3.8 writes and 124 us held back.
WRITE_BATCHES_IN_FLIGHT = 1
#: Requests parsed ahead on one connection while an earlier one is served; past this the
#: connection is not read until they are answered.
MAX_PIPELINED = 16

_ROUTES: dict[str, tuple[str, ...]] = {
    "/sql": ("POST",),
    "/influxdb/v1/write": ("POST",),
    "/influxdb/v1/query": ("GET", "POST"),
    "/health": ("GET", "HEAD"),
    "/metrics": ("GET",),
    "/openapi.json": ("GET",),
}
#: ``GET /route/{table}``: where a table is served (its owner's endpoints).
ROUTE_PREFIX = "/route/"
#: The endpoints that read a request body (other requests' bodies are dropped as they come).
_WITH_BODY = frozenset({"/sql", "/influxdb/v1/write", "/influxdb/v1/query"})


def _endpoint(path: str) -> str:
    """The metrics label of a request's path (one per endpoint, whatever table it names)."""
    if path in _ROUTES:
        return path
    return "/route" if path.startswith(ROUTE_PREFIX) else "other"


class _Response:
    __slots__ = ("body", "content_type", "headers", "status")

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


#: The answer to a write (it has no body), shared.
_NO_CONTENT = _Response(204)


def _json_body(body: bytes) -> Any:
    try:
        return json.loads(body or b"null")
    except (ValueError, UnicodeDecodeError) as e:
        raise InvalidArgument(f"request body is not valid JSON: {e}") from None
    except RecursionError:
        # The parser recurses once per nesting level: ``[[[[...`` exhausts the stack.
        raise InvalidArgument("request body is not valid JSON: nested too deeply") from None


def _wants_arrow(params: Mapping[str, list[str]], accept: str) -> bool:
    """Whether a /sql client asks for Arrow: ``?format=arrow`` (or ``json``), else an Accept
    header naming the Arrow stream type."""
    fmt = params.get("format", [""])[-1].lower()
    if fmt not in ("", "json", "arrow"):
        raise InvalidArgument(f"unknown format {fmt!r}: use json or arrow")
    return fmt == "arrow" or (not fmt and ARROW_STREAM in accept)


def _check_database(params: Mapping[str, list[str]]) -> None:
    db = params.get("db", [DATABASE])[-1]
    if db and db != DATABASE:
        raise InvalidArgument(
            f"database {db!r} does not exist: gnomon has one database, {DATABASE!r}"
        )


def _line_protocol(body: bytes, params: Mapping[str, list[str]]) -> tuple[str, str]:
    """A line-protocol write's text and precision, once its database is checked."""
    _check_database(params)
    try:
        text = body.decode()
    except UnicodeDecodeError as e:
        raise InvalidArgument(f"line protocol body is not UTF-8: {e}") from None
    return text, params.get("precision", ["ns"])[-1] or "ns"


class HttpApp:
    """What the endpoints do, independent of the connection handling. Queries run under
    ``queries`` (their time limit, cancelled when stopping). ``start_writes`` starts small
    writes without blocking (:meth:`Ingestor.start_write_all`, the ingestor's own if it is
    one); a writer that sends rows on to other nodes hands it that of its local ingestor,
    whose refusal (None) makes the writes go through ``ingestor`` on a thread. With an
    ``authenticator``, requests but those of OPEN_PATHS are authenticated (on a pool thread,
    as the check may take milliseconds) and run as their caller."""

    def __init__(
        self,
        *,
        ingestor: Ingestor,
        execute: Callable[[str], QueryResult],
        metrics: Registry,
        max_body_bytes: int,
        healthy: Callable[[], bool],
        queries: Queries | None = None,
        start_writes: Callable[[Sequence[TableRows]], Logged | None] | None = None,
        route: Callable[[str], Mapping[str, str]] | None = None,
        authenticator: Authenticates | None = None,
        execute_follower: Callable[[str], QueryResult] | None = None,
    ) -> None:
        """``execute_follower``: runs queries asking for follower reads (default
        ``execute``)."""
        self.ingestor = ingestor
        self.authenticator = authenticator
        self.execute_follower = execute_follower or execute
        #: The endpoints serving a table (``GET /route/{table}``); NotFound if none.
        self._route = route
        if start_writes is None and isinstance(ingestor, Ingestor):
            start_writes = ingestor.start_write_all
        self._start_writes = start_writes
        self.execute = execute
        self.metrics = metrics
        self.max_body_bytes = max_body_bytes
        self.healthy = healthy
        self.queries = queries or Queries()
        self.stopping = False
        self._inflight = 0
        self._cond = threading.Condition()

    def begin(self) -> None:
        """A request is being served (until :meth:`end`)."""
        with self._cond:
            self._inflight += 1

    def end(self) -> None:
        with self._cond:
            self._inflight -= 1
            if not self._inflight:
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
        execute = self.execute_follower if wants_follower(doc.get("read")) else self.execute
        with self.queries.running(probe=gone):
            result = execute(query)
        if result.is_query and arrow:
            return _Response(200, ipc_stream(to_wire(result.table())), ARROW_STREAM)
        if result.is_query:
            return _json(200, {"rows": json_rows(result.table())})
        return _json(200, {"affected_rows": result.affected_rows or 0})

    def influx_query(
        self,
        params: Mapping[str, list[str]],
        body: bytes,
        content_type: str,
        *,
        gone: Callable[[], bool] | None = None,
    ) -> _Response:
        """An InfluxQL query (``q``, ``db``, ``epoch``, ``pretty`` in the URL or, for POST,
        a form body), answered with InfluxDB 1.x's JSON."""
        if body and content_type.split(";")[0].strip() == "application/x-www-form-urlencoded":
            params = {**params, **parse_qs(body.decode(errors="replace"))}
        _check_database(params)
        query = params.get("q", [""])[-1]
        epoch = params.get("epoch", [""])[-1] or None
        with self.queries.running(probe=gone):
            doc = influxql.answer(query, self.execute, epoch=epoch)
        pretty = params.get("pretty", [""])[-1] == "true"
        text = json.dumps(doc, indent=4 if pretty else None)
        return _Response(200, text.encode(), "application/json")

    def influx_write(self, body: bytes, params: Mapping[str, list[str]]) -> _Response:
        text, precision = _line_protocol(body, params)
        written = self.ingestor.write_all(line_protocol.parse(text, precision=precision))
        self.metrics.rows_written.inc("influxdb", amount=written)
        return _NO_CONTENT

    def influx_writes(
        self, writes: Sequence[tuple[bytes, Mapping[str, list[str]]]]
    ) -> list[_Response | Exception]:
        """Several small line-protocol writes that arrived together, each answered on its
        own. Those of one precision are parsed and written as one body: one conversion, one
        engine write and one WAL record for all. If that fails (a bad line, a type one write
        gives a column and another contradicts), nothing was written and each is written
        alone, so each gets the answer its own body earns."""
        answers: list[_Response | Exception] = [_NO_CONTENT] * len(writes)
        texts: dict[str, list[tuple[int, str]]] = {}
        for i, (body, params) in enumerate(writes):
            try:
                text, precision = _line_protocol(body, params)
            except InvalidArgument as e:
                answers[i] = e
                continue
            texts.setdefault(precision, []).append((i, text))
        for precision, group in texts.items():
            try:
                if len(group) > 1 and self._write_joined([text for _, text in group], precision):
                    continue
            except Exception as e:
                for i, _ in group:
                    answers[i] = e
                continue
            for i, _ in group:
                try:
                    self.influx_write(*writes[i])
                except Exception as e:
                    answers[i] = e
        return answers

    def start_influx_writes(
        self, writes: Sequence[tuple[bytes, Mapping[str, list[str]]]]
    ) -> Logged | None:
        """Start several small line-protocol writes that arrived together as one, without
        blocking (see Ingestor.start_write_all): all of them are acknowledged, or refused,
        once the returned write's WAL ticket settles. None, with nothing written, unless
        they are all of one precision and one table and that table takes them now: write
        them with :meth:`influx_writes` on a thread then."""
        if self._start_writes is None:
            return None
        texts: list[str] = []
        precisions: set[str] = set()
        try:
            for body, params in writes:
                text, precision = _line_protocol(body, params)
                texts.append(text)
                precisions.add(precision)
            if len(precisions) != 1:
                return None
            tables = line_protocol.parse("\n".join(texts), precision=precisions.pop())
            return self._start_writes(tables)
        except (InvalidArgument, NotOwner, Closed):
            return None  # raised before anything was logged: each write is answered alone

    def _write_joined(self, texts: list[str], precision: str) -> bool:
        """Write ``texts`` as one body; False if it is refused (nothing was written)."""
        try:
            written = self.ingestor.write_all(
                line_protocol.parse("\n".join(texts), precision=precision)
            )
        except InvalidArgument:
            return False
        self.metrics.rows_written.inc("influxdb", amount=written)
        return True

    def route(self, table: str) -> _Response:
        if self._route is None:
            return _error(404, "this server answers no routes")
        try:
            return _json(200, {"table": table, **self._route(table)})
        except GnomonError as e:
            return _error(http_status(e), message_of(e))

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


#: Reason phrases by status code (an HTTPStatus lookup per answer costs more than a dict's).
_PHRASES = {int(status): status.phrase for status in HTTPStatus}
#: Answers up to this size go out in one write, headers and body copied together; larger ones
#: as headers then body, without the copy.
ONE_WRITE_BYTES = 256 * 1024
#: Most request headers taken, and longest header line, as the standard library allows.
MAX_HEADERS = 100
MAX_HEADER_LINE = 65536
#: Most bytes of one request's head (request line and headers) held while it is parsed.
MAX_HEAD_BYTES = MAX_HEADERS * MAX_HEADER_LINE


class RequestHeaders:
    """A request's headers by name, whatever its case. A repeated header keeps every value;
    :meth:`get` answers the first."""

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


def _read_headers(rfile: Any) -> RequestHeaders | tuple[HTTPStatus, str]:
    """The header block of an HTTP message read from a binary stream, up to the blank line
    (an obsolete folded line continues its header, as the server's parser takes it), or the
    status and message refusing it."""
    fields: list[list[str]] = []
    for _ in range(MAX_HEADERS + 1):
        line = rfile.readline(MAX_HEADER_LINE + 1)
        if len(line) > MAX_HEADER_LINE:
            return HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "Header line too long"
        if line in (b"\r\n", b"\n", b""):
            return RequestHeaders(fields)
        text = line.decode("iso-8859-1").rstrip("\r\n")
        if text[:1] in (" ", "\t") and fields:
            fields[-1][1] += " " + text.strip()
            continue
        name, colon, value = text.partition(":")
        if not colon or not name or name != name.strip():
            return HTTPStatus.BAD_REQUEST, f"Malformed header line {text[:100]!r}"
        fields.append([name, value.strip()])
    return HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, f"More than {MAX_HEADERS} headers"


@functools.lru_cache(maxsize=256)
def _parameters(query: str) -> Mapping[str, list[str]]:
    """The parameters of a URL's query string. Clients send the same few again and again;
    the mapping is shared, so it is read only."""
    return MappingProxyType(parse_qs(query))


@functools.lru_cache(maxsize=256)
def _target(url: bytes) -> tuple[str, str]:
    """A request target's path (``//x`` taken as ``/x``) and query string."""
    parts = urlsplit(url.decode("iso-8859-1"))
    path = parts.path
    if path.startswith("//"):
        path = "/" + path.lstrip("/")
    return path, parts.query


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


def _decoded(body: bytes, encoding: str, limit: int) -> bytes:
    """The request body as sent before its Content-Encoding (identity or gzip)."""
    if encoding == "gzip":
        return _gunzip(body, limit)
    if encoding not in ("identity", ""):
        raise InvalidArgument(f"unsupported Content-Encoding {encoding!r}: use gzip")
    return body


def _too_large(limit: int, length: int | None = None) -> TooLarge:
    if length is None:
        return TooLarge(
            f"request body exceeds the limit of {limit} bytes; split it into smaller requests"
        )
    return TooLarge(
        f"request body of {length} bytes exceeds the limit of {limit} bytes; "
        "split it into smaller requests"
    )


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
        self.answer: _Response | None = None


class _Server:
    """What the connections share: the app, the thread pool and the open connections
    (their sockets, read from other threads under ``connections_lock``)."""

    def __init__(
        self,
        app: HttpApp,
        pool: concurrent.futures.ThreadPoolExecutor,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self.app = app
        self.pool = pool
        self.writes = _Writes(app, pool, loop)
        self.connections: dict[Any, _Connection] = {}
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

    def _open(self) -> list[_Connection]:
        with self.connections_lock:
            return list(self.connections.values())


#: What a small write's answer, or the error it earns, is handed to (on the loop).
_Answer = Callable[[_Response | Exception], None]
#: Small writes queued on the loop, each with where its answer goes.
_Batch = list[tuple[bytes, Mapping[str, list[str]], _Answer]]


class _Writes:
    """Small line-protocol writes, batched on the loop: those read in one pass of the loop
    go together (see :meth:`HttpApp.start_influx_writes`). The loop converts a batch, appends
    its WAL record and applies it itself, and the WAL's sync thread makes it durable while the
    loop reads the writes that form the next batch (WRITE_BATCHES_IN_FLIGHT); the whole
    batch is answered in the loop pass after that sync. A request then costs the
    loop one wake-up, where a hand-over to a pool thread and back cost two more thread
    switches, and the threads woken by dozens fought the loop for the interpreter lock.

    A batch that cannot be written without blocking (a new table or column, a table waiting
    for flushes, a WAL whose appends block, several tables, a refusal that each write must
    get alone) goes to the pool instead (:meth:`HttpApp.influx_writes`), one such batch at a
    time: measured with 8 and 64 clients, a second one beside it made both slower."""

    def __init__(
        self, app: HttpApp, pool: concurrent.futures.Executor, loop: asyncio.AbstractEventLoop
    ) -> None:
        self.app = app
        self.pool = pool
        self.loop = loop
        self.pending: _Batch = []
        self.taking = False
        self.running = False
        self.in_flight = 0

    def add(self, body: bytes, params: Mapping[str, list[str]], answer: _Answer) -> None:
        """Queue a write; ``answer`` is called on the loop once it is acknowledged or
        refused (straight from the batch's answer: a future's callbacks would cost each write
        one more pass of the loop)."""
        self.pending.append((body, params, answer))
        if not self.taking:
            # After the other requests this pass of the loop reads.
            self.taking = True
            self.loop.call_soon(self._take)

    def _take(self) -> None:
        self.taking = False
        while self.pending and self.in_flight < WRITE_BATCHES_IN_FLIGHT:
            batch = self.pending[:WRITE_BATCH_MAX]
            try:
                logged = self.app.start_influx_writes([(body, params) for body, params, _ in batch])
            except Exception as e:
                del self.pending[: len(batch)]
                _answer_all(batch, e)
                continue
            if logged is None:
                if not self.running:
                    del self.pending[: len(batch)]
                    self._send(batch)
                return
            del self.pending[: len(batch)]
            self.in_flight += 1
            logged.ticket.then(functools.partial(self._durable, batch, logged))

    def _durable(self, batch: _Batch, logged: Logged, _: Ticket) -> None:
        """On the thread that settled the ticket: answer the batch on the loop."""
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits for these
            self.loop.call_soon_threadsafe(self._answer, batch, logged)

    def _answer(self, batch: _Batch, logged: Logged) -> None:
        self.in_flight -= 1
        try:
            written = logged.finish()
        except Exception as e:
            _answer_all(batch, e)
        else:
            self.app.metrics.rows_written.inc("influxdb", amount=written)
            _answer_all(batch, _NO_CONTENT)
        self._take()

    def _send(self, batch: _Batch) -> None:
        self.running = True
        job = self.loop.run_in_executor(
            self.pool, self.app.influx_writes, [(body, params) for body, params, _ in batch]
        )
        job.add_done_callback(functools.partial(self._done, batch))

    def _done(self, batch: _Batch, job: asyncio.Future[list[_Response | Exception]]) -> None:
        self.running = False
        try:
            answers = job.result()
        except Exception as e:
            answers = [e] * len(batch)
        for (_, _, answer), outcome in zip(batch, answers, strict=True):
            _settle_answer(answer, outcome)
        self._take()


def _settle_answer(answer: _Answer, outcome: _Response | Exception) -> None:
    # One connection's failure to answer must not keep the rest of its batch waiting.
    try:
        answer(outcome)
    except Exception:
        log.exception("answering a write failed")


def _answer_all(batch: _Batch, outcome: _Response | Exception) -> None:
    for _, _, answer in batch:
        _settle_answer(answer, outcome)


class _Connection(asyncio.Protocol):
    """One client connection: httptools parses what it sends; requests are answered in
    order, one at a time."""

    def __init__(self, server: _Server) -> None:
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
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.socket = transport.get_extra_info("socket")
        # A large answer goes out as headers then body: with Nagle's algorithm the body would
        # wait for the client's delayed ACK of the headers (40 ms per request).
        self.socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self.server.connections_lock:
            self.server.connections[self.socket] = self
        self.idle_since = self.loop.time()
        self._check_idle()

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
        request.path, request.query = _target(request.path.encode("iso-8859-1"))
        if request.path in _WITH_BODY and request.method == "POST":
            self._admit_body(request)

    def _admit_body(self, request: _Request) -> None:
        """Refuse an announced oversize body at once (before a client expecting 100-continue
        sends it); invite the others to send theirs."""
        headers = request.fields = RequestHeaders(request.headers)
        limit = self.app.max_body_bytes
        length = headers.get("Content-Length", "")
        if length.isdigit() and int(length) > limit:
            self._refuse_body(request, _too_large(limit, int(length)))
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
            self._refuse_body(request, _too_large(self.app.max_body_bytes))
            return
        request.body.append(body)

    def on_message_complete(self) -> None:
        request, self.request = self.request, None
        self.in_head = True
        if request is not None and request.answer is None:
            self.ready.append(request)

    # -- refusals --------------------------------------------------------------------------------

    def _refuse_body(self, request: _Request, error: TooLarge) -> None:
        """Answer 413 as soon as it is due; what the client still sends is read and dropped
        (see LINGER_BYTES) so that it gets the answer rather than a reset."""
        request.storing = False
        request.answer = self._failure(error, request.path)
        request.close = True
        self.ready.append(request)

    def _refuse_connection(self, refused: _Refused) -> None:
        """Answer a request the parser cannot take, then close: where the next request
        would start is unknown."""
        request = self.request or _Request()
        self.request = None
        request.answer = _error(refused.status, refused.message)
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
            if isinstance(outcome, _Response):
                self._answer(request, outcome)
            elif outcome is None:
                return  # a small write, answered through _written
            else:
                future = self.loop.run_in_executor(self.server.pool, outcome)
                future.add_done_callback(functools.partial(self._ran, request))

    def _ran(self, request: _Request, future: asyncio.Future[_Response]) -> None:
        try:
            response = future.result()
        except BaseException as e:
            response = self._failure(e, request.path)
        self._answer(request, response)
        self._serve_next()

    def _written(self, request: _Request, outcome: _Response | Exception) -> None:
        if isinstance(outcome, Exception):
            outcome = self._failure(outcome, request.path)
        self._answer(request, outcome)
        self._serve_next()

    def _dispatch(self, request: _Request) -> _Response | Callable[[], _Response] | None:
        """The answer, the blocking work that makes it (run on the pool), or None: a small
        write, queued to be answered with its batch. A request to authenticate is all work
        for the pool (small writes are not batched then)."""
        authenticator = self.app.authenticator
        if authenticator is None or request.path in OPEN_PATHS:
            return self._route(request, batch=True)
        authorization = (request.fields or RequestHeaders(request.headers)).get("Authorization")

        def run() -> _Response:
            with acting_as(authenticator.authenticate(authorization)):
                outcome = self._route(request, batch=False)
                return outcome() if callable(outcome) else outcome  # type: ignore[return-value]

        return run

    def _route(
        self, request: _Request, *, batch: bool
    ) -> _Response | Callable[[], _Response] | None:
        app = self.app
        path, method = request.path, request.method
        if path.startswith(ROUTE_PREFIX):
            if method not in ("GET", "HEAD"):
                resp = _error(405, f"{ROUTE_PREFIX}{{table}} accepts GET, HEAD, not {method}")
                resp.headers["Allow"] = "GET, HEAD"
                return resp
            table = unquote(path[len(ROUTE_PREFIX) :])
            return lambda: app.route(table)
        allowed = _ROUTES.get(path)
        if allowed is None:
            return _error(404, f"no endpoint {path!r}; see GET /openapi.json")
        if method not in allowed:
            resp = _error(405, f"{path} accepts {', '.join(allowed)}, not {method}")
            resp.headers["Allow"] = ", ".join(allowed)
            return resp
        if path == "/health":
            return app.health()
        if path == "/metrics":
            return app.prometheus()
        if path == "/openapi.json":
            return app.openapi()
        headers = request.fields or RequestHeaders(request.headers)
        params = _parameters(request.query)
        body = b"".join(request.body)
        encoding = headers.get("Content-Encoding", "identity").lower()
        limit = app.max_body_bytes
        if path == "/sql":
            arrow = _wants_arrow(params, headers.get("Accept", ""))
            return lambda: app.sql(_decoded(body, encoding, limit), arrow=arrow, gone=self.gone)
        if path == "/influxdb/v1/query":
            form = _decoded(body, encoding, limit)
            kind = headers.get("Content-Type", "")
            return lambda: app.influx_query(params, form, kind, gone=self.gone)
        app.metrics.request_bytes.inc("influxdb", amount=len(body))
        if batch and encoding in ("identity", "") and len(body) <= SMALL_WRITE_BYTES:
            self.server.writes.add(body, params, functools.partial(self._written, request))
            return None
        return lambda: app.influx_write(_decoded(body, encoding, limit), params)

    def _failure(self, e: BaseException, path: str) -> _Response:
        status = http_status(e)
        endpoint = _endpoint(path)
        fields = {"endpoint": endpoint, "status": status, "error": message_of(e)}
        if status >= 500 and not isinstance(e, Unavailable | Cancelled):
            log.error("request failed", extra=fields, exc_info=e)
        else:
            log.info("request rejected", extra=fields)
        resp = _error(status, message_of(e))
        if status == 401:
            resp.headers["WWW-Authenticate"] = CHALLENGE
        return resp

    def _answer(self, request: _Request, resp: _Response) -> None:
        """Write the answer to the request being served; close the connection after it if
        the request or the server says so, or if the client is done sending."""
        app = self.app
        close = request.close or not request.keep_alive or app.stopping
        self._write(resp, head=request.method == "HEAD", close=close)
        self.serving = None
        endpoint = _endpoint(request.path)
        app.metrics.observe_request(
            "http", endpoint, resp.status, time.perf_counter() - request.start
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

    def _write(self, resp: _Response, *, head: bool, close: bool) -> None:
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        if resp is _NO_CONTENT:
            transport.write(_no_content_head(_http_date(), close))
            return
        header = _head(resp, _http_date(), close)
        body = resp.body if not head and resp.status != 204 else b""
        if len(body) <= ONE_WRITE_BYTES:
            transport.write(header + body)
        else:
            transport.write(header)
            transport.write(body)


def _head(resp: _Response, date: str, close: bool) -> bytes:
    """The status line and headers of ``resp``."""
    lines = [f"HTTP/1.1 {resp.status} {_PHRASES[resp.status]}", "Server: gnomon", f"Date: {date}"]
    if resp.content_type:
        lines.append(f"Content-Type: {resp.content_type}")
    lines.extend(f"{name}: {value}" for name, value in resp.headers.items())
    if resp.status != 204:
        lines.append(f"Content-Length: {len(resp.body)}")
    if close:
        lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


@functools.lru_cache(maxsize=4)
def _no_content_head(date: str, close: bool) -> bytes:
    """The whole answer to a write (most answers are), built once a second."""
    return _head(_NO_CONTENT, date, close)


class HttpServer:
    """The HTTP server: an event loop on a background thread, blocking work on a pool of
    ``workers`` threads."""

    def __init__(
        self,
        app: HttpApp,
        *,
        bind: str = "127.0.0.1",
        port: int = 5440,
        port_setting: str = "http_port",
        workers: int = DEFAULT_WORKERS,
        tls: ServerTls | None = None,
    ) -> None:
        self.app = app
        self.tls = tls
        self.bind = bind
        self._requested_port = port
        self.port = port
        self.port_setting = port_setting
        self.workers = workers
        self._server: _Server | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._listening: asyncio.Server | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> int:
        """Bind and serve; returns the port (useful when 0 asked for a free one). Unavailable,
        naming the port and its setting, when it cannot listen there."""
        sock = self._listen()
        self.port = int(sock.getsockname()[1])
        pool = concurrent.futures.ThreadPoolExecutor(self.workers, thread_name_prefix="gnomon-http")
        loop = asyncio.new_event_loop()
        server = _Server(self.app, pool, loop)
        listening = loop.run_until_complete(
            loop.create_server(
                lambda: _Connection(server),
                sock=sock,
                backlog=BACKLOG,
                ssl=None if self.tls is None else self.tls.ssl_context(),
            )
        )
        self._server, self._loop, self._listening = server, loop, listening
        self._thread = threading.Thread(
            target=self._serve, args=(loop,), name="gnomon-http", daemon=True
        )
        self._thread.start()
        log.info("HTTP server listening", extra={"address": f"{self.bind}:{self.port}"})
        return self.port

    def _listen(self) -> socket.socket:
        family = socket.AF_INET6 if ":" in self.bind else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.bind, self._requested_port))
            sock.listen(BACKLOG)
        except OSError as e:
            sock.close()
            raise listen_error(
                "HTTP", self.bind, self._requested_port, self.port_setting, e
            ) from None
        sock.setblocking(False)
        return sock

    @staticmethod
    def _serve(loop: asyncio.AbstractEventLoop) -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_forever()
            # The connections closed at stop finish closing (their sockets) here.
            loop.run_until_complete(asyncio.sleep(0))
        finally:
            loop.close()

    def _stop_accepting(self, server: _Server) -> None:
        """On the loop's thread: close the listening socket and the idle connections."""
        if self._listening is not None:
            self._listening.close()
        server.close_idle()

    def stop(self, grace_s: float = 10.0) -> None:
        """Stop accepting connections, let requests in flight finish (up to ``grace_s``),
        then close every connection."""
        server, loop, thread = self._server, self._loop, self._thread
        if server is None or loop is None or thread is None:
            return
        self.app.stopping = True
        loop.call_soon_threadsafe(self._stop_accepting, server)
        if not self.app.wait_idle(grace_s):
            log.warning("requests still running at stop", extra={"grace_s": grace_s})
        loop.call_soon_threadsafe(server.close_all)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=grace_s)
        # Only if the loop did not stop: its connections are cut from here.
        with server.connections_lock:
            connections = list(server.connections)
        for sock in connections:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        server.pool.shutdown(wait=False, cancel_futures=True)
        self._server, self._loop, self._listening, self._thread = None, None, None, None
        log.info("HTTP server stopped", extra={"port": self.port})
