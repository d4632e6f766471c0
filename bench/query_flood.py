"""One read-only user floods a standalone server (authentication on, per-user limits set)
with heavy queries (``--flood`` clients, each asking once, or with ``--again`` asking again
as soon as it is answered) while another user asks ``SELECT 1`` one at a time: that user's latency
(p50, p99, max) during the flood, beside its latency on the idle server in the same run, and
how every flooding request was answered (run, refused naming the limit) and how long the
slowest took against the queue timeout plus a run alone.

    python -m bench.query_flood --flood 200
    python -m bench.query_flood --flood 200 --again

The flood's query is a nested-loop join of ``--rows`` x ``--rows`` pairs: seconds of CPU and
no memory to speak of. The server's limits are the security tests' (4 queries running, 2 per
user; 16 queued, 4 per user; a 10 s queue timeout).
"""

from __future__ import annotations

import argparse
import base64
import http.client
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent import futures
from pathlib import Path
from typing import Any

from bench.common import standalone_argv
from gnomon_app.devcluster.procs import Server

ROOT = ("root", "root-password")
FLOODER = ("flooder", "flooder-password")
OTHER = ("other", "other-password")
LIMITS = {
    "--max-concurrent-queries": 4,
    "--max-concurrent-queries-per-user": 2,
    "--max-queued-queries": 16,
    "--max-queued-queries-per-user": 4,
    "--query-queue-timeout-s": 10,
}
HEAVY = "SELECT count(*) AS n FROM lim a, lim b WHERE a.v < b.v"
PROBE = "SELECT 1 AS one"


def _admin(data: Path, *args: str) -> None:
    subprocess.run(
        [sys.executable, "-m", "gnomon_app.cli", "admin", *args, "--data-dir", str(data)],
        check=True,
        capture_output=True,
        timeout=120,
    )


def _sql(port: int, query: str, user: tuple[str, str]) -> tuple[int, str, float]:
    """The status and message of ``query`` as ``user``, and its seconds, on a new
    connection (as each dashboard panel or script makes one)."""
    auth = "Basic " + base64.b64encode(f"{user[0]}:{user[1]}".encode()).decode()
    start = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    try:
        conn.request(
            "POST",
            "/sql",
            json.dumps({"query": query}).encode(),
            {"Authorization": auth, "Content-Type": "application/json"},
        )
        resp = conn.getresponse()
        body = json.loads(resp.read())
    finally:
        conn.close()
    return resp.status, str(body.get("message", "")), time.perf_counter() - start


def _quantiles(seconds: list[float]) -> dict[str, float]:
    ordered = sorted(seconds)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return {
        "p50_ms": round(statistics.median(ordered) * 1000, 1),
        "p99_ms": round(p99 * 1000, 1),
        "max_ms": round(ordered[-1] * 1000, 1),
    }


def run(flood: int, probes: int, rows: int, root: Path, *, again: bool) -> dict[str, Any]:
    data = root / "data"
    _admin(data, "users", "create", ROOT[0], "--password", ROOT[1], "--superuser")
    for user, password in (FLOODER, OTHER):
        _admin(data, "users", "create", user, "--password", password)
        _admin(data, "grants", "add", user, "read", "--table", "*")
    limits = [str(x) for kv in LIMITS.items() for x in kv]
    server, ports = Server.start_gnomon(
        standalone_argv(
            data,
            wal_sync="never",
            extra=["--auth", "true", "--auth-cache-s", "600", *limits],
        ),
        log=root / "server.log",
    )
    port = ports["http"]
    try:
        auth = "Basic " + base64.b64encode(f"{ROOT[0]}:{ROOT[1]}".encode()).decode()
        lines = "\n".join(f"lim,host=h{i % 10} v={i} {1_700_000_000_000 + i}" for i in range(rows))
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        conn.request(
            "POST",
            "/influxdb/v1/write?db=public&precision=ms",
            lines.encode(),
            {"Authorization": auth},
        )
        if conn.getresponse().status != 204:
            raise RuntimeError("the rows were not written")
        conn.close()
        status, message, run_s = _sql(port, HEAVY, FLOODER)
        if status != 200:
            raise RuntimeError(f"the heavy query failed: {status} {message}")
        idle = [_sql(port, PROBE, OTHER)[2] for _ in range(probes)]
        stop = threading.Event()

        def flooder() -> list[tuple[int, str, float]]:
            # Once, or (``again``) again as soon as it is answered until the probes are
            # done.
            got = [_sql(port, HEAVY, FLOODER)]
            while again and not stop.is_set():
                got.append(_sql(port, HEAVY, FLOODER))
            return got

        with futures.ThreadPoolExecutor(flood) as pool:
            flooding = [pool.submit(flooder) for _ in range(flood)]
            time.sleep(1.0)  # the flood is in: its queries run and wait
            during: list[float] = []
            try:
                # While the flood lasts (a flood asking once: until its last answer).
                for _ in range(probes):
                    if not again and all(f.done() for f in flooding):
                        break
                    status, message, took = _sql(port, PROBE, OTHER)
                    if status != 200:
                        raise RuntimeError(f"SELECT 1 of the other user failed: {status} {message}")
                    during.append(took)
            finally:
                stop.set()
            answers = [a for f in flooding for a in f.result()]
    finally:
        server.stop()
    outcomes: dict[str, int] = {}
    for status, message, _ in answers:
        limit = next(
            (s for s in ("max_queued_queries_per_user", "query_queue_timeout_s") if s in message),
            "",
        )
        key = str(status) + (f" {limit}" if limit else "")
        outcomes[key] = outcomes.get(key, 0) + 1
    slowest = max(took for *_, took in answers)
    bound = LIMITS["--query-queue-timeout-s"] + run_s
    return {
        "bench": "query_flood",
        "flood": flood,
        "asking_again": again,
        "flood_requests": len(answers),
        "heavy_run_s": round(run_s, 2),
        "select1_idle": _quantiles(idle),
        "select1_during_flood": _quantiles(during),
        "probes_during_flood": len(during),
        "flood_outcomes": outcomes,
        "flood_slowest_s": round(slowest, 2),
        "queue_timeout_plus_run_s": round(bound, 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--flood", type=int, default=200, help="Concurrent heavy queries.")
    parser.add_argument(
        "--probes", type=int, default=200, help="SELECT 1 asked idle, and at most during the flood."
    )
    parser.add_argument(
        "--again",
        action="store_true",
        help="Each flooding client asks again as soon as it is answered, until the probes end "
        "(by default each asks once).",
    )
    parser.add_argument(
        "--rows", type=int, default=48000, help="Rows of each joined side (about 3 s a query)."
    )
    parser.add_argument("--scratch", default=None, help="Where the data directory goes.")
    args = parser.parse_args(argv)
    if min(args.flood, args.probes, args.rows) < 1:
        parser.error("every count must be positive")
    with tempfile.TemporaryDirectory(prefix="bench-flood-", dir=args.scratch) as scratch:
        doc = run(args.flood, args.probes, args.rows, Path(scratch), again=args.again)
    idle, during = doc["select1_idle"], doc["select1_during_flood"]
    print(
        f"SELECT 1 of another user: idle p50 {idle['p50_ms']} ms p99 {idle['p99_ms']} ms; "
        f"during a flood of {doc['flood']} heavy queries ({doc['heavy_run_s']} s each alone) "
        f"p50 {during['p50_ms']} ms p99 {during['p99_ms']} ms max {during['max_ms']} ms "
        f"over {doc['probes_during_flood']} probes"
    )
    print(
        f"flood answers ({doc['flood_requests']} requests): {doc['flood_outcomes']}; "
        f"slowest {doc['flood_slowest_s']} s "
        f"(queue timeout + one run: {doc['queue_timeout_plus_run_s']} s)"
    )
    print(json.dumps(doc, separators=(",", ":")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
