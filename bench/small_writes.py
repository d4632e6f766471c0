"""Small writes: N clients each sending one line of InfluxDB line protocol per HTTP request,
to gnomon and to InfluxDB 1.x side by side, for each N.

Both servers acknowledge a write only once it is in a synced WAL: gnomon with its default
``--wal-sync always`` (an fdatasync before the answer, shared by the writes that arrive
together), InfluxDB with ``wal-fsync-delay = "0s"`` (its WAL fsyncs before answering, one
fsync for the writes waiting). Each client holds one keep-alive connection, opened before
the clock starts, and waits for each answer before its next request; every client writes its
own series, one point per request at increasing timestamps, so every row is kept and the
rows stored are counted at the end.

The client sends prebuilt request bytes over a raw socket and reads just the status line and
headers of each answer: ``http.client`` costs about as much per request as a small write
does in the server, and the clients share the machine with the servers.

    python -m bench.small_writes --clients 1,8,64 --rows 4000

Prints one table (rows/s per system per N and gnomon's ratio to InfluxDB), then one JSON
line with the same figures.
"""

from __future__ import annotations

import argparse
import json
import math
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from bench.tsbs.gnomon_server import GnomonServer
from bench.tsbs.influx import InfluxServer, influxd_path
from bench.tsbs.system import SystemUnavailable

#: What the JSON line and the table call the durability of each system.
DURABILITY = {
    "gnomon": "--wal-sync always: fdatasync of the WAL before each answer, shared by the "
    "writes that arrive together",
    "influxdb": 'wal-fsync-delay = "0s": fsync of the WAL before each answer, shared by '
    "the writes waiting for it",
}
#: Bound on one request's answer.
TIMEOUT_S = 60.0
MEASUREMENT = "small_writes"


class Target(Protocol):
    """A running server taking line protocol over HTTP."""

    name: str

    def stop(self) -> None: ...


@dataclass(frozen=True)
class Endpoint:
    """Where one system takes writes and how it counts what it stored."""

    name: str
    port: int
    path: str
    count: Callable[[], int]


class BenchError(RuntimeError):
    """A server refused a write or stored another number of rows than were sent."""


def _request(port: int, path: str, body: bytes) -> bytes:
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Content-Type: text/plain\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


def _read_answer(sock: socket.socket, pending: bytes) -> bytes:
    """Read one answer (headers and any body) off ``sock``; returns what follows it. Raises
    BenchError unless the status is 2xx."""
    buf = pending
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            raise BenchError("server closed the connection")
        buf += chunk
    head, _, rest = buf.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = lines[0].split(b" ", 2)
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(rest) < length:
        chunk = sock.recv(65536)
        if not chunk:
            raise BenchError("server closed the connection")
        rest += chunk
    if not status[1].startswith(b"2"):
        raise BenchError(f"write refused: {head.decode(errors='replace')} {rest[:500]!r}")
    return rest[length:]


def _client(
    endpoint: Endpoint, client: int, rows: int, start_ms: int, ready: threading.Barrier
) -> None:
    """One client: connect, write one warm-up row, wait for the others, write ``rows``
    requests of one line each, wait for the others again."""
    with socket.create_connection(("127.0.0.1", endpoint.port), timeout=TIMEOUT_S) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        requests = [
            _request(
                endpoint.port,
                endpoint.path,
                f"{MEASUREMENT},client=c{client} v={i}i {start_ms + i}".encode(),
            )
            for i in range(rows + 1)
        ]
        pending = b""
        sock.sendall(requests[0])
        pending = _read_answer(sock, pending)
        ready.wait(TIMEOUT_S)
        for request in requests[1:]:
            sock.sendall(request)
            pending = _read_answer(sock, pending)
        ready.wait(TIMEOUT_S)


def run_clients(endpoint: Endpoint, clients: int, rows: int, start_ms: int) -> float:
    """Rows per second of ``clients`` clients writing ``rows`` single-line requests each
    (warm-up rows not counted)."""
    ready = threading.Barrier(clients + 1)
    errors: list[BaseException] = []

    def one(k: int) -> None:
        try:
            _client(endpoint, k, rows, start_ms, ready)
        except BaseException as e:
            errors.append(e)
            ready.abort()

    threads = [threading.Thread(target=one, args=(k,), daemon=True) for k in range(clients)]
    for t in threads:
        t.start()
    try:
        ready.wait(TIMEOUT_S)
        began = time.perf_counter()
        ready.wait(TIMEOUT_S * max(1, rows))
        elapsed = time.perf_counter() - began
    except threading.BrokenBarrierError:
        elapsed = math.nan
    for t in threads:
        t.join(TIMEOUT_S)
    if errors:
        raise BenchError(f"{endpoint.name}, {clients} clients: {errors[0]!r}")
    return clients * rows / elapsed


def _gnomon(root: Path) -> tuple[GnomonServer, Endpoint]:
    server = GnomonServer(root / "gnomon")

    def count() -> int:
        table = server.query_http(f"SELECT count(*) AS n FROM {MEASUREMENT}")
        return int(table.column("n")[0].as_py())

    path = "/influxdb/v1/write?db=public&precision=ms"
    return server, Endpoint("gnomon", server.http_port, path, count)


def _influx(root: Path) -> tuple[InfluxServer, Endpoint]:
    server = InfluxServer(root / "influxdb", binary=influxd_path())

    def count() -> int:
        table = server.query(f"SELECT count(v) FROM {MEASUREMENT}")
        return int(table.column("count")[0].as_py())

    path = "/write?db=benchmark&precision=ms"
    return server, Endpoint("influxdb", server.http_port, path, count)


def run(clients: Sequence[int], rows: int, root: Path, systems: Sequence[str]) -> dict[str, Any]:
    """Start the systems, run every N on each (alternating which goes first), check the
    rows stored; the figures as the JSON line holds them."""
    starters: dict[str, Callable[[Path], tuple[Target, Endpoint]]] = {
        "gnomon": _gnomon,
        "influxdb": _influx,
    }
    servers: list[Target] = []
    endpoints: list[Endpoint] = []
    unavailable: dict[str, str] = {}
    try:
        for name in systems:
            try:
                server, endpoint = starters[name](root)
            except SystemUnavailable as e:
                unavailable[name] = str(e)
                continue
            servers.append(server)
            endpoints.append(endpoint)
        rates: dict[str, dict[int, float]] = {e.name: {} for e in endpoints}
        sent = 0
        for i, n in enumerate(clients):
            per_client = max(1, math.ceil(rows / n))
            order = endpoints if i % 2 == 0 else endpoints[::-1]
            start_ms = 1_700_000_000_000 + i * 10_000_000
            for endpoint in order:
                rates[endpoint.name][n] = run_clients(endpoint, n, per_client, start_ms)
            sent += n * (per_client + 1)
        stored = {e.name: e.count() for e in endpoints}
        wrong = {name: got for name, got in stored.items() if got != sent}
        if wrong:
            raise BenchError(f"{sent} rows sent but stored: {wrong}")
    finally:
        for server in servers:
            server.stop()
    doc: dict[str, Any] = {
        "bench": "small_writes",
        "clients": list(clients),
        "rows_per_n": rows,
        "rows_per_s": {
            name: {str(n): round(r) for n, r in by_n.items()} for name, by_n in rates.items()
        },
        "durability": {e.name: DURABILITY[e.name] for e in endpoints},
        "rows_stored": stored,
        "unavailable": unavailable,
    }
    if "gnomon" in rates and "influxdb" in rates:
        doc["ratio_gnomon_to_influxdb"] = {
            str(n): round(rates["gnomon"][n] / rates["influxdb"][n], 2) for n in clients
        }
    return doc


def table(doc: dict[str, Any]) -> str:
    """The figures as a text table, with each system's durability under it."""
    systems = list(doc["rows_per_s"])
    ratio = doc.get("ratio_gnomon_to_influxdb")
    header = ["clients", *(f"{s} rows/s" for s in systems)] + (["gnomon/influxdb"] if ratio else [])
    lines = [header]
    for n in doc["clients"]:
        row = [str(n), *(str(doc["rows_per_s"][s][str(n)]) for s in systems)]
        if ratio:
            row.append(f"{ratio[str(n)]:.2f}")
        lines.append(row)
    widths = [max(len(r[i]) for r in lines) for i in range(len(header))]
    out = ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in lines]
    out += [f"{name}: {text}" for name, text in doc["durability"].items()]
    out += [f"{name}: not run: {why}" for name, why in doc["unavailable"].items()]
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", default="1,8,64", help="Client counts, comma separated.")
    parser.add_argument(
        "--rows", type=int, default=4000, help="Rows (requests) per client count, all clients."
    )
    parser.add_argument("--systems", default="gnomon,influxdb")
    parser.add_argument("--scratch", default=None, help="Where the data directories go.")
    args = parser.parse_args(argv)
    clients = [int(c) for c in args.clients.split(",") if c.strip()]
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    unknown = sorted(set(systems) - {"gnomon", "influxdb"})
    if unknown or not clients or min(clients) < 1 or args.rows < 1:
        parser.error("clients must be positive counts, systems gnomon and/or influxdb")
    with tempfile.TemporaryDirectory(prefix="small-writes-", dir=args.scratch) as scratch:
        doc = run(clients, args.rows, Path(scratch), systems)
    print(table(doc))
    print(json.dumps(doc, separators=(",", ":")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
