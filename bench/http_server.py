"""The HTTP server's cost per request, side by side in one run: gnomon's server from one or
more source trees (before and after a change to it) and the same endpoints served by a server
library (``bench/http_candidates.py``: aiohttp's low-level server, uvicorn with httptools).

Measured on each, in turn per figure: ``GET /health`` latency (the server's own cost per
request, nothing behind it), ``/sql`` latency of a point query (p50, p99) over one
keep-alive connection; line-protocol ingest rows/s of single-line requests from 1 and 8
clients; and rows/s of 500-line requests from one client. Writes are acknowledged once in a
synced WAL (``--wal-sync always``) everywhere. The clients are those of
``bench/small_writes.py`` (prebuilt requests over raw sockets). Then, in this process, the
cost of writing and reading a 6.4 MB gRPC ``SqlQueryResponse`` around its payload
(``node/server/sql_response.py``) against protobuf's.

    python -m bench.http_server --tree before=/path/to/old/checkout --tree after=. \\
        --candidates aiohttp,uvicorn

Prints one line per server and figure, then one JSON line with every figure.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import socket
import statistics
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common import add_tree_option, source_trees, standalone_argv, timed
from bench.small_writes import TIMEOUT_S, Endpoint, _read_answer, _request, run_clients
from bench.tsbs.serving import http_ok, wait_until
from gnomon.proto import common_pb2, storage_pb2
from node.server import sql_response
from testkit.procs import Server, on_free_ports

REPO = Path(__file__).resolve().parents[1]
WRITE_PATH = "/influxdb/v1/write?db=public&precision=ms"
#: Rows the point query's table holds: one per host.
POINT_HOSTS = 100
POINT_QUERY = "SELECT v FROM http_point WHERE host = 'h42' AND timestamp = 1700000000042"
BATCH_LINES = 500


@dataclass
class Served:
    """One server under test: its process and HTTP port."""

    name: str
    process: Server
    port: int


def _start_tree(name: str, tree: Path, root: Path) -> Served:
    """``gnomon standalone`` from the source tree ``tree``. An older tree may not report the
    ports it got, so they are picked here (again if another process takes one first)."""

    def start(ports: tuple[int, ...]) -> Served:
        http, grpc, flight = ports
        process = Server(
            standalone_argv(root / name, http_port=http, grpc_port=grpc, flight_port=flight),
            log=root / f"{name}.log",
            env={"PYTHONPATH": str(tree)},
            cwd=tree,
        )
        return _ready(name, process, http)

    return on_free_ports(start, count=3)[0]


def _start_candidate(name: str, root: Path) -> Served:
    """gnomon's endpoints on the server library ``name`` (this tree's candidates)."""

    def start(ports: tuple[int, ...]) -> Served:
        process = Server(
            [
                sys.executable,
                "-m",
                "bench.http_candidates",
                "--server",
                name,
                "--port",
                str(ports[0]),
                "--data-dir",
                str(root / name),
            ],
            log=root / f"{name}.log",
            env={"PYTHONPATH": str(REPO)},
            cwd=REPO,
        )
        return _ready(name, process, ports[0])

    return on_free_ports(start)[0]


def _ready(name: str, process: Server, port: int) -> Served:
    """``process`` once it serves on ``port`` (PortTaken if another process holds it)."""
    process.wait_for_port(port, timeout_s=60)
    try:
        wait_until(
            lambda: http_ok(f"http://127.0.0.1:{port}/health"), timeout_s=30, what=f"{name} up"
        )
    except BaseException:
        process.stop()
        raise
    return Served(name, process, port)


def _post(port: int, path: str, body: bytes) -> bytes:
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body, method="POST")
    with urllib.request.urlopen(request, timeout=TIMEOUT_S) as answer:
        return bytes(answer.read())


def _latencies(port: int, request: bytes, requests: int) -> list[float]:
    """Seconds per answer to ``request``, sent again and again on one connection."""
    times = []
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        pending = b""
        for i in range(requests + requests // 10):
            began = time.perf_counter()
            sock.sendall(request)
            pending = _read_answer(sock, pending)
            if i >= requests // 10:  # the first tenth warms up
                times.append(time.perf_counter() - began)
    return times


def _sql_latencies(port: int, requests: int) -> list[float]:
    """Seconds per ``/sql`` point query, one after the other on one connection."""
    body = json.dumps({"query": POINT_QUERY}).encode()
    answer = json.loads(_post(port, "/sql", body))
    if answer != {"rows": [{"v": 42.0}]}:
        raise RuntimeError(f"point query answered {answer!r}")
    return _latencies(port, _request(port, "/sql", body), requests)


def _batch_rate(port: int, requests: int, start_ms: int) -> float:
    """Rows/s of one client sending BATCH_LINES-line requests, each after the last answer."""
    bodies = [
        "\n".join(
            f"http_batch,host=h{j % 100} v={j}i {start_ms + i * BATCH_LINES + j}"
            for j in range(BATCH_LINES)
        ).encode()
        for i in range(requests + 1)
    ]
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        pending = b""
        sock.sendall(_request(port, WRITE_PATH, bodies[0]))  # creates the table
        pending = _read_answer(sock, pending)
        began = time.perf_counter()
        for body in bodies[1:]:
            sock.sendall(_request(port, WRITE_PATH, body))
            pending = _read_answer(sock, pending)
        return requests * BATCH_LINES / (time.perf_counter() - began)


def _count(port: int, table: str) -> int:
    body = json.dumps({"query": f"SELECT count(*) AS n FROM {table}"}).encode()
    return int(json.loads(_post(port, "/sql", body))["rows"][0]["n"])


def run(served: Sequence[Served], *, sql_requests: int, rows: int, batches: int) -> dict[str, Any]:
    """Every figure on every server, each figure taken on all servers in turn (the order
    reversed from one figure to the next)."""
    figures: dict[str, dict[str, float]] = {s.name: {} for s in served}
    points = "\n".join(f"http_point,host=h{h} v={h} {1_700_000_000_000 + h}" for h in range(100))
    for s in served:
        _post(s.port, WRITE_PATH, points.encode())

    def each(label: str, measure: Callable[[Served, int], float], step: int) -> None:
        order = served if step % 2 == 0 else list(reversed(served))
        for s in order:
            figures[s.name][label] = measure(s, step)

    def sql(s: Served, _: int) -> float:
        times = _sql_latencies(s.port, sql_requests)
        figures[s.name]["sql_p99_ms"] = round(1000 * _quantile(times, 0.99), 3)
        return round(1000 * statistics.median(times), 3)

    def writes(clients: int) -> Callable[[Served, int], float]:
        def measure(s: Served, step: int) -> float:
            endpoint = Endpoint(s.name, s.port, WRITE_PATH, lambda: 0)
            per_client = max(1, math.ceil(rows / clients))
            start_ms = 1_800_000_000_000 + step * 10_000_000
            return round(run_clients(endpoint, clients, per_client, start_ms))

        return measure

    def health(s: Served, _: int) -> float:
        request = f"GET /health HTTP/1.1\r\nHost: 127.0.0.1:{s.port}\r\n\r\n".encode()
        return round(1e6 * statistics.median(_latencies(s.port, request, sql_requests)))

    each("health_p50_us", health, 0)
    each("sql_p50_ms", sql, 1)
    each("writes_1_client_rows_s", writes(1), 2)
    each("writes_8_clients_rows_s", writes(8), 3)
    each(
        f"batches_{BATCH_LINES}_lines_rows_s",
        lambda s, step: round(_batch_rate(s.port, batches, 1_900_000_000_000)),
        4,
    )
    stored = {s.name: _count(s.port, "small_writes") for s in served}
    wrong = {name: n for name, n in stored.items() if n != max(stored.values())}
    if wrong:
        raise RuntimeError(f"servers stored different numbers of small writes: {stored}")
    return {
        "bench": "http_server",
        "load_avg_1m": round(os.getloadavg()[0], 2),
        "sql_requests": sql_requests,
        "rows_per_write_figure": rows,
        "batch_requests": batches,
        "figures": figures,
    }


def _quantile(xs: list[float], q: float) -> float:
    ordered = sorted(xs)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def sql_response_figures(repeats: int = 20) -> dict[str, float]:
    """Milliseconds (best of ``repeats``) to write and to read a gRPC ``SqlQueryResponse``
    of 6.4 MB of Arrow batches: around the payload (``node/server/sql_response.py``) and
    through the protobuf library."""
    batches = [os.urandom(64 * 1024) for _ in range(100)]
    header = common_pb2.ResponseHeader(code=200)

    def library_encode() -> bytes:
        payload = storage_pb2.ArrowPayload(record_batches=batches)
        return storage_pb2.SqlQueryResponse(header=header, arrow=payload).SerializeToString()

    data = library_encode()
    if sql_response.encode(header, batches, False).data != data:
        raise RuntimeError("sql_response.encode differs from protobuf's bytes")

    def best(fn: Callable[[], object]) -> float:
        return round(1000 * min(timed(fn) for _ in range(repeats)), 2)

    return {
        "encode_spliced_ms": best(lambda: sql_response.encode(header, batches, False)),
        "encode_protobuf_ms": best(library_encode),
        "decode_in_place_ms": best(lambda: sql_response.decode(data)),
        "decode_protobuf_ms": best(lambda: storage_pb2.SqlQueryResponse.FromString(data)),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_tree_option(parser, "whose gnomon standalone is measured")
    parser.add_argument("--candidates", default="aiohttp,uvicorn", help="Comma separated.")
    parser.add_argument("--sql-requests", type=int, default=2000)
    parser.add_argument("--rows", type=int, default=4000, help="Single-line writes per figure.")
    parser.add_argument("--batches", type=int, default=200, help="500-line requests.")
    args = parser.parse_args(argv)
    trees = source_trees(parser, args.tree, REPO)
    candidates = [c.strip() for c in args.candidates.split(",") if c.strip()]
    served: list[Served] = []
    with tempfile.TemporaryDirectory(prefix="http-server-") as scratch:
        root = Path(scratch)
        try:
            for name, path in trees:
                served.append(_start_tree(name, path, root))
            for name in candidates:
                served.append(_start_candidate(name, root))
            doc = run(served, sql_requests=args.sql_requests, rows=args.rows, batches=args.batches)
            doc["grpc_sql_response_6_4_mb"] = sql_response_figures()
        finally:
            for s in served:
                s.process.stop()
    for name, figures in doc["figures"].items():
        print(f"{name:>10}  " + "  ".join(f"{k} {v}" for k, v in figures.items()))
    print(
        "gRPC SqlQueryResponse, 6.4 MB: "
        + "  ".join(f"{k} {v}" for k, v in doc["grpc_sql_response_6_4_mb"].items())
    )
    print(json.dumps(doc, separators=(",", ":")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
