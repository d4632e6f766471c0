"""The query limits of a running server, each meeting a query past it while the server keeps
serving the others: many heavy queries against a small cap on concurrent queries (each one
answers or is turned away after its wait in the queue, with a message saying so), a
statement over the size limit, a query over its memory budget, an answer over the size
limit."""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest

from gnomon.proto import storage_pb2
from tests.server.conftest import Running, start_standalone

ROWS = 3000
CAP = 4
HEAVY = 32
#: A nested-loop join of ROWS x ROWS pairs: seconds of work, little memory.
HEAVY_QUERY = "SELECT count(*) AS n FROM lim a, lim b WHERE a.v < b.v"
HEAVY_ANSWER = ROWS * (ROWS - 1) // 2
#: 9 million distinct values to keep: far past a 32 MiB budget.
GREEDY_QUERY = "SELECT count(DISTINCT a.v * 100000 + b.v) AS n FROM lim a, lim b"
MEMORY_BYTES = 32 * 1024**2
RESULT_BYTES = 1024**2
STATEMENT_BYTES = 4096


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    root = tmp_path_factory.mktemp("limits")
    running = start_standalone(
        root / "data",
        root / "server.log",
        "--max-concurrent-queries",
        str(CAP),
        "--query-queue-timeout-s",
        "1",
        "--max-statement-bytes",
        str(STATEMENT_BYTES),
        "--query-memory-bytes",
        str(MEMORY_BYTES),
        "--max-result-bytes",
        str(RESULT_BYTES),
    )
    lines = "\n".join(f"lim,host=h{i % 10} v={i} {1_700_000_000_000 + i}" for i in range(ROWS))
    status, _, body = running.request(
        "POST", "/influxdb/v1/write?db=public&precision=ms", lines.encode()
    )
    assert status == 204, body
    yield running
    running.server.stop()


def _query(running: Running, sql: str) -> tuple[int, Any]:
    status, _, body = running.request(
        "POST", "/sql", json.dumps({"query": sql}).encode(), {"Content-Type": "application/json"}
    )
    return status, json.loads(body)


def _serving(running: Running) -> None:
    assert running.server.proc.poll() is None
    assert _query(running, "SELECT count(*) AS n FROM lim") == (200, {"rows": [{"n": ROWS}]})


def _peak_rss_bytes(running: Running) -> int:
    status = Path(f"/proc/{running.server.proc.pid}/status").read_text()
    line = next(x for x in status.splitlines() if x.startswith("VmHWM:"))
    return int(line.split()[1]) * 1024


def test_heavy_queries_against_a_small_cap_answer_or_queue_out(limited: Running) -> None:
    with futures.ThreadPoolExecutor(HEAVY) as pool:
        answers = list(pool.map(lambda _: _query(limited, HEAVY_QUERY), range(HEAVY)))
    for status, body in answers:
        if status == 200:
            assert body == {"rows": [{"n": HEAVY_ANSWER}]}
        else:
            assert status == 503, body
            assert f"server busy: {CAP} queries running" in body["message"]
            assert "max_concurrent_queries" in body["message"]
    assert any(status == 200 for status, _ in answers)
    _serving(limited)
    # Every query ran under the memory budget: the server grew by little more than CAP of them.
    assert _peak_rss_bytes(limited) < 1024**3


def test_a_statement_over_the_size_limit(limited: Running) -> None:
    long = "SELECT 1" + " " * STATEMENT_BYTES
    status, body = _query(limited, long)
    assert status == 413, body
    assert f"exceeds the limit of {STATEMENT_BYTES} bytes" in body["message"]
    req = storage_pb2.SqlQueryRequest(sql=long)
    req.context.database = "public"
    with grpc.insecure_channel(limited.grpc_endpoint) as channel:
        resp = channel.unary_unary(
            "/storage.StorageService/SqlQuery",
            request_serializer=storage_pb2.SqlQueryRequest.SerializeToString,
            response_deserializer=storage_pb2.SqlQueryResponse.FromString,
        )(req, timeout=30)
    # The HoraeDB protocol's header has 400 for every refusal of the request itself.
    assert resp.header.code == 400 and "max_statement_bytes" in resp.header.error
    _serving(limited)


def test_a_query_over_its_memory_budget(limited: Running) -> None:
    status, body = _query(limited, GREEDY_QUERY)
    assert status == 413, body
    assert "more memory than its budget (setting query_memory_bytes)" in body["message"]
    _serving(limited)


def test_an_answer_over_the_size_limit(limited: Running) -> None:
    status, body = _query(limited, "SELECT a.v, b.v AS w FROM lim a, lim b LIMIT 200000")
    assert status == 413, body
    assert f"exceeds the server's limit of {RESULT_BYTES} bytes" in body["message"]
    _serving(limited)
