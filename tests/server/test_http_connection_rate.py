"""The rate of new HTTP connections per client address (``max_connections_per_s``): a
connection past it is answered 429 and closed, counted on /metrics, and the connections
already open go on being served."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from gnomon.metrics import Registry
from node.backends import open_standalone
from node.ingest.writer import Ingestor
from node.security.connections import ConnectionRate
from node.server.http import HttpApp, HttpServer
from node.sql.result import QueryResult
from testkit.clock import Clock
from tests.server.conftest import read_until_closed

pytestmark = pytest.mark.unit

WAIT_S = 30.0


def test_each_address_gets_its_own_bucket_refilled_at_the_rate() -> None:
    clock = Clock()
    rate = ConnectionRate(2.0, clock=clock)
    assert [rate.admit("10.0.0.1") for _ in range(3)] == [True, True, False]
    assert rate.admit("10.0.0.2")  # another address is not held back by the first
    clock.now += 0.5  # one more token for 10.0.0.1
    assert [rate.admit("10.0.0.1") for _ in range(2)] == [True, False]
    clock.now += 60.0  # refilled to the burst, not past it
    assert [rate.admit("10.0.0.1") for _ in range(3)] == [True, True, False]
    with pytest.raises(ValueError, match="positive"):
        ConnectionRate(0)


def test_a_rate_under_one_a_second_still_admits_one_connection() -> None:
    clock = Clock()
    rate = ConnectionRate(0.1, clock=clock)
    assert [rate.admit("a"), rate.admit("a")] == [True, False]
    clock.now += 10.0
    assert rate.admit("a")


@pytest.fixture
def limited(tmp_path: Path) -> Iterator[tuple[HttpServer, Registry]]:
    metrics = Registry()
    with open_standalone(str(tmp_path / "data"), wal_sync="never") as engine:
        app = HttpApp(
            ingestor=Ingestor(engine),
            execute=lambda sql: QueryResult.affected(0),
            metrics=metrics,
            max_body_bytes=1024,
            healthy=lambda: True,
        )
        # One connection, then one every 1000 s: the second is refused however slow the test.
        server = HttpServer(app, port=0, max_connections_per_s=0.001)
        server.start()
        try:
            yield server, metrics
        finally:
            server.stop(grace_s=5.0)


def test_a_connection_over_the_rate_is_answered_429_and_closed(
    limited: tuple[HttpServer, Registry],
) -> None:
    server, metrics = limited
    health = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
    with socket.create_connection(("127.0.0.1", server.port), timeout=WAIT_S) as first:
        first.sendall(health)
        assert first.recv(65536).startswith(b"HTTP/1.1 200 OK")
        with socket.create_connection(("127.0.0.1", server.port), timeout=WAIT_S) as second:
            answer = read_until_closed(second)
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 429 Too Many Requests\r\n"), head
        assert b"Retry-After: 1" in head and b"Connection: close" in head
        error = json.loads(body)
        assert error["code"] == 429
        assert "127.0.0.1" in error["message"] and "max_connections_per_s" in error["message"]
        # The connection admitted before keeps being served.
        first.sendall(health)
        assert first.recv(65536).startswith(b"HTTP/1.1 200 OK")
    assert metrics.connections_refused.value("http", "rate") == 1
    assert 'gnomon_connections_refused_total{protocol="http",limit="rate"} 1' in metrics.render()
