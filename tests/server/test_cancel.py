"""Queries stop when nobody waits for them any more: the HTTP client closed its connection,
the gRPC call was cancelled, the server's time limit passed or the server is stopping. Bodies
built to break the parser are refused as bad requests."""

from __future__ import annotations

import http.client
import json
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest

from gnomon.errors import Cancelled, DeadlineExceeded
from gnomon.metrics import Registry
from gnomon.proto import storage_pb2 as pb
from node.backends import open_standalone
from node.engine.engine import Engine
from node.ingest.writer import Ingestor
from node.server import standalone
from node.server.grpc_service import GrpcServer, StorageService
from node.server.http import HttpApp, HttpServer
from node.server.standalone import Standalone
from node.sql import cancel
from node.sql.executor import SqlExecutor
from node.sql.result import QueryResult
from testkit.procs import Server
from tests.server.conftest import REPO, Running

pytestmark = pytest.mark.integration

#: Reads two tables, so DataFusion streams them from the engine (a query of one small table
#: is read up front instead), through the scans that check for cancellation.
JOIN = "SELECT a.v FROM c_a AS a JOIN c_b AS b ON a.k = b.k"
#: Bounds on every wait of these tests (none is timed: each ends on the event it waits for).
WAIT_S = 30.0


def _tables(engine: Engine) -> SqlExecutor:
    sql = SqlExecutor(engine)
    for name in ("c_a", "c_b"):
        sql.execute(
            f"CREATE TABLE {name} (k string TAG, v double, t timestamp NOT NULL, TIMESTAMP KEY(t))"
        )
        sql.execute(f"INSERT INTO {name} (k, v, t) VALUES ('x', 1, 1000), ('y', 2, 2000)")
    return sql


@dataclass
class Held:
    """An executor whose queries wait at their start until released (or until their token
    is cancelled, with ``until_cancelled``), then run for real; what each ended with is
    kept."""

    sql: SqlExecutor
    until_cancelled: bool = False
    started: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    outcomes: list[object] = field(default_factory=list)
    done: threading.Event = field(default_factory=threading.Event)

    def execute(self, query: str) -> QueryResult:
        self.started.set()
        token = cancel.current()
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline and not self.release.wait(0.01):
            if self.until_cancelled and token is not None and token.cancelled:
                break
        try:
            result = self.sql.execute(query)
        except Exception as e:
            self.outcomes.append(e)
            raise
        finally:
            self.done.set()
        self.outcomes.append(result)
        return result


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    with open_standalone(str(tmp_path / "data"), wal_sync="never") as opened:
        yield opened


def _http(engine: Engine, execute: Callable[[str], QueryResult], **options: Any) -> HttpServer:
    app = HttpApp(
        ingestor=Ingestor(engine),
        execute=execute,
        metrics=Registry(),
        max_body_bytes=1024**2,
        healthy=lambda: True,
        **options,
    )
    return HttpServer(app, port=0)


def test_http_query_stops_when_the_client_disconnects(engine: Engine) -> None:
    held = Held(_tables(engine))
    server = _http(engine, held.execute)
    port = server.start()
    try:
        body = json.dumps({"query": JOIN}).encode()
        with socket.create_connection(("127.0.0.1", port), timeout=WAIT_S) as client:
            client.sendall(
                b"POST /sql HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
            )
            assert held.started.wait(WAIT_S)
        held.release.set()  # the client is gone: the query now runs for nobody
        assert held.done.wait(WAIT_S)
        (outcome,) = held.outcomes
        assert isinstance(outcome, Cancelled)
        assert outcome.message == "query cancelled: the client closed the connection"
    finally:
        server.stop(5.0)


def test_http_query_past_the_time_limit_is_answered_504(engine: Engine) -> None:
    sql = _tables(engine)
    server = _http(engine, sql.execute, queries=cancel.Queries(timeout_s=1e-9))
    port = server.start()
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT_S)
        conn.request("POST", "/sql", body=json.dumps({"query": JOIN}).encode())
        resp = conn.getresponse()
        answer = json.loads(resp.read())
        assert resp.status == 504, answer
        assert answer["message"].startswith("query exceeded the server's time limit of 1e-09 s")
        assert "query_timeout_s" in answer["message"]
        conn.close()
    finally:
        server.stop(5.0)


def _sql_call(
    channel: grpc.Channel,
) -> grpc.UnaryUnaryMultiCallable[pb.SqlQueryRequest, pb.SqlQueryResponse]:
    return channel.unary_unary(
        "/storage.StorageService/SqlQuery",
        request_serializer=pb.SqlQueryRequest.SerializeToString,
        response_deserializer=pb.SqlQueryResponse.FromString,
    )


def _request(sql: str) -> pb.SqlQueryRequest:
    return pb.SqlQueryRequest(context=pb.RequestContext(database="public"), sql=sql)


def test_grpc_query_stops_when_the_call_is_cancelled(engine: Engine) -> None:
    held = Held(_tables(engine), until_cancelled=True)
    server = GrpcServer(StorageService(Ingestor(engine), held.execute, Registry()), port=0)
    port = server.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            call = _sql_call(channel).future(_request(JOIN), timeout=WAIT_S)
            assert held.started.wait(WAIT_S)
            call.cancel()
            assert held.done.wait(WAIT_S)
        (outcome,) = held.outcomes
        assert isinstance(outcome, Cancelled), outcome
        assert "the call was cancelled or its deadline passed" in outcome.message
    finally:
        server.stop(5.0)


def test_grpc_query_past_the_time_limit_fails(engine: Engine) -> None:
    sql = _tables(engine)
    service = StorageService(
        Ingestor(engine), sql.execute, Registry(), queries=cancel.Queries(1e-9)
    )
    server = GrpcServer(service, port=0)
    port = server.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            resp = _sql_call(channel)(_request(JOIN), timeout=WAIT_S)
        assert resp.header.code == 500
        assert "query exceeded the server's time limit" in resp.header.error
    finally:
        server.stop(5.0)


def test_a_caller_deadline_shortens_the_limit() -> None:
    queries = cancel.Queries(timeout_s=300)
    with queries.running(timeout_s=1e-9) as token:
        assert token.timeout_s == 1e-9
        with pytest.raises(DeadlineExceeded):
            token.check()
    with queries.running(timeout_s=600) as token:
        assert token.timeout_s == 300
        token.check()
    assert cancel.current() is None


def test_stop_cancels_the_queries_still_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the grace period a query still running is cancelled, so it stops reading before
    the engine closes under it."""
    server, query = _serving_a_held_query(tmp_path, monkeypatch, until_cancelled=True)
    server.stop()
    assert query.done.wait(WAIT_S)
    (outcome,) = query.outcomes
    assert isinstance(outcome, Cancelled), outcome
    assert not server.unfinished


def test_stop_reports_work_it_cannot_cancel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A query that never checks its token (DataFusion planning) outlives the stop: it is
    reported, so that the process can end without waiting for it."""
    monkeypatch.setattr(standalone, "CANCEL_WAIT_S", 0.2)
    server, query = _serving_a_held_query(tmp_path, monkeypatch, until_cancelled=False)
    try:
        server.stop()
        assert server.unfinished
    finally:
        query.release.set()
        assert query.done.wait(WAIT_S)


def _serving_a_held_query(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, until_cancelled: bool
) -> tuple[Standalone, Held]:
    """A started server (grace period 0.2 s) whose one query, sent over HTTP, is running and
    held (until cancelled, or until released)."""
    held: list[Held] = []

    def executor(engine: Engine, remote: object = None, partitions: object = None) -> Held:
        # The server makes an executor per read mode (leader, follower): the same one here.
        if not held:
            held.append(Held(_tables(engine), until_cancelled=until_cancelled))
        return held[0]

    monkeypatch.setattr(standalone, "SqlExecutor", executor)
    server = Standalone(
        str(tmp_path / "data"),
        http_port=0,
        grpc_port=0,
        flight_port=0,
        wal_sync="never",
        grace_s=0.2,
    )
    server.start()
    (query,) = held
    threading.Thread(target=_post, args=(server.http_port, JOIN), daemon=True).start()
    assert query.started.wait(WAIT_S)
    return server, query


def _post(port: int, query: str) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT_S)
    try:
        conn.request("POST", "/sql", body=json.dumps({"query": query}).encode())
        conn.getresponse().read()
    except OSError:
        pass  # the server stopped under the request: what these tests do
    finally:
        conn.close()


@pytest.mark.parametrize("opening", ["[", '{"a":'])
def test_deeply_nested_json_body_is_a_bad_request(gnomon: Running, opening: str) -> None:
    status, _, body = gnomon.request(
        "POST", "/sql", (opening * 100_000).encode(), {"Content-Type": "application/json"}
    )
    answer = json.loads(body)
    assert status == 400, answer
    assert answer == {"code": 400, "message": "request body is not valid JSON: nested too deeply"}
    status, answer = gnomon.sql("SELECT 1 AS one")
    assert (status, answer) == (200, {"rows": [{"one": 1}]})


#: A standalone gnomon whose queries read an endless dataset without ever checking their
#: token, the way DataFusion plans a query: native threads keep calling back into Python.
_STUCK_SERVER = """
import sys, time
import datafusion
import pyarrow as pa
import pyarrow.dataset as ds
from node.server import logfmt, standalone
from node.sql.result import QueryResult

SCHEMA = pa.schema([("x", pa.int64())])

def endless():
    print("query reading", file=sys.stderr, flush=True)
    while True:
        time.sleep(0.001)
        yield pa.record_batch([pa.array([1])], schema=SCHEMA)

class Fragment:
    def scanner(self, *args, **kwargs):
        return ds.Scanner.from_batches(endless(), schema=SCHEMA)

class Endless(ds.InMemoryDataset):
    def __init__(self):
        super().__init__(pa.Table.from_batches([], schema=SCHEMA))
    def get_fragments(self, filter=None):
        return [Fragment()]

class Stuck:
    def __init__(self, engine, remote=None, partitions=None):
        pass
    def execute(self, sql):
        ctx = datafusion.SessionContext()
        ctx.register_dataset("t", Endless())
        return QueryResult.rows(ctx.sql("SELECT sum(x) FROM t").to_arrow_table())

standalone.SqlExecutor = Stuck
standalone.CANCEL_WAIT_S = 0.2
logfmt.configure("INFO")
standalone.Standalone(
    sys.argv[1], http_port=0, grpc_port=0, flight_port=0, wal_sync="never", grace_s=0.2,
    ports_file=sys.argv[2].removeprefix("--ports-file="),
).run_forever()
"""


def test_stop_with_work_it_cannot_cancel_ends_the_process_cleanly(tmp_path: Path) -> None:
    """Left to the interpreter's shutdown, Arrow's threads still reading the query's Python
    iterator abort the process (Fatal Python error: PyGILState_Release); run_forever ends
    it once the engine is closed instead."""
    log = tmp_path / "server.log"
    server, ports = Server.start_gnomon(
        [sys.executable, "-c", _STUCK_SERVER, str(tmp_path / "data")], log=log, cwd=REPO
    )
    try:
        deadline = time.monotonic() + WAIT_S
        query = (ports["http"], "SELECT sum(x) FROM t")
        threading.Thread(target=_post, args=query, daemon=True).start()
        while "query reading" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "query reading" in log.read_text(), log.read_text()
        server.proc.send_signal(signal.SIGTERM)
        code = server.proc.wait(timeout=WAIT_S)
    finally:
        server.stop(WAIT_S)
    text = log.read_text()
    assert code == 0, text
    assert "Fatal Python error" not in text and "Traceback" not in text, text
    assert "engine closed" in text and "exiting with work still running" in text, text
