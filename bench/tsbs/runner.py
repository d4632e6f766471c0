"""The TSBS cpu-only benchmark, all systems in one process tree: load the same data into each
(interleaved, several repetitions, same batches and client workers), cross-check every query's
answers, then time the queries (interleaved, several repetitions)."""

from __future__ import annotations

import itertools
import logging
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, TypeVar

import pyarrow as pa
from rich.console import Console
from rich.panel import Panel
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from bench.tsbs import check
from bench.tsbs.cpu_only import INTERVAL_MS, cpu_only_batches
from bench.tsbs.duck import DuckDb, write_parquet
from bench.tsbs.gnomon_server import GnomonServer
from bench.tsbs.influx import InfluxServer, influxd_path
from bench.tsbs.payloads import horaedb_request, line_protocol
from bench.tsbs.queries import Query, Span, generate
from bench.tsbs.serving import wait_quiet, wait_until

log = logging.getLogger("gnomon.bench.tsbs")

START_MS = 1_451_606_400_000  # 2016-01-01, as TSBS
SYSTEMS = ("gnomon", "influxdb", "duckdb")
#: Pause before each timed query, after which every system must also be idle
#: (:func:`serving.wait_quiet`): what a system does after answering (Go's garbage collector,
#: DuckDB's workers winding down, a compaction) must not land in the next system's time.
PAUSE_S = 0.1
#: How long InfluxDB may take to settle (snapshot and compact) after a load.
SETTLE_TIMEOUT_S = 120.0


def schedule(
    queries: Sequence[Query], systems: Sequence[str], reps: int, per_type: int
) -> list[tuple[Query, tuple[str, ...]]]:
    """The timed runs in turn: ``reps`` times over ``queries`` (``per_type`` instances of
    each type, as :func:`generate` makes them, instance after instance), each query by
    every system in an order of its own. A type's instances, repetitions counted, take
    every order of the systems in turn, so that over as many instances as there are
    orders each system runs right after each other one equally often (the first type's
    first system runs after the last type's last, of the order before). What runs just
    before counts: DuckDB runs in this process, and after its query the next system's
    took longer. Rotating one order would always put the same system after another (in
    g, i, d, g, i, d: g after d two times in three)."""
    orders = _chained(list(itertools.permutations(systems)))
    types = len(queries) // per_type
    return [
        (q, orders[(rep * per_type + i // types) % len(orders)])
        for rep in range(reps)
        for i, q in enumerate(queries)
    ]


def _chained(orders: list[tuple[str, ...]]) -> list[tuple[str, ...]]:
    """``orders`` in a sequence where, as far as it can, none starts with the system the
    one before ends with: no system runs twice in a row where one order follows another."""
    chain = [orders[0]]
    rest = orders[1:]
    while rest:
        pick = next((o for o in rest if o[0] != chain[-1][-1]), rest[0])
        chain.append(pick)
        rest.remove(pick)
    return chain


@dataclass(frozen=True)
class Options:
    hosts: int = 100
    span_ms: int = 24 * 3_600_000
    reps: int = 3
    workers: int = 2
    batch: int = 10_000
    queries_per_type: int = 2
    systems: tuple[str, ...] = SYSTEMS
    seed: int = 1
    scratch: Path | None = None
    #: gnomon's decoded chunk cache budget (None: the server's default; 0 decodes every read).
    gnomon_decoded_cache_bytes: int | None = None
    #: How queries reach gnomon (:data:`gnomon_server.QUERY_APIS`).
    gnomon_query_api: str = "http"
    #: InfluxDB counts as settled once its size has not changed for this long.
    settle_quiet_s: float = 15.0


@dataclass
class Results:
    rows: int
    options: Options
    #: loader ("gnomon-grpc", "gnomon-line-protocol", "influxdb", "duckdb") -> rows/s per rep
    ingest: dict[str, list[float]] = field(default_factory=dict)
    bytes_on_disk: dict[str, int] = field(default_factory=dict)
    #: gnomon's bytes on disk per part of its data directory (sst, wal, ...)
    gnomon_parts: dict[str, int] = field(default_factory=dict)
    peak_rss: dict[str, int] = field(default_factory=dict)
    #: query type -> system -> latencies (ms) over every instance and repetition
    latencies: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    #: query type -> systems whose answers were compared with the reference
    checked: dict[str, list[str]] = field(default_factory=dict)
    #: query type -> mismatch reports
    mismatches: dict[str, list[str]] = field(default_factory=dict)
    #: query type -> gnomon's own time (ms) answering each timed query, as its metrics show
    #: it: the rest of the latency is the client, the network stack and waking up
    gnomon_server_ms: dict[str, list[float]] = field(default_factory=dict)
    #: gnomon's metrics after the timed queries (SSTs, decoded chunk cache hits and misses)
    gnomon_metrics: dict[str, float] = field(default_factory=dict)

    def ingest_rows_per_s(self) -> dict[str, float]:
        """Median per system; gnomon's is its native (HoraeDB gRPC) write path."""
        by_system = {"gnomon": "gnomon-grpc", "influxdb": "influxdb", "duckdb": "duckdb"}
        return {
            s: statistics.median(self.ingest[loader])
            for s, loader in by_system.items()
            if self.ingest.get(loader)
        }

    def query_ms(self) -> dict[str, dict[str, float]]:
        """Median latency per query type and system; types with a mismatch are left out."""
        return {
            q: {s: statistics.median(per[s]) for s in SYSTEMS if per.get(s)}
            for q, per in self.latencies.items()
            if q not in self.mismatches
        }


class System(Protocol):
    """One system under test, as the runner drives it (gnomon and InfluxDB servers, DuckDB
    in-process)."""

    name: str

    def query(self, text: str) -> pa.Table: ...

    def disk_bytes(self) -> int: ...

    def stop(self) -> None: ...


def _text(system: str, q: Query) -> str:
    return {"gnomon": q.gnomon, "influxdb": q.influxql, "duckdb": q.duckdb}[system]


def _send_all(payloads: Sequence[bytes], send: Callable[[bytes], None], workers: int) -> float:
    """Seconds to send every payload with ``workers`` concurrent clients."""
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="loader") as pool:
        for f in [pool.submit(send, p) for p in payloads]:
            f.result()
    return time.perf_counter() - t0


def _settle(server: System, quiet_s: float) -> None:
    """Wait until a server's size on disk stops changing (cache snapshots, compaction)."""
    last = [-1, time.monotonic()]

    def stable() -> bool:
        size = server.disk_bytes()
        if size != last[0]:
            last[0], last[1] = size, time.monotonic()
            return False
        return time.monotonic() - float(last[1]) >= quiet_s

    try:
        wait_until(stable, timeout_s=SETTLE_TIMEOUT_S, what=f"{server.name} compaction")
    except TimeoutError:
        log.warning("%s still compacting; its size is measured as it is", server.name)


S = TypeVar("S", bound=System)


class Bench:
    def __init__(self, opts: Options, console: Console) -> None:
        self.opts = opts
        self.console = console
        self.span = Span(opts.hosts, START_MS, opts.span_ms)
        #: Every server started, stopped (again, harmlessly) when the run ends in any way.
        self._started: list[System] = []

    def _track(self, server: S) -> S:
        self._started.append(server)
        return server

    def _stop_all(self, res: Results) -> None:
        for s in self._started:
            s.stop()
            if isinstance(s, GnomonServer | InfluxServer):
                res.peak_rss[s.name] = max(res.peak_rss.get(s.name, 0), s.process.peak_rss)

    @contextmanager
    def _progress(self) -> Iterator[Progress]:
        with Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=self.console,
            transient=False,
        ) as p:
            yield p

    def run(self) -> Results:
        opts = self.opts
        if "influxdb" in opts.systems:
            influxd_path()  # installs it, or raises InfluxUnavailable before any work
        with tempfile.TemporaryDirectory(prefix="gnomon-tsbs-", dir=opts.scratch) as tmp:
            return self._run(Path(tmp))

    def _run(self, root: Path) -> Results:
        opts = self.opts
        steps = opts.span_ms // INTERVAL_MS
        batches = list(
            cpu_only_batches(opts.hosts, steps, start_ms=START_MS, rows_per_batch=opts.batch)
        )
        rows = sum(b.num_rows for b in batches)
        res = Results(rows=rows, options=opts)
        self.console.print(
            f"TSBS cpu-only: {opts.hosts} hosts x {steps} readings = {rows:,} rows in "
            f"{len(batches)} batches; {opts.workers} client workers; {opts.reps} repetitions; "
            f"systems {', '.join(opts.systems)}"
        )
        with self._progress() as progress:
            encodings: dict[str, list[bytes]] = {}
            if "gnomon" in opts.systems:
                encodings["gnomon-grpc"] = self._encode(progress, horaedb_request, batches)
            if {"gnomon", "influxdb"} & set(opts.systems):
                encodings["line-protocol"] = self._encode(progress, line_protocol, batches)
            try:
                servers = self._ingest(progress, root, batches, encodings, res)
                self._settle(progress, servers, res)
                self._queries(progress, servers, res)
            finally:
                self._stop_all(res)
        return res

    def _encode(
        self, progress: Progress, encode: Callable[[pa.Table], bytes], batches: list[pa.Table]
    ) -> list[bytes]:
        task = progress.add_task(f"encode {encode.__name__}", total=len(batches))
        out = []
        for b in batches:
            out.append(encode(b))
            progress.advance(task)
        return out

    def _ingest(
        self,
        progress: Progress,
        root: Path,
        batches: list[pa.Table],
        encodings: dict[str, list[bytes]],
        res: Results,
    ) -> dict[str, System]:
        """Every loader ``reps`` times, interleaved, each into a fresh server; the servers of
        the last repetition (gnomon loaded over gRPC) are kept for the queries."""
        opts = self.opts
        loaders: list[str] = []
        if "gnomon" in opts.systems:
            loaders += ["gnomon-grpc", "gnomon-line-protocol"]
        if "influxdb" in opts.systems:
            loaders.append("influxdb")
        if "duckdb" in opts.systems:
            loaders.append("duckdb")
        task = progress.add_task("ingest", total=opts.reps * len(loaders))
        kept: dict[str, System] = {}
        table = pa.concat_tables(batches) if "duckdb" in opts.systems else None
        for rep in range(opts.reps):
            last = rep == opts.reps - 1
            for loader in loaders:
                progress.update(task, description=f"ingest {loader} (rep {rep + 1})")
                server, seconds = self._load(loader, root / f"{loader}-{rep}", table, encodings)
                res.ingest.setdefault(loader, []).append(res.rows / seconds)
                keep = last and loader in ("gnomon-grpc", "influxdb", "duckdb")
                system = loader.split("-")[0]
                if keep:
                    kept[system] = server
                else:
                    server.stop()
                progress.advance(task)
        return kept

    def _load(
        self, loader: str, where: Path, table: pa.Table | None, encodings: dict[str, list[bytes]]
    ) -> tuple[System, float]:
        """A fresh system loaded by ``loader``, and the seconds the load took."""
        workers = self.opts.workers
        if loader == "duckdb":
            assert table is not None
            where.mkdir()
            path = where / "cpu.parquet"
            t0 = time.perf_counter()
            write_parquet(table, path, hosts=self.opts.hosts)
            seconds = time.perf_counter() - t0
            return self._track(DuckDb(path)), seconds
        if loader == "influxdb":
            influx = self._track(InfluxServer(where))
            return influx, _send_all(encodings["line-protocol"], influx.write, workers)
        gnomon = self._track(
            GnomonServer(where, self.opts.gnomon_decoded_cache_bytes, self.opts.gnomon_query_api)
        )
        gnomon.create_cpu_table()
        if loader == "gnomon-grpc":
            return gnomon, _send_all(encodings["gnomon-grpc"], gnomon.write_grpc, workers)
        return gnomon, _send_all(encodings["line-protocol"], gnomon.write_line_protocol, workers)

    def _settle(self, progress: Progress, servers: dict[str, System], res: Results) -> None:
        """Bring every system to its settled state and measure its size: gnomon restarted
        (a graceful stop flushes every memtable to Parquet SSTs, so queries then read SSTs)
        and, like InfluxDB, left until compaction is done."""
        task = progress.add_task("settle", total=len(servers))
        for name, server in list(servers.items()):
            progress.update(task, description=f"settle {name}")
            if isinstance(server, GnomonServer):
                server.stop()
                servers[name] = server = self._track(
                    GnomonServer(server.root, server.decoded_cache_bytes, server.query_api)
                )
                _settle(server, self.opts.settle_quiet_s)
                res.gnomon_parts = server.disk_bytes_by_part()
            elif isinstance(server, InfluxServer):
                _settle(server, self.opts.settle_quiet_s)
            res.bytes_on_disk[name] = server.disk_bytes()
            progress.advance(task)

    def _queries(self, progress: Progress, servers: dict[str, System], res: Results) -> None:
        opts = self.opts
        queries = generate(self.span, seed=opts.seed, per_type=opts.queries_per_type)
        systems = [s for s in SYSTEMS if s in servers]
        check_task = progress.add_task("check answers", total=len(queries))
        for q in queries:
            self._check(q, systems, servers, res)
            progress.advance(check_task)
        time_task = progress.add_task("time queries", total=opts.reps * len(queries))
        # Servers, and this process, where DuckDB runs.
        pids = [os.getpid(), *(p for s in servers.values() if (p := getattr(s, "pid", None)))]
        for q, order in schedule(queries, systems, opts.reps, opts.queries_per_type):
            for s in order:
                server = servers[s]
                before = server.query_time() if isinstance(server, GnomonServer) else None
                time.sleep(PAUSE_S)
                wait_quiet(pids)
                t0 = time.perf_counter()
                server.query(_text(s, q))
                ms = (time.perf_counter() - t0) * 1000
                res.latencies.setdefault(q.name, {}).setdefault(s, []).append(ms)
                if isinstance(server, GnomonServer) and before is not None:
                    own = server.seconds_since(before) * 1000
                    res.gnomon_server_ms.setdefault(q.name, []).append(own)
            progress.advance(time_task)
        gnomon = servers.get("gnomon")
        if isinstance(gnomon, GnomonServer):
            res.gnomon_metrics = {
                k: v
                for k, v in gnomon.metrics().items()
                if k.startswith(("gnomon_table_ssts", "gnomon_decoded_cache", "gnomon_memtable"))
            }

    def _check(
        self, q: Query, systems: list[str], servers: dict[str, System], res: Results
    ) -> None:
        answers = {s: servers[s].query(_text(s, q)) for s in systems}
        sql_systems = [s for s in systems if s != "influxdb"]
        reference = sql_systems[0] if sql_systems else None
        normal = {s: check.normalise_sql(answers[s]) for s in sql_systems}
        if "influxdb" in answers:
            like = normal[reference] if reference else None
            if like is None:
                return
            normal["influxdb"] = check.normalise_influx(answers["influxdb"], like)
        if reference is None:
            return
        checked = res.checked.setdefault(q.name, [reference])
        for s in systems:
            if s == reference:
                continue
            problem = check.diff((reference, normal[reference]), (s, normal[s]))
            if s not in checked:
                checked.append(s)
            if problem is not None:
                res.mismatches.setdefault(q.name, []).append(f"{s}: {problem}")
                self.console.print(
                    Panel(
                        f"[bold]{q.name}[/bold]\n{reference}: {_text(reference, q)}\n"
                        f"{s}: {_text(s, q)}\n\n{problem}",
                        title=f"[red]RESULT MISMATCH: {reference} vs {s}[/red]",
                        border_style="red",
                    )
                )
