"""Queries of a read-only user that would take a server's memory, against a server process
whose resident memory is watched: a cross join answered whole, a billion values made by
``range``. Each ends with 413 or 503 naming the limit that stopped it, the server's
resident memory stays within its baseline plus ``server_memory_bytes`` plus MARGIN, and a
query whose client disconnects stops: no query runs (the /metrics gauge) and the server's
CPU goes quiet within seconds.

The watcher kills the server if its memory passes that bound, so code that lets such a
query grow fails the test instead of taking the machine down."""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from testkit.wait import wait_until
from tests.security.conftest import ROOT, admin, basic
from tests.server.conftest import Running, start_standalone

pytestmark = pytest.mark.integration

MIB = 1024**2
ROWS = 100_000
QUERY_MEMORY_BYTES = 32 * MIB
SERVER_MEMORY_BYTES = 256 * MIB
RESULT_BYTES = 64 * MIB
#: What the server may hold beyond its budget while a query runs: DataFusion's batches in
#: flight between its operators, the allocator's slack, the Python objects of a request.
MARGIN = 256 * MIB
READER = ("analyst", "analyst-password")

CROSS_JOIN = "SELECT a.s, b.s, a.v, b.v FROM big1 a CROSS JOIN big2 b"
BILLION = "SELECT sum(x) FROM unnest(range(1, 1000000000)) AS t(x)"
#: Ten billion comparisons and one row of answer: minutes of work unless stopped.
PAIRS = "SELECT count(*) AS n FROM big1 a CROSS JOIN big2 b WHERE a.v < b.v"
#: No end, no table (no scan to notice the client is gone), little memory.
ENDLESS = (
    "WITH RECURSIVE t(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM t) SELECT count(*) AS n FROM t"
)


class Watched:
    """The server, and a thread reading its resident memory every few milliseconds that
    kills it past ``bound`` bytes."""

    def __init__(self, running: Running) -> None:
        self.running = running
        self.pid = running.server.proc.pid
        self.bound: int | None = None
        self.killed_at: int | None = None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def rss(self, field: str = "VmRSS") -> int:
        """The server's resident memory, now (VmRSS) or at its peak (VmHWM)."""
        status = Path(f"/proc/{self.pid}/status").read_text()
        line = next(x for x in status.splitlines() if x.startswith(field + ":"))
        return int(line.split()[1]) * 1024

    def _watch(self) -> None:
        while not self._done.wait(0.01):
            bound = self.bound
            if bound is None or self.running.server.proc.poll() is not None:
                continue
            rss = self.rss()
            if rss > bound:
                self.killed_at = rss
                os.kill(self.pid, signal.SIGKILL)

    def stop(self) -> None:
        self._done.set()
        self._thread.join()


def _auth(user: tuple[str, str]) -> dict[str, str]:
    return {"Authorization": basic(*user), "Content-Type": "application/json"}


def _sql(running: Running, query: str, user: tuple[str, str] = READER) -> tuple[int, Any]:
    status, _, body = running.request(
        "POST", "/sql", json.dumps({"query": query}).encode(), _auth(user)
    )
    return status, json.loads(body)


def _gauge(running: Running, series: str) -> float:
    status, _, body = running.request("GET", "/metrics", None, _auth(ROOT))
    assert status == 200
    line = next(x for x in body.decode().splitlines() if x.startswith(series + " "))
    return float(line.split()[-1])


def _running_queries(running: Running) -> float:
    return _gauge(running, 'gnomon_queries{state="running"}')


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.fixture(scope="module")
def watched(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Watched]:
    root = tmp_path_factory.mktemp("runaway")
    data = root / "data"
    admin(data, "users", "create", ROOT[0], "--password", ROOT[1], "--superuser")
    admin(data, "users", "create", READER[0], "--password", READER[1])
    admin(data, "grants", "add", READER[0], "read", "--table", "*")
    running = start_standalone(
        data,
        root / "server.log",
        "--auth",
        "true",
        "--query-memory-bytes",
        str(QUERY_MEMORY_BYTES),
        "--server-memory-bytes",
        str(SERVER_MEMORY_BYTES),
        "--max-result-bytes",
        str(RESULT_BYTES),
    )
    for table in ("big1", "big2"):
        for start in range(0, ROWS, 25_000):
            lines = "\n".join(
                f"{table},s=s{i} v={i} {1_700_000_000_000 + i}"
                for i in range(start, start + 25_000)
            )
            status, _, body = running.request(
                "POST", "/influxdb/v1/write?db=public&precision=ms", lines.encode(), _auth(ROOT)
            )
            assert status == 204, body
    assert _sql(running, "SELECT count(*) AS n FROM big1") == (200, {"rows": [{"n": ROWS}]})
    watched = Watched(running)
    watched.bound = watched.rss() + SERVER_MEMORY_BYTES + MARGIN
    yield watched
    watched.stop()
    running.server.stop()


def _refused(watched: Watched, query: str) -> dict[str, Any]:
    """Run ``query`` as the read-only user; its refusal, checked to have held the server's
    memory within its bound."""
    baseline = watched.rss()
    Path(f"/proc/{watched.pid}/clear_refs").write_text("5")  # VmHWM counts from here
    try:
        status, body = _sql(watched.running, query)
    except (ConnectionError, TimeoutError) as e:
        raise AssertionError(f"no answer (server killed at {watched.killed_at} bytes)") from e
    assert watched.killed_at is None, f"server passed its memory bound: {watched.killed_at}"
    assert status in (413, 503), (status, body)
    peak = watched.rss("VmHWM")
    assert peak - baseline < SERVER_MEMORY_BYTES + MARGIN, (peak, baseline)
    assert _running_queries(watched.running) == 0
    return dict(body)


def test_a_cross_join_answered_whole_is_stopped_by_its_limits(watched: Watched) -> None:
    body = _refused(watched, CROSS_JOIN)
    assert "max_result_bytes" in body["message"] or "server_memory_bytes" in body["message"]


def test_a_billion_values_from_range_are_refused_before_they_are_made(watched: Watched) -> None:
    body = _refused(watched, BILLION)
    assert body["code"] == 413
    assert "range() makes up to 1000000000 values" in body["message"]
    assert "max_generated_values" in body["message"]


@pytest.mark.parametrize("query", [PAIRS, ENDLESS], ids=["cross-join", "recursive"])
def test_a_query_whose_client_disconnects_stops(watched: Watched, query: str) -> None:
    running = watched.running
    body = json.dumps({"query": query}).encode()
    head = (
        f"POST /sql HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Authorization: {basic(*READER)}\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", running.http_port)) as sock:
        sock.sendall(head + body)
        wait_until("running", lambda: _running_queries(running) == 1, timeout_s=10)
    wait_until(
        "stopped 5 s after the disconnect", lambda: _running_queries(running) == 0, timeout_s=5
    )
    # DataFusion's own threads stop too: the server's CPU time stops growing.
    last = [_cpu_s(watched.pid), time.monotonic()]

    def quiet() -> bool:
        if time.monotonic() - last[1] < 1.0:
            return False
        now = _cpu_s(watched.pid)
        idle = now - last[0] < 0.2
        last[:] = [now, time.monotonic()]
        return idle

    # DataFusion's tasks end where they next yield, which an operator working through a
    # join may reach only seconds of CPU later; on a machine busy with other work, that
    # is many more seconds of wall time.
    wait_until("quiet", quiet, timeout_s=60)
    assert watched.killed_at is None
    assert _sql(running, "SELECT count(*) AS n FROM big2") == (200, {"rows": [{"n": ROWS}]})
