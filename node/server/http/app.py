"""What gnomon's HTTP endpoints do, independent of the connections that carry them."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import parse_qs

import pyarrow as pa

from gnomon.error_codes import http_status, message_of
from gnomon.errors import Closed, GnomonError, InvalidArgument, NotOwner
from gnomon.metrics import Registry
from node.engine.table import Logged
from node.ingest import line_protocol
from node.ingest.rows import TableRows
from node.ingest.writer import Ingestor
from node.prom.metric_rows import SeriesCache
from node.security.authn import Authenticates
from node.server.arrow_wire import ipc_stream, json_rows, to_wire
from node.server.http.answers import (
    ARROW_STREAM,
    NO_CONTENT,
    TOTAL_ROWS_HEADER,
    Response,
    error,
    json_answer,
)
from node.server.http.bodies import check_database, json_body, line_protocol_text, max_rows
from node.server.openapi import SPEC
from node.server.reads import wants_follower
from node.sql import influxql
from node.sql.cancel import Queries
from node.sql.result import QueryResult


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
        cluster: Callable[[], Mapping[str, Any]] | None = None,
    ) -> None:
        """``execute_follower``: runs queries asking for follower reads (default
        ``execute``); ``cluster``: what ``GET /api/cluster`` answers (the console's cluster
        page)."""
        self._cluster = cluster
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
        #: Remote-written series already checked, by their labels' bytes.
        self.series_cache = SeriesCache()
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
    ) -> Response:
        """Run the statement in ``body``; a query answers JSON rows, or with ``arrow`` one
        Arrow IPC stream (types as the gRPC API sends them), at most the body's ``max_rows``
        of them. ``gone`` tells whether the client went away, which stops the query."""
        doc = json_body(body)
        if not isinstance(doc, dict) or not isinstance(doc.get("query"), str):
            raise InvalidArgument('request body must be a JSON object {"query": "<sql>"}')
        query: str = doc["query"]
        if not query.strip():
            raise InvalidArgument("query is empty")
        most = max_rows(doc)
        execute = self.execute_follower if wants_follower(doc.get("read")) else self.execute
        # The answer takes its wire form while the query still holds its memory.
        with self.queries.running(probe=gone):
            result = execute(query)
            if result.is_query:
                return _rows(result.table(), arrow=arrow, most=most)
        return json_answer(200, {"affected_rows": result.affected_rows or 0})

    def influx_query(
        self,
        params: Mapping[str, list[str]],
        body: bytes,
        content_type: str,
        *,
        gone: Callable[[], bool] | None = None,
    ) -> Response:
        """An InfluxQL query (``q``, ``db``, ``epoch``, ``pretty`` in the URL or, for POST,
        a form body), answered with InfluxDB 1.x's JSON."""
        if body and content_type.split(";")[0].strip() == "application/x-www-form-urlencoded":
            params = {**params, **parse_qs(body.decode(errors="replace"))}
        check_database(params)
        query = params.get("q", [""])[-1]
        epoch = params.get("epoch", [""])[-1] or None
        with self.queries.running(probe=gone):
            doc = influxql.answer(query, self.execute, epoch=epoch)
        pretty = params.get("pretty", [""])[-1] == "true"
        text = json.dumps(doc, indent=4 if pretty else None)
        return Response(200, text.encode(), "application/json")

    def influx_write(self, body: bytes, params: Mapping[str, list[str]]) -> Response:
        text, precision = line_protocol_text(body, params)
        written = self.ingestor.write_all(line_protocol.parse(text, precision=precision))
        self.metrics.rows_written.inc("influxdb", amount=written)
        return NO_CONTENT

    def influx_writes(
        self, writes: Sequence[tuple[bytes, Mapping[str, list[str]]]]
    ) -> list[Response | Exception]:
        """Several small line-protocol writes that arrived together, each answered on its
        own. Those of one precision are parsed and written as one body: one conversion, one
        engine write and one WAL record for all. If that fails (a bad line, a type one write
        gives a column and another contradicts), nothing was written and each is written
        alone, so each gets the answer its own body earns."""
        answers: list[Response | Exception] = [NO_CONTENT] * len(writes)
        texts: dict[str, list[tuple[int, str]]] = {}
        for i, (body, params) in enumerate(writes):
            try:
                text, precision = line_protocol_text(body, params)
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
                text, precision = line_protocol_text(body, params)
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

    def route(self, table: str) -> Response:
        if self._route is None:
            return error(404, "this server answers no routes")
        try:
            return json_answer(200, {"table": table, **self._route(table)})
        except GnomonError as e:
            return error(http_status(e), message_of(e))

    def cluster(self) -> Response:
        if self._cluster is None:
            return error(404, "this server answers no cluster view")
        try:
            return json_answer(200, self._cluster())
        except GnomonError as e:
            return error(http_status(e), message_of(e))

    def health(self) -> Response:
        if self.stopping or not self.healthy():
            return error(503, "gnomon is stopping" if self.stopping else "engine is closed")
        return json_answer(200, {"status": "ok"})

    def prometheus(self) -> Response:
        return Response(
            200, self.metrics.render().encode(), "text/plain; version=0.0.4; charset=utf-8"
        )

    def openapi(self) -> Response:
        return json_answer(200, SPEC)


def _rows(table: pa.Table, *, arrow: bool, most: int | None) -> Response:
    """A query's answer: its rows, only the first ``most`` (when not None) with how many it
    had, so a client showing a few of a large answer is not sent the rest."""
    total = table.num_rows
    if most is not None:
        table = table.slice(0, most)
    if arrow:
        headers = {} if most is None else {TOTAL_ROWS_HEADER: str(total)}
        return Response(200, ipc_stream(to_wire(table)), ARROW_STREAM, headers)
    counted = {} if most is None else {"total_rows": total}
    return json_answer(200, {"rows": json_rows(table), **counted})
