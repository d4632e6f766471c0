"""The query limits of a running server, each meeting a query past it while the server keeps
serving the others: many heavy queries against a small cap on concurrent queries and a
server memory budget smaller than the cap's worth of query pools (each one answers, is
turned away after its wait in the queue, or is refused the memory the running ones hold,
with a message saying so, and the server's resident memory stays within its baseline plus
the budget), a statement over the size limit, a query over its memory budget, an answer
over the size limit; each refusal is counted on /metrics under the limit that made it."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest

from gnomon.errors import DeadlineExceeded
from gnomon.proto import storage_pb2
from node.sql.cancel import Queries
from tests.server.conftest import Running, start_standalone

pytestmark = pytest.mark.integration

ROWS = 3000
CAP = 4
HEAVY = 32
#: A nested-loop join of ROWS x ROWS pairs: seconds of work, little memory.
HEAVY_QUERY = "SELECT count(*) AS n FROM lim a, lim b WHERE a.v < b.v"
HEAVY_ANSWER = ROWS * (ROWS - 1) // 2
#: 9 million distinct values to keep: far past a 32 MiB budget.
GREEDY_QUERY = "SELECT count(DISTINCT a.v * 100000 + b.v) AS n FROM lim a, lim b"
MEMORY_BYTES = 32 * 1024**2
#: Room for three of the four queries' pools and their scans' batches: the fourth running
#: query is refused its memory.
SERVER_MEMORY_BYTES = 3 * MEMORY_BYTES + 16 * 1024**2
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
        "--server-memory-bytes",
        str(SERVER_MEMORY_BYTES),
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


def _metric(running: Running, series: str) -> float:
    """The value of ``series`` (a name with its labels) on the server's /metrics."""
    status, _, body = running.request("GET", "/metrics")
    assert status == 200
    prefix = series + " "
    lines = [x for x in body.decode().splitlines() if x.startswith(prefix)]
    assert len(lines) == 1, f"{series} not on /metrics"
    return float(lines[0][len(prefix) :])


def _refused(running: Running, limit: str) -> float:
    return _metric(running, f'gnomon_queries_refused_total{{limit="{limit}"}}')


def _rss_bytes(running: Running, field: str) -> int:
    """The server process's resident memory, now (VmRSS) or at its peak (VmHWM)."""
    status = Path(f"/proc/{running.server.proc.pid}/status").read_text()
    line = next(x for x in status.splitlines() if x.startswith(field + ":"))
    return int(line.split()[1]) * 1024


def test_heavy_queries_against_a_small_cap_answer_or_queue_out(limited: Running) -> None:
    refused_before = {k: _refused(limited, k) for k in ("concurrency", "server_memory_bytes")}
    _serving(limited)  # the query path warmed up before the baseline is taken
    baseline = _rss_bytes(limited, "VmRSS")
    # The peak counted from here (Linux: "5" to clear_refs resets VmHWM).
    Path(f"/proc/{limited.server.proc.pid}/clear_refs").write_text("5")
    with futures.ThreadPoolExecutor(HEAVY) as pool:
        answers = list(pool.map(lambda _: _query(limited, HEAVY_QUERY), range(HEAVY)))
    peak = _rss_bytes(limited, "VmHWM")
    busy = out_of_memory = 0
    for status, body in answers:
        if status == 200:
            assert body == {"rows": [{"n": HEAVY_ANSWER}]}
            continue
        assert status == 503, body
        if "server busy" in body["message"]:
            assert f"server busy: {CAP} queries running" in body["message"]
            assert "max_concurrent_queries" in body["message"]
            busy += 1
        else:
            assert "over the server's memory budget" in body["message"], body
            assert "server_memory_bytes" in body["message"]
            out_of_memory += 1
    assert any(status == 200 for status, _ in answers)
    assert _refused(limited, "concurrency") - refused_before["concurrency"] == busy
    refused_memory = _refused(limited, "server_memory_bytes")
    assert refused_memory - refused_before["server_memory_bytes"] == out_of_memory
    assert _metric(limited, 'gnomon_queries{state="queued"}') == 0
    assert _metric(limited, "gnomon_query_memory_held_bytes") == 0
    _serving(limited)
    # What the queries held, the server's budget bounded.
    assert peak - baseline < SERVER_MEMORY_BYTES, (peak, baseline)


def test_a_statement_over_the_size_limit(limited: Running) -> None:
    refused_before = _refused(limited, "statement_bytes")
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
    assert _refused(limited, "statement_bytes") - refused_before == 2
    _serving(limited)


def test_a_query_over_its_memory_budget(limited: Running) -> None:
    refused_before = _refused(limited, "memory_bytes")
    status, body = _query(limited, GREEDY_QUERY)
    assert status == 413, body
    assert "more memory than its budget (setting query_memory_bytes)" in body["message"]
    assert _refused(limited, "memory_bytes") - refused_before == 1
    _serving(limited)


def test_an_answer_over_the_size_limit(limited: Running) -> None:
    refused_before = _refused(limited, "result_bytes")
    status, body = _query(limited, "SELECT a.v, b.v AS w FROM lim a, lim b LIMIT 200000")
    assert status == 413, body
    assert f"exceeds the server's limit of {RESULT_BYTES} bytes" in body["message"]
    assert _refused(limited, "result_bytes") - refused_before == 1
    _serving(limited)


def test_the_limits_are_on_metrics(limited: Running) -> None:
    for setting, value in (
        ("max_concurrent_queries", CAP),
        ("query_queue_timeout_s", 1),
        ("max_statement_bytes", STATEMENT_BYTES),
        ("query_memory_bytes", MEMORY_BYTES),
        ("max_result_bytes", RESULT_BYTES),
        ("server_memory_bytes", SERVER_MEMORY_BYTES),
    ):
        assert _metric(limited, f'gnomon_query_limit{{setting="{setting}"}}') == value
    # This scrape is no query: none runs while it is answered.
    assert _metric(limited, 'gnomon_queries{state="running"}') == 0


def test_a_query_past_its_deadline_is_counted_once() -> None:
    queries = Queries(timeout_s=60.0)
    with queries.running() as token:
        token.deadline = time.monotonic() - 1.0
        # Every scan of the query checks; the query is one refusal.
        for _ in range(3):
            with pytest.raises(DeadlineExceeded, match="query_timeout_s"):
                token.check()
    assert queries.refusals.counts()["timeout"] == 1
