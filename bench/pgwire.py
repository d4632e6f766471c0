"""The PostgreSQL protocol beside HTTP /sql on one standalone server: a point query's p50
over psycopg (a prepared statement) and over HTTP (JSON, one kept-alive connection), and
fetching every row of a table (psycopg's rows against HTTP's parsed JSON).

Both clients run in this process, one request at a time, alternating which goes first."""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import psycopg

from bench.common import standalone_argv
from gnomon_app.devcluster.procs import Server, free_port

CREATE = (
    "CREATE TABLE bench (host STRING TAG, v DOUBLE, ts TIMESTAMP NOT NULL, TIMESTAMP KEY(ts)) "
    "ENGINE=Analytic"
)
START_MS = 1_700_000_000_000
#: Rows per INSERT while loading (well under max_statement_bytes).
CHUNK = 5000


class Http:
    def __init__(self, port: int) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)

    def sql(self, query: str) -> Any:
        self.conn.request("POST", "/sql", json.dumps({"query": query}).encode())
        resp = self.conn.getresponse()
        body = resp.read()
        if resp.status != 200:
            raise RuntimeError(f"HTTP {resp.status}: {body[:200]!r}")
        return json.loads(body)


def _load(http: Http, rows: int) -> None:
    http.sql(CREATE)
    for start in range(0, rows, CHUNK):
        values = ", ".join(
            f"('h{i % 100}', {i * 0.5}, {START_MS + i})"
            for i in range(start, min(rows, start + CHUNK))
        )
        http.sql(f"INSERT INTO bench (host, v, ts) VALUES {values}")


def _p50_ms(fn: Callable[[int], object], queries: int) -> float:
    times = []
    for i in range(queries):
        t0 = time.perf_counter()
        fn(i)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def run(rows: int, queries: int, root: Path) -> dict[str, Any]:
    server, ports = Server.start_gnomon(
        standalone_argv(root / "data", wal_sync="never", extra=["--pg-port", str(free_port())]),
        log=root / "server.log",
    )
    try:
        http = Http(ports["http"])
        _load(http, rows)
        pg = psycopg.connect(
            f"host=127.0.0.1 port={ports['pg']} user=gnomon dbname=gnomon", autocommit=True
        )
        point = "SELECT v FROM bench WHERE host = 'h{}' AND ts = {}"

        def over_pg(i: int) -> object:
            n = i % rows
            return pg.execute(
                "SELECT v FROM bench WHERE host = %s AND ts = %s",
                (f"h{n % 100}", START_MS + n),
                prepare=True,
            ).fetchall()

        def over_http(i: int) -> object:
            n = i % rows
            return http.sql(point.format(n % 100, START_MS + n))

        point_ms: dict[str, list[float]] = {"pg": [], "http": []}
        fetch_s: dict[str, list[float]] = {"pg": [], "http": []}
        everything = "SELECT host, v, ts FROM bench"
        for turn in range(2):
            order = ("pg", "http") if turn == 0 else ("http", "pg")
            for name in order:
                point_ms[name].append(_p50_ms(over_pg if name == "pg" else over_http, queries))
                t0 = time.perf_counter()
                got = (
                    len(pg.execute(everything).fetchall())
                    if name == "pg"
                    else len(http.sql(everything)["rows"])
                )
                fetch_s[name].append(time.perf_counter() - t0)
                if got != rows:
                    raise RuntimeError(f"{name} fetched {got} rows of {rows}")
        pg.close()
    finally:
        server.stop()
    return {
        "bench": "pgwire",
        "rows": rows,
        "queries": queries,
        "point_p50_ms": {k: round(min(v), 3) for k, v in point_ms.items()},
        "fetch_rows_per_s": {k: round(rows / min(v)) for k, v in fetch_s.items()},
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000, help="Rows loaded and fetched.")
    parser.add_argument("--queries", type=int, default=500, help="Point queries per client.")
    parser.add_argument("--scratch", default=None, help="Where the data directory goes.")
    args = parser.parse_args(argv)
    if args.rows < 1 or args.queries < 1:
        parser.error("rows and queries must be positive")
    with tempfile.TemporaryDirectory(prefix="pgwire-", dir=args.scratch) as scratch:
        doc = run(args.rows, args.queries, Path(scratch))
    for what, unit in (("point_p50_ms", "ms"), ("fetch_rows_per_s", "rows/s")):
        print(f"{what}: psycopg {doc[what]['pg']:,} {unit}, HTTP /sql {doc[what]['http']:,} {unit}")
    print(json.dumps(doc, separators=(",", ":")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
