"""The PostgreSQL protocol beside HTTP /sql on one standalone server, and beside a real
PostgreSQL holding the same rows: a point query's p50 over psycopg (a prepared statement) and
over HTTP (JSON, one kept-alive connection), and fetching every row of a table (psycopg's
rows against HTTP's parsed JSON). The PostgreSQL table has the series key (host, ts) as its
primary key, as gnomon's does.

Every client runs in this process, one request at a time, each turn in another order."""

from __future__ import annotations

import argparse
import datetime as dt
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
from testkit.postgres import PostgresServer

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


def _load_postgres(dsn: str, rows: int) -> psycopg.Connection[Any]:
    conn = psycopg.connect(dsn, autocommit=True)
    conn.execute(
        "CREATE TABLE bench (host text, v double precision, ts timestamp, PRIMARY KEY (host, ts))"
    )
    with conn.cursor().copy("COPY bench (host, v, ts) FROM STDIN") as copy:
        for i in range(rows):
            copy.write_row((f"h{i % 100}", i * 0.5, _timestamp(START_MS + i)))
    conn.execute("VACUUM ANALYZE bench")
    return conn


def _timestamp(ms: int) -> dt.datetime:
    return dt.datetime(1970, 1, 1) + dt.timedelta(milliseconds=ms)


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
    postgres = PostgresServer()
    try:
        http = Http(ports["http"])
        _load(http, rows)
        clients = {
            "pg": psycopg.connect(
                f"host=127.0.0.1 port={ports['pg']} user=gnomon dbname=gnomon", autocommit=True
            ),
            "postgres": _load_postgres(postgres.dsn, rows),
        }
        point = "SELECT v FROM bench WHERE host = 'h{}' AND ts = {}"

        def prepared(name: str) -> Callable[[int], object]:
            # Each server's own timestamp parameter: epoch milliseconds for gnomon (as over
            # HTTP), a timestamp for PostgreSQL.
            conn = clients[name]

            def query(i: int) -> object:
                n = i % rows
                ts: object = START_MS + n if name == "pg" else _timestamp(START_MS + n)
                return conn.execute(
                    "SELECT v FROM bench WHERE host = %s AND ts = %s",
                    (f"h{n % 100}", ts),
                    prepare=True,
                ).fetchall()

            return query

        def over_http(i: int) -> object:
            n = i % rows
            return http.sql(point.format(n % 100, START_MS + n))

        def fetch(name: str) -> int:
            everything = "SELECT host, v, ts FROM bench"
            if name == "http":
                return len(http.sql(everything)["rows"])
            return len(clients[name].execute(everything).fetchall())

        names = ("pg", "http", "postgres")
        point_ms: dict[str, list[float]] = {n: [] for n in names}
        fetch_s: dict[str, list[float]] = {n: [] for n in names}
        for turn in range(len(names)):
            for name in names[turn:] + names[:turn]:
                point_ms[name].append(
                    _p50_ms(over_http if name == "http" else prepared(name), queries)
                )
                t0 = time.perf_counter()
                got = fetch(name)
                fetch_s[name].append(time.perf_counter() - t0)
                if got != rows:
                    raise RuntimeError(f"{name} fetched {got} rows of {rows}")
        version = clients["postgres"].info.server_version
        for conn in clients.values():
            conn.close()
    finally:
        server.stop()
        postgres.stop()
    p50 = {k: round(min(v), 3) for k, v in point_ms.items()}
    fetch_best = {k: min(v) for k, v in fetch_s.items()}
    return {
        "bench": "pgwire",
        "rows": rows,
        "queries": queries,
        "postgres_version": f"{version // 10000}.{version % 10000}",
        "point_p50_ms": p50,
        "fetch_rows_per_s": {k: round(rows / v) for k, v in fetch_best.items()},
        # The targets: gnomon over psycopg against gnomon over HTTP.
        "point_p50_vs_http": round(p50["pg"] / p50["http"], 3),
        "fetch_time_vs_http": round(fetch_best["pg"] / fetch_best["http"], 3),
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
        figures = doc[what]
        print(
            f"{what}: gnomon over psycopg {figures['pg']:,} {unit}, gnomon over HTTP /sql "
            f"{figures['http']:,} {unit}, PostgreSQL {doc['postgres_version']} over psycopg "
            f"{figures['postgres']:,} {unit}"
        )
    print(
        f"gnomon psycopg / HTTP: point p50 {doc['point_p50_vs_http']}x (target <= 1.2), "
        f"fetch time {doc['fetch_time_vs_http']}x (target <= 1.0)"
    )
    print(json.dumps(doc, separators=(",", ":")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
