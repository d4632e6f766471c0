"""The HTTP server's connection handling on httptools and asyncio: blocking work kept off the
event loop, pipelined answers in order, Expect: 100-continue, bodies refused as too large
while they arrive, and stopping."""

from __future__ import annotations

import asyncio
import concurrent.futures
import http.client
import json
import os
import socket
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import pyarrow as pa
import pytest

from gnomon.errors import InvalidArgument
from gnomon.metrics import Registry
from node.backends import open_standalone
from node.engine.table import Logged
from node.ingest.rows import TableRows
from node.ingest.writer import Ingestor
from node.server.http import HttpApp, HttpServer, Response
from node.server.http import connection as http_connection
from node.server.http.writes import Writes
from node.sql.executor import SqlExecutor
from node.sql.result import QueryResult
from tests.server.conftest import read_until_closed

pytestmark = pytest.mark.unit

#: Bound on every wait of these tests.
WAIT_S = 30.0
LIMIT = 1024


class Gate:
    """An executor whose query ``SELECT 'held'`` waits until released; others answer at once."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()

    def execute(self, sql: str) -> QueryResult:
        if "held" in sql:
            self.started.set()
            assert self.release.wait(WAIT_S)
        return QueryResult.rows(pa.table({"q": [sql]}))


@pytest.fixture
def gate() -> Gate:
    return Gate()


@pytest.fixture
def server(tmp_path: Path, gate: Gate) -> Iterator[HttpServer]:
    with open_standalone(str(tmp_path / "data"), wal_sync="never") as engine:
        app = HttpApp(
            ingestor=Ingestor(engine),
            execute=gate.execute,
            metrics=Registry(),
            max_body_bytes=LIMIT,
            healthy=lambda: True,
        )
        running = HttpServer(app, port=0)
        running.start()
        try:
            yield running
        finally:
            gate.release.set()
            running.stop(grace_s=5.0)


def _sql(query: str) -> bytes:
    body = json.dumps({"query": query}).encode()
    return b"POST /sql HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)


def test_the_loop_answers_while_a_query_blocks(server: HttpServer, gate: Gate) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=WAIT_S) as held:
        held.sendall(_sql("SELECT 'held'"))
        assert gate.started.wait(WAIT_S)
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=WAIT_S)
        conn.request("GET", "/health")
        assert conn.getresponse().status == 200
        conn.close()
        gate.release.set()
        assert held.recv(65536).startswith(b"HTTP/1.1 200 OK")


def test_pipelined_requests_are_answered_in_order(server: HttpServer, gate: Gate) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=WAIT_S) as sock:
        sock.sendall(
            _sql("SELECT 'held'")
            + _sql("SELECT 'second'")
            + b"GET /health HTTP/1.1\r\nConnection: close\r\n\r\n"
        )
        assert gate.started.wait(WAIT_S)
        gate.release.set()
        data = read_until_closed(sock)
    assert data.count(b"HTTP/1.1 200 OK") == 3
    assert data.index(b"held") < data.index(b"second") < data.index(b'"status":"ok"')


def test_expect_100_continue(server: HttpServer) -> None:
    body = json.dumps({"query": "SELECT 1"}).encode()
    with socket.create_connection(("127.0.0.1", server.port), timeout=WAIT_S) as sock:
        sock.sendall(
            b"POST /sql HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
            b"Content-Length: %d\r\n\r\n" % len(body)
        )
        assert sock.recv(65536) == b"HTTP/1.1 100 Continue\r\n\r\n"
        sock.sendall(body)
        assert sock.recv(65536).startswith(b"HTTP/1.1 200 OK")
    # An announced body over the limit is refused before it is sent, without a 100.
    with socket.create_connection(("127.0.0.1", server.port), timeout=WAIT_S) as sock:
        sock.sendall(
            b"POST /sql HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
            b"Content-Length: %d\r\n\r\n" % (LIMIT + 1)
        )
        answer = read_until_closed(sock)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413") and b"Connection: close" in head
    assert json.loads(body)["message"].startswith(f"request body of {LIMIT + 1} bytes exceeds")


def test_a_chunked_body_past_the_limit_is_refused_as_it_arrives(server: HttpServer) -> None:
    chunk = b"x" * 512
    with socket.create_connection(("127.0.0.1", server.port), timeout=WAIT_S) as sock:
        sock.sendall(b"POST /influxdb/v1/write HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n")
        for _ in range(3):
            sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        # No final chunk: the answer comes while the client could still be sending.
        answer = read_until_closed(sock)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413"), head
    assert json.loads(body)["code"] == 413
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=WAIT_S)
    conn.request("GET", "/health")
    assert conn.getresponse().status == 200
    conn.close()


def test_stop_closes_idle_keep_alive_connections(server: HttpServer) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=WAIT_S) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\n\r\n")
        assert sock.recv(65536).startswith(b"HTTP/1.1 200 OK")
        server.stop(grace_s=5.0)
        assert sock.recv(65536) == b""


def test_idle_keep_alive_connections_close_after_the_idle_timeout(
    server: HttpServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A connection is closed once it has been idle for IDLE_TIMEOUT_S after its answers,
    whatever it sent before; one still sending its request is not idle."""
    monkeypatch.setattr(http_connection, "IDLE_TIMEOUT_S", 0.2)
    write = b"POST /influxdb/v1/write?precision=ms HTTP/1.1\r\nContent-Length: 14\r\n\r\n"
    with socket.create_connection(("127.0.0.1", server.port), timeout=WAIT_S) as sock:
        for ts in range(3):
            sock.sendall(write + b"idle v=1i %d" % (1000 + ts))
            assert sock.recv(65536).startswith(b"HTTP/1.1 204 No Content\r\n")
        assert read_until_closed(sock) == b""
    with socket.create_connection(("127.0.0.1", server.port), timeout=WAIT_S) as sock:
        sock.sendall(write)  # the head only: the body is still to come
        sock.settimeout(1.0)
        with pytest.raises(TimeoutError):
            sock.recv(65536)
        sock.settimeout(WAIT_S)
        sock.sendall(b"idle v=1i 1003")
        assert sock.recv(65536).startswith(b"HTTP/1.1 204 No Content\r\n")


def test_write_answers_carry_their_connection_header(server: HttpServer) -> None:
    """The 204 a write gets (built once a second) says when the connection closes."""
    write = b"POST /influxdb/v1/write?precision=ms HTTP/1.1\r\nContent-Length: 11\r\n"
    with socket.create_connection(("127.0.0.1", server.port), timeout=WAIT_S) as sock:
        sock.sendall(write + b"\r\nhd v=1i 100")
        head = sock.recv(65536)
        assert head.startswith(b"HTTP/1.1 204 No Content\r\nServer: gnomon\r\nDate: ")
        assert head.endswith(b"\r\n\r\n") and b"Connection" not in head
        sock.sendall(write + b"Connection: close\r\n\r\nhd v=2i 101")
        last = read_until_closed(sock)
    assert last.startswith(b"HTTP/1.1 204 No Content\r\n"), last
    assert last.endswith(b"\r\nConnection: close\r\n\r\n"), last


def test_writes_batched_together_are_answered_each_on_its_own(tmp_path: Path) -> None:
    """Writes that arrive together are written as one body; when that body is refused, each
    is written alone and gets its own answer."""
    with open_standalone(str(tmp_path / "data"), wal_sync="never") as engine:
        sql = SqlExecutor(engine)
        app = HttpApp(
            ingestor=Ingestor(engine),
            execute=sql.execute,
            metrics=Registry(),
            max_body_bytes=LIMIT,
            healthy=lambda: True,
        )
        ms = {"precision": ["ms"]}
        answers = app.influx_writes(
            [(b"b_cpu,host=a v=1i 1", ms), (b"b_cpu,host=b v=2i 2", ms), (b"b_mem free=3 5", ms)]
        )
        assert [a.status for a in answers if isinstance(a, Response)] == [204, 204, 204]
        answers = app.influx_writes(
            [
                (b"b_cpu,host=c v=3i 3", ms),
                (b"b_cpu,host=d v=1.5 4", ms),  # v is an integer column
                (b"b_cpu,host=e v=5i 5", {"db": ["other"]}),
                (b"b_cpu,host=f v=6i 6", ms),
            ]
        )
        ok, float_v, other_db, ok_too = answers
        assert isinstance(ok, Response) and isinstance(ok_too, Response)
        assert isinstance(float_v, InvalidArgument) and "Value type is not same" in str(float_v)
        assert isinstance(other_db, InvalidArgument) and "'other' does not exist" in str(other_db)
        rows = sql.execute("SELECT host, v FROM b_cpu ORDER BY timestamp").table().to_pylist()
        assert rows == [{"host": h, "v": v} for h, v in zip("abcf", (1, 2, 3, 6), strict=True)]
        assert sql.execute("SELECT free FROM b_mem").table().to_pylist() == [{"free": 3.0}]


def test_concurrent_small_writes_each_get_their_answer(server: HttpServer) -> None:
    clients = 16
    statuses: list[int] = []

    def write(k: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=WAIT_S)
        for i in range(5):
            bad = k == 0 and i == 2
            value = "1.5" if bad else f"{i}i"
            body = f"c_cpu,client=c{k} v={value} {k * 100 + i}".encode()
            conn.request("POST", "/influxdb/v1/write?precision=ms", body=body)
            resp = conn.getresponse()
            resp.read()
            statuses.append(resp.status)
        conn.close()

    # One write first: it fixes v's type as integer for those that follow.
    write(1)
    threads = [threading.Thread(target=write, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT_S)
    assert sorted(statuses) == [204] * (5 * (clients + 1) - 1) + [400]


def test_small_writes_arriving_during_a_sync_go_as_one_batch_after_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While the loop syncs a batch of small writes, the writes that arrive wait in their
    connections (none of them is logged or readable yet) and then go as one batch: one
    conversion and one WAL record for all of them, each answered once that record is
    durable."""
    real_fdatasync = os.fdatasync
    held, release = threading.Event(), threading.Event()
    holding = False

    def fdatasync(fd: int) -> None:
        if holding:
            held.set()
            assert release.wait(WAIT_S)
        real_fdatasync(fd)

    monkeypatch.setattr(os, "fdatasync", fdatasync)
    with open_standalone(str(tmp_path / "data")) as engine:
        sql = SqlExecutor(engine)
        ingestor = Ingestor(engine)
        batches: list[int] = []

        def start_writes(tables: Sequence[TableRows]) -> Logged | None:
            batches.append(sum(rows.num_rows for rows in tables))
            return ingestor.start_write_all(tables)

        app = HttpApp(
            ingestor=ingestor,
            execute=sql.execute,
            metrics=Registry(),
            max_body_bytes=LIMIT,
            healthy=lambda: True,
            start_writes=start_writes,
        )
        running = HttpServer(app, port=0)
        running.start()
        conns = [
            http.client.HTTPConnection("127.0.0.1", running.port, timeout=WAIT_S) for _ in range(4)
        ]
        try:
            path = "/influxdb/v1/write?precision=ms"
            conns[0].request("POST", path, body=b"e_cpu v=0i 1")
            first = conns[0].getresponse()
            first.read()
            assert first.status == 204  # the table exists from here on
            for conn in conns[1:]:  # connected (accepted) before the sync, as keep-alive
                conn.request("GET", "/health")
                ready = conn.getresponse()
                ready.read()
                assert ready.status == 200
            holding = True
            conns[0].request("POST", path, body=b"e_cpu v=1i 2")
            assert held.wait(WAIT_S)
            for i, conn in enumerate(conns[1:], start=2):
                conn.request("POST", path, body=f"e_cpu v={i}i {i + 1}".encode())
            count = "SELECT count(*) AS n FROM e_cpu"
            assert sql.execute(count).table().to_pylist() == [{"n": 2}]
            holding = False
            release.set()
            for conn in conns:
                answer = conn.getresponse()
                answer.read()
                assert answer.status == 204
            assert batches == [1, 1, 3]
            assert sql.execute(count).table().to_pylist() == [{"n": 5}]
        finally:
            release.set()
            for conn in conns:
                conn.close()
            running.stop(grace_s=5.0)


def test_a_batch_of_small_writes_is_answered_in_the_pass_of_the_loop_that_answers_it(
    tmp_path: Path,
) -> None:
    """Each write of a batch gets its answer straight from the batch's answer: one pass of the
    loop takes the batch, makes its record durable and answers every write in it, with no
    further pass per write."""
    ms = {"precision": ["ms"]}
    with open_standalone(str(tmp_path / "data"), wal_sync="never") as engine:
        app = HttpApp(
            ingestor=Ingestor(engine),
            execute=SqlExecutor(engine).execute,
            metrics=Registry(),
            max_body_bytes=LIMIT,
            healthy=lambda: True,
        )
        app.influx_write(b"g_cpu v=0i 1", ms)  # the table exists: the loop writes to it
        loop = asyncio.new_event_loop()
        pool = concurrent.futures.ThreadPoolExecutor(1)
        try:
            writes = Writes(app, pool, loop)
            answers: list[Response | Exception] = []
            writes.add(b"g_cpu v=1i 2", ms, answers.append)
            writes.add(b"g_cpu v=2i 3", ms, answers.append)
            passes = 0
            while len(answers) < 2 and passes < 10:
                loop.call_soon(loop.stop)
                loop.run_forever()
                passes += 1
        finally:
            pool.shutdown()
            loop.close()
    assert [a.status for a in answers if isinstance(a, Response)] == [204, 204]
    assert passes == 1


def test_a_small_write_is_answered_once_its_record_is_durable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The loop appends a small write to an existing table itself, syncs the WAL and answers
    it once durable; other requests wait for that sync (the price of no thread hand-off per
    write) and are answered once it ends."""
    real_fdatasync = os.fdatasync
    held, release = threading.Event(), threading.Event()
    holding = False

    def fdatasync(fd: int) -> None:
        if holding:
            held.set()
            assert release.wait(WAIT_S)
        real_fdatasync(fd)

    monkeypatch.setattr(os, "fdatasync", fdatasync)
    with open_standalone(str(tmp_path / "data")) as engine:
        sql = SqlExecutor(engine)
        app = HttpApp(
            ingestor=Ingestor(engine),
            execute=sql.execute,
            metrics=Registry(),
            max_body_bytes=LIMIT,
            healthy=lambda: True,
        )
        running = HttpServer(app, port=0)
        running.start()
        try:
            conn = http.client.HTTPConnection("127.0.0.1", running.port, timeout=WAIT_S)
            conn.request("POST", "/influxdb/v1/write?precision=ms", body=b"d_cpu v=1i 1")
            first = conn.getresponse()
            first.read()
            assert first.status == 204
            holding = True
            conn.request("POST", "/influxdb/v1/write?precision=ms", body=b"d_cpu v=2i 2")
            assert held.wait(WAIT_S)
            # The loop is in the held sync of the second write: neither it nor another
            # request is answered until the sync ends.
            other = socket.create_connection(("127.0.0.1", running.port), timeout=0.2)
            other.sendall(b"GET /health HTTP/1.1\r\nHost: gnomon\r\n\r\n")
            with pytest.raises(TimeoutError):
                other.recv(1024)
            conn.sock.settimeout(0.2)
            with pytest.raises(TimeoutError):
                conn.sock.recv(1024, socket.MSG_PEEK)
            holding = False
            release.set()
            conn.sock.settimeout(WAIT_S)
            assert conn.getresponse().status == 204
            other.settimeout(WAIT_S)
            assert other.recv(1024).startswith(b"HTTP/1.1 200")
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", running.port, timeout=WAIT_S)
            conn.request("POST", "/influxdb/v1/write?precision=ms", body=b"d_cpu v=3i 3")
            assert conn.getresponse().status == 204
            rows = sql.execute("SELECT v FROM d_cpu ORDER BY timestamp").table().to_pylist()
            assert rows == [{"v": 1}, {"v": 2}, {"v": 3}]
            other.close()
            conn.close()
        finally:
            release.set()
            running.stop(grace_s=5.0)
