"""The TSBS cpu-only benchmark, all systems in one process tree: load the same data into each
(interleaved, several repetitions, same batches and client workers), cross-check the rows each
stored and every query's answers, then time the queries (interleaved, several repetitions),
each after an idle pause and again back to back."""

from __future__ import annotations

import logging
import os
import statistics
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pyarrow as pa
from rich.console import Console
from rich.panel import Panel
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from bench.tsbs import check
from bench.tsbs.cpu_only import INTERVAL_MS, cpu_only_batches
from bench.tsbs.gnomon_server import GnomonServer
from bench.tsbs.payloads import ENCODERS
from bench.tsbs.queries import Query, Span, generate
from bench.tsbs.serving import wait_quiet
from bench.tsbs.system import Kind, System, Workload
from bench.tsbs.systems import NAMES, kinds

log = logging.getLogger("gnomon.bench.tsbs")

START_MS = 1_451_606_400_000  # 2016-01-01, as TSBS
SYSTEMS = NAMES
#: Pause before each timed query, after which every system must also be idle
#: (:func:`serving.wait_quiet`): what a system does after answering (Go's garbage collector,
#: DuckDB's workers winding down, a compaction) must not land in the next system's time.
#: Its latency is the "after idle" figure: caches and thread pools have gone cold meanwhile.
PAUSE_S = 0.1
#: Runs of the same query on the same system right after the one after the pause (and one
#: more, untimed, between them: gnomon's own time is read from its metrics in between): the
#: back-to-back ("warm") figure.
WARM_RUNS = 2


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
    orders = _chained(_balanced(systems))
    types = len(queries) // per_type
    runs: list[tuple[Query, tuple[str, ...]]] = []
    for rep in range(reps):
        for i, q in enumerate(queries):
            # Each type takes the next stretch of orders: with more systems there are more
            # orders than a type has instances, and the run as a whole goes through them all.
            at = (i % types) * reps * per_type + rep * per_type + i // types
            order = orders[at % len(orders)]
            if runs and order[0] == runs[-1][1][-1]:
                order = (*order[1:], order[0])  # never the same system twice in a row
            runs.append((q, order))
    return runs


def _balanced(systems: Sequence[str]) -> list[tuple[str, ...]]:
    """Orders of ``systems`` (a Williams design) in which each system takes each place
    equally often and runs right after each other one equally often: ``n`` orders for an
    even number of systems, ``2n`` for an odd one (all six orders of three)."""
    n = len(systems)
    first = [0]
    for k in range(1, n):
        first.append((k + 1) // 2 if k % 2 else n - k // 2)
    rows = [tuple(systems[(j + i) % n] for j in first) for i in range(n)]
    if n % 2:
        rows += [tuple(reversed(r)) for r in rows]
    return rows


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
    #: A server counts as settled once its size has not changed for this long.
    settle_quiet_s: float = 15.0


@dataclass
class Results:
    rows: int
    options: Options
    #: loader ("gnomon-grpc", "gnomon-line-protocol", "influxdb", "duckdb", ...) -> rows/s
    #: per rep
    ingest: dict[str, list[float]] = field(default_factory=dict)
    #: system -> the loader whose figure is the system's ingest figure
    ingest_loader: dict[str, str] = field(default_factory=dict)
    bytes_on_disk: dict[str, int] = field(default_factory=dict)
    #: system -> rows it holds once settled, as it counts them
    stored_rows: dict[str, int] = field(default_factory=dict)
    #: gnomon's bytes on disk per part of its data directory (sst, wal, ...)
    gnomon_parts: dict[str, int] = field(default_factory=dict)
    peak_rss: dict[str, int] = field(default_factory=dict)
    #: query type -> system -> latencies (ms) after an idle pause, over every instance and
    #: repetition
    latencies: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    #: the same, back to back (the runs right after each of those)
    warm_latencies: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    #: query type -> systems whose answers were compared with the reference
    checked: dict[str, list[str]] = field(default_factory=dict)
    #: query type (or "rows stored") -> mismatch reports
    mismatches: dict[str, list[str]] = field(default_factory=dict)
    #: query type -> gnomon's own time (ms) answering each timed query after the pause, as
    #: its metrics show it: the rest of the latency is the client, the network stack and
    #: waking up
    gnomon_server_ms: dict[str, list[float]] = field(default_factory=dict)
    #: gnomon's metrics after the timed queries (SSTs, decoded chunk cache hits and misses)
    gnomon_metrics: dict[str, float] = field(default_factory=dict)

    def ingest_rows_per_s(self) -> dict[str, float]:
        """Median per system; gnomon's is its native (HoraeDB gRPC) write path."""
        return {
            s: statistics.median(self.ingest[loader])
            for s, loader in self.ingest_loader.items()
            if self.ingest.get(loader)
        }

    def query_ms(self, *, warm: bool = False) -> dict[str, dict[str, float]]:
        """Median latency per query type and system, after the idle pause or (``warm``) back
        to back; types with a mismatch are left out."""
        source = self.warm_latencies if warm else self.latencies
        return {
            q: {s: statistics.median(per[s]) for s in SYSTEMS if per.get(s)}
            for q, per in source.items()
            if q not in self.mismatches
        }


S = TypeVar("S", bound=System)


class Bench:
    def __init__(self, opts: Options, console: Console) -> None:
        self.opts = opts
        self.console = console
        self.span = Span(opts.hosts, START_MS, opts.span_ms)
        every = kinds(
            gnomon_decoded_cache_bytes=opts.gnomon_decoded_cache_bytes,
            gnomon_query_api=opts.gnomon_query_api,
        )
        self.kinds: dict[str, Kind[Any]] = {n: k for n, k in every.items() if n in opts.systems}
        #: Every server started, stopped (again, harmlessly) when the run ends in any way.
        self._started: list[System] = []

    def _track(self, server: S) -> S:
        self._started.append(server)
        return server

    def _stop_all(self, res: Results) -> None:
        for s in self._started:
            s.stop()
            peak = s.peak_rss()
            if peak:
                res.peak_rss[s.name] = max(res.peak_rss.get(s.name, 0), peak)

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
        """Raises :class:`system.SystemUnavailable` before any work when a system cannot be
        installed."""
        for kind in self.kinds.values():
            kind.install()
        with tempfile.TemporaryDirectory(prefix="gnomon-tsbs-", dir=self.opts.scratch) as tmp:
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
            f"systems {', '.join(self.kinds)}"
        )
        work = Workload(batches, opts.hosts, opts.workers, START_MS, START_MS + opts.span_ms)
        with self._progress() as progress:
            for encoding in dict.fromkeys(e for k in self.kinds.values() for e in k.encodings):
                work.payloads[encoding] = self._encode(progress, encoding, batches)
            try:
                servers = self._ingest(progress, root, work, res)
                self._settle(progress, servers, res)
                self._queries(progress, servers, res)
            finally:
                self._stop_all(res)
        return res

    def _encode(self, progress: Progress, encoding: str, batches: list[pa.Table]) -> list[bytes]:
        encode = ENCODERS[encoding]
        task = progress.add_task(f"encode {encoding}", total=len(batches))
        out = []
        for b in batches:
            out.append(encode(b))
            progress.advance(task)
        return out

    def _ingest(
        self, progress: Progress, root: Path, work: Workload, res: Results
    ) -> dict[str, System]:
        """Every loader ``reps`` times, interleaved, each into a fresh system; the systems of
        the last repetition loaded by each system's first loader are kept for the queries."""
        opts = self.opts
        loaders = [(kind, loader) for kind in self.kinds.values() for loader in kind.loaders]
        task = progress.add_task("ingest", total=opts.reps * len(loaders))
        kept: dict[str, System] = {}
        for rep in range(opts.reps):
            for kind, loader in loaders:
                progress.update(task, description=f"ingest {loader} (rep {rep + 1})")
                system, seconds = kind.load(loader, root / f"{loader}-{rep}", work)
                self._track(system)
                res.ingest.setdefault(loader, []).append(res.rows / seconds)
                res.ingest_loader[kind.name] = kind.loaders[0]
                if rep == opts.reps - 1 and loader == kind.loaders[0]:
                    kept[kind.name] = system
                else:
                    system.stop()
                progress.advance(task)
        return kept

    def _settle(self, progress: Progress, systems: dict[str, System], res: Results) -> None:
        """Bring every system to its settled state, measure its size and check it holds every
        row."""
        task = progress.add_task("settle", total=len(systems))
        for name, system in list(systems.items()):
            progress.update(task, description=f"settle {name}")
            settled = self.kinds[name].settle(system, self.opts.settle_quiet_s)
            if settled is not system:
                systems[name] = self._track(settled)
            if isinstance(settled, GnomonServer):
                res.gnomon_parts = settled.disk_bytes_by_part()
            res.bytes_on_disk[name] = settled.disk_bytes()
            stored = res.stored_rows[name] = settled.stored_rows()
            if stored != res.rows:
                problem = f"{name}: stored {stored:,} of the {res.rows:,} rows loaded"
                res.mismatches.setdefault("rows stored", []).append(problem)
                self.console.print(Panel(problem, title="[red]ROWS LOST[/red]", style="red"))
            progress.advance(task)

    def _queries(self, progress: Progress, servers: dict[str, System], res: Results) -> None:
        opts = self.opts
        queries = generate(self.span, seed=opts.seed, per_type=opts.queries_per_type)
        systems = [s for s in SYSTEMS if s in servers and self.kinds[s].dialect]
        if not systems:
            return
        check_task = progress.add_task("check answers", total=len(queries))
        for q in queries:
            self._check(q, systems, servers, res)
            progress.advance(check_task)
        time_task = progress.add_task("time queries", total=opts.reps * len(queries))
        # Servers, and this process, where DuckDB and chDB run.
        pids = [os.getpid(), *(p for s in servers.values() for p in s.pids)]
        for q, order in schedule(queries, systems, opts.reps, opts.queries_per_type):
            for s in order:
                server = servers[s]
                text = self._text(s, q)
                before = server.query_time() if isinstance(server, GnomonServer) else None
                time.sleep(PAUSE_S)
                wait_quiet(pids)
                ms = _timed_ms(server, text)
                res.latencies.setdefault(q.name, {}).setdefault(s, []).append(ms)
                if isinstance(server, GnomonServer) and before is not None:
                    own = server.seconds_since(before) * 1000
                    res.gnomon_server_ms.setdefault(q.name, []).append(own)
                server.query(text)
                warm = res.warm_latencies.setdefault(q.name, {}).setdefault(s, [])
                warm += [_timed_ms(server, text) for _ in range(WARM_RUNS)]
            progress.advance(time_task)
        gnomon = servers.get("gnomon")
        if isinstance(gnomon, GnomonServer):
            res.gnomon_metrics = {
                k: v
                for k, v in gnomon.metrics().items()
                if k.startswith(("gnomon_table_ssts", "gnomon_decoded_cache", "gnomon_memtable"))
            }

    def _text(self, system: str, q: Query) -> str:
        dialect = self.kinds[system].dialect
        assert dialect is not None, f"{system} answers no queries"
        return q.text(dialect)

    def _check(
        self, q: Query, systems: list[str], servers: dict[str, System], res: Results
    ) -> None:
        """Every system's answer to ``q`` compared with the first SQL system's (InfluxQL's
        answers are shaped like it first)."""
        answers = {s: servers[s].query(self._text(s, q)) for s in systems}
        influx = [s for s in systems if self.kinds[s].dialect == "influxql"]
        sql_systems = [s for s in systems if s not in influx]
        if not sql_systems:
            return
        reference = sql_systems[0]
        normal = {s: check.normalise_sql(answers[s]) for s in sql_systems}
        for s in influx:
            normal[s] = check.normalise_influx(answers[s], normal[reference])
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
                        f"[bold]{q.name}[/bold]\n{reference}: {self._text(reference, q)}\n"
                        f"{s}: {self._text(s, q)}\n\n{problem}",
                        title=f"[red]RESULT MISMATCH: {reference} vs {s}[/red]",
                        border_style="red",
                    )
                )


def _timed_ms(system: System, text: str) -> float:
    """The client's wall time of one query, decoding the answer included."""
    t0 = time.perf_counter()
    system.query(text)
    return (time.perf_counter() - t0) * 1000
