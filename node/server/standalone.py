"""A gnomon server: one engine served over gRPC (the HoraeDB protocol), HTTP and Arrow
Flight, taking part in its deployment through a placement — standalone (every table local)
or a cluster's data node (``node/server/placement.py``). ``gnomon standalone`` and ``gnomon
node`` run one until SIGTERM or SIGINT.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import gc
import logging
import os
import sys
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

import pyarrow as pa

from gnomon.allocators import hold_freed_memory
from gnomon.config import ServerConfig, write_ports_file
from gnomon.errors import Closed, InvalidArgument, NotFound, Unavailable
from gnomon.metrics import Labels, Registry
from gnomon.stopping import stop_signals
from gnomon.tls import ServerTls
from node.cluster.figures import QUERY_ENDPOINTS, Figures
from node.cluster.ingest_forward import ForwardingIngestor, Owners
from node.cluster.router import Router
from node.engine.config import EngineConfig
from node.engine.engine import Engine
from node.engine.stats import CacheStats
from node.ingest.writer import Ingestor
from node.partition.ingest import PartitionedRows
from node.partition.tables import Partitions
from node.security.connections import ConnectionRate, PeerConnections
from node.security.context import may_know
from node.security.settings import Security
from node.server.arrow_wire import DEFAULT_COMPRESS_MIN_BYTES
from node.server.auth import FlightAuth, GrpcAuth
from node.server.connection_rate import GrpcConnectionRate
from node.server.console import ClusterView
from node.server.flight import FlightService
from node.server.forwarding import forwarding
from node.server.grpc_service import GrpcServer, StorageService
from node.server.http import HttpApp, HttpServer
from node.server.http.server import DEFAULT_WORKERS
from node.server.listen import check_free
from node.server.pgwire import PgServer
from node.server.placement import LocalPlacement, MetaPlacement, Placement
from node.sql.cancel import DEFAULT_QUERY_TIMEOUT_S, Queries, QueryLimits
from node.sql.executor import SqlExecutor
from node.tables import PLANNING, LocalTables

log = logging.getLogger("gnomon.standalone")

#: How long a thread runs Python before the interpreter offers the GIL to another (see
#: :meth:`Standalone.start`).
SWITCH_INTERVAL_S = 0.001

#: After the grace period, queries still running are cancelled; they stop at their next
#: check (between two batches of a scan) unless DataFusion is still planning them, which
#: nothing interrupts. Stopping waits this long for them before closing the engine.
CANCEL_WAIT_S = 5.0


def _lock_data_dir(data_dir: str) -> int:
    """Hold ``data_dir/LOCK`` (an advisory lock, released when the process ends however it
    ends): two processes on one data directory would both replay and append to its WAL.
    Returns the lock's file descriptor; closing it releases the lock."""
    os.makedirs(data_dir, exist_ok=True)
    fd = os.open(os.path.join(data_dir, "LOCK"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.read(fd, 32).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        raise Unavailable(
            f"data directory {data_dir} is in use by another gnomon (process {holder}); stop "
            "it or set --data-dir / data_dir"
        ) from None
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return fd


def _parse_endpoint(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) <= 65535:
        raise InvalidArgument(f"invalid advertised endpoint {text!r}: expected host:port")
    return host.strip("[]"), int(port)


class Standalone:
    """The engine plus its servers (HTTP, gRPC, Arrow Flight). ``start`` locks the data
    directory, opens and serves, ``stop`` stops accepting, lets requests in flight finish
    (``grace_s``), cancels the queries still running, flushes and closes the engine.
    Ports given as 0 are picked free; read the actual ones from :attr:`http_port`,
    :attr:`grpc_port` and :attr:`flight_port`, or from ``ports_file`` (written once serving,
    for the process that started this one). Queries run at most ``query_timeout_s``
    seconds (0: no limit)."""

    def __init__(
        self,
        data_dir: str,
        *,
        http_port: int = 5440,
        grpc_port: int = 8831,
        flight_port: int = 8832,
        pg_port: int = 0,
        bind: str = "127.0.0.1",
        wal_sync: str = "always",
        max_request_bytes: int = 256 * 1024**2,
        advertise: str | None = None,
        compress_min_bytes: int = DEFAULT_COMPRESS_MIN_BYTES,
        decoded_cache_bytes: int = EngineConfig.decoded_cache_bytes,
        grpc_workers: int = 32,
        grace_s: float = 10.0,
        query_timeout_s: float = DEFAULT_QUERY_TIMEOUT_S,
        placement: Placement | None = None,
        security: Security | None = None,
        limits: QueryLimits | None = None,
        max_connections_per_s: float = 0.0,
        ports_file: str | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.ports_file = ports_file
        #: New HTTP connections one client address may open a second (0: any number).
        self.max_connections_per_s = max_connections_per_s
        #: Authentication, TLS (default: neither, refused off loopback).
        self.security = security or Security()
        self.bind = bind
        self.http_port = http_port
        self.grpc_port = grpc_port
        self.flight_port = flight_port
        #: The PostgreSQL protocol server's port (0: none; a config's default is 5433).
        self.pg_port = pg_port
        self.wal_sync = wal_sync
        self.max_request_bytes = max_request_bytes
        self.advertise = _parse_endpoint(advertise) if advertise else None
        #: Standalone: every table local; a cluster node: a placement that joins the cluster.
        self.placement: Placement = placement or LocalPlacement(
            wal_sync=wal_sync, advertise=advertise
        )
        self.compress_min_bytes = compress_min_bytes
        self.decoded_cache_bytes = decoded_cache_bytes
        self.grpc_workers = grpc_workers
        self.grace_s = grace_s
        self.metrics = Registry()
        self.queries = Queries(query_timeout_s, limits)
        self._register_query_gauges()
        self.engine: Engine | None = None
        #: Whether the last stop left work running (a query DataFusion was still planning,
        #: a Flight call): see :meth:`run_forever`.
        self.unfinished = False
        self._dir_lock: int | None = None
        self._grpc: GrpcServer | None = None
        self._http: HttpServer | None = None
        self._flight: FlightService | None = None
        self._pg: PgServer | None = None
        self._owners: Owners | None = None
        self._stop_lock = threading.Lock()

    @classmethod
    def from_config(cls, cfg: ServerConfig, *, placement: Placement | None = None) -> Standalone:
        return cls(
            cfg.data_dir,
            http_port=cfg.http_port,
            grpc_port=cfg.grpc_port,
            flight_port=cfg.flight_port,
            pg_port=cfg.pg_port,
            bind=cfg.bind,
            wal_sync=cfg.wal_sync,
            max_request_bytes=cfg.max_request_bytes,
            advertise=cfg.advertise,
            compress_min_bytes=cfg.compress_min_bytes,
            decoded_cache_bytes=cfg.decoded_cache_bytes,
            query_timeout_s=cfg.query_timeout_s,
            placement=placement,
            security=Security(
                auth=cfg.auth,
                insecure=cfg.insecure,
                cluster_secret=cfg.cluster_secret,
                tls=None
                if cfg.tls_cert is None or cfg.tls_key is None
                else ServerTls(cfg.tls_cert, cfg.tls_key, cfg.tls_client_ca),
                auth_cache_s=cfg.auth_cache_s,
            ),
            limits=QueryLimits(
                max_concurrent=cfg.max_concurrent_queries,
                max_concurrent_per_user=cfg.max_concurrent_queries_per_user,
                max_queued=cfg.max_queued_queries,
                max_queued_per_user=cfg.max_queued_queries_per_user,
                queue_timeout_s=cfg.query_queue_timeout_s,
                max_statement_bytes=cfg.max_statement_bytes,
                memory_bytes=cfg.query_pool_bytes,
                max_result_bytes=cfg.max_result_bytes,
                server_memory_bytes=cfg.server_memory_bytes or None,
                max_generated_values=cfg.max_generated_values,
            ),
            max_connections_per_s=cfg.max_connections_per_s,
            ports_file=cfg.ports_file,
        )

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        """Lock the data directory, open the engine and serve. Unavailable (nothing left
        open) if a port is taken or another process serves the data directory."""
        self.security.check_exposure(self.bind, "server")
        # Taken ports fail the start before the engine replays its WAL.
        for what, port, setting in (
            ("gRPC", self.grpc_port, "grpc_port"),
            ("HTTP", self.http_port, "http_port"),
            ("Arrow Flight", self.flight_port, "flight_port"),
            ("PostgreSQL", self.pg_port, "pg_port"),
        ):
            check_free(what, self.bind, port, setting)
        try:
            self._dir_lock = _lock_data_dir(self.data_dir)
            engine = self.placement.open_engine(
                self.data_dir, decoded_cache_bytes=self.decoded_cache_bytes
            )
            self.engine = engine
            authenticator = self.security.authenticator(engine.catalog.store)
            tls = self.security.tls
            # SQL, ingest and Flight see this node's tables through the table-source seam.
            tables = LocalTables(engine)
            partitions = self.placement.partitions(tables)
            # Made first: the partition tables answer their sub-tables' shares through the
            # executor made last, the leaders' one.
            followed = LocalTables(engine, follower_reads=True)
            follower = SqlExecutor(followed, self.placement.remote_tables(), partitions)
            executor = SqlExecutor(tables, self.placement.remote_tables(), partitions)
            ingestor = Ingestor(tables)
            self._register_engine_gauges(engine)
            router = self.placement.router(engine)
            service = StorageService(
                ingestor,
                executor.execute,
                self.metrics,
                router=router,
                compress_min_bytes=self.compress_min_bytes,
                queries=self.queries,
                partitions=partitions,
                execute_follower=follower.execute,
            )
            grpc_connections = self._peer_connections("grpc")
            # Queries running or waiting their turn hold request threads: the pools have
            # room for all of them besides their usual threads, so a query past the queue's
            # bounds is refused at once and other requests never wait for a thread.
            held = self.queries.limits.threads_held() or 0
            self._grpc = GrpcServer(
                service,
                bind=self.bind,
                port=self.grpc_port,
                max_workers=self.grpc_workers + held,
                max_message_bytes=self.max_request_bytes,
                extra_handlers=self.placement.handlers(),
                interceptors=[
                    *([] if grpc_connections is None else [GrpcConnectionRate(grpc_connections)]),
                    *([] if authenticator is None else [GrpcAuth(authenticator)]),
                ],
                tls=tls,
            )
            self.grpc_port = self._grpc.start()
            if router.forwarder is not None:
                self._owners = Owners(router.forwarder.me, peer=router.forwarder.peer)
            writer = PartitionedRows(ForwardingIngestor(ingestor, router, self._owners), partitions)
            app = HttpApp(
                # HttpApp calls write_all alone, which the forwarding writer has.
                ingestor=cast(Ingestor, writer),
                execute=forwarding(executor.execute, router),
                metrics=self.metrics,
                max_body_bytes=self.max_request_bytes,
                healthy=lambda: _is_open(engine),
                queries=self.queries,
                start_writes=ingestor.start_write_all,
                route=functools.partial(self._route, router, tables),
                authenticator=authenticator,
                execute_follower=forwarding(follower.execute, router),
                cluster=ClusterView(
                    engine,
                    self._endpoints()["grpc"],
                    self._figures(engine),
                    self.placement.client if isinstance(self.placement, MetaPlacement) else None,
                ),
            )
            self._http = HttpServer(
                app,
                bind=self.bind,
                port=self.http_port,
                workers=DEFAULT_WORKERS + held,
                tls=tls,
                max_connections_per_s=self.max_connections_per_s,
            )
            self.http_port = self._http.start()
            self._flight = FlightService(
                tables,
                bind=self.bind,
                port=self.flight_port,
                advertise_host=None if self.advertise is None else self.advertise[0],
                metrics=self.metrics,
                ingestor=writer,
                query=functools.partial(self._flight_query, executor),
                route=functools.partial(self._flight_route, router, tables, partitions),
                follower_tables=followed,
                auth=None if authenticator is None else FlightAuth(authenticator),
                tls=tls,
                connections=self._peer_connections("flight"),
            )
            self.flight_port = self._flight.port
            if self.pg_port:
                self._pg = PgServer(
                    app.execute,
                    self.queries,
                    bind=self.bind,
                    port=self.pg_port,
                    authenticator=authenticator,
                    tls=None if tls is None else tls.ssl_context(),
                )
                self.pg_port = self._pg.start()
            mine = self._endpoints()
            self.placement.join(
                engine,
                {"http": mine["http"], "flight": mine["flight"]},
                self._figures(engine),
            )
            write_ports_file(
                self.ports_file,
                {
                    "http": self.http_port,
                    "grpc": self.grpc_port,
                    "flight": self.flight_port,
                    **({"pg": self.pg_port} if self._pg is not None else {}),
                },
            )
        except BaseException:
            self.stop()
            raise
        # What startup made (modules, the tables' metadata) lives as long as the server: out
        # of the collector's sight, a full collection walks only what serving makes.
        gc.collect()
        gc.freeze()
        log.info("startup objects frozen", extra={"objects": gc.get_freeze_count()})
        # A query's freed buffers kept for the next one instead of faulted in again.
        hold_freed_memory()
        # Request threads pass the GIL back and forth around native work (Arrow, the WAL,
        # compiled decoders, DataFusion): at the default 5 ms, a thread back from native code
        # waits out the interval behind one running Python, and concurrent writers queue on
        # that rather than on work.
        sys.setswitchinterval(SWITCH_INTERVAL_S)
        # The last line of startup: what a command prints on startup comes after it.
        log.info(
            "gnomon standalone serving",
            extra={
                "data_dir": self.data_dir,
                "http": f"{self.bind}:{self.http_port}",
                "grpc": f"{self.bind}:{self.grpc_port}",
                "flight": f"{self.bind}:{self.flight_port}",
            },
        )

    def stop(self) -> None:
        """Stop the servers (requests in flight get ``grace_s`` to finish), cancel the
        queries still running (waiting up to CANCEL_WAIT_S for them), then flush and close
        the engine and unlock the data directory. Safe to call more than once."""
        with self._stop_lock:
            grpc_server, self._grpc = self._grpc, None
            http_server, self._http = self._http, None
            flight_server, self._flight = self._flight, None
            pg_server, self._pg = self._pg, None
            engine, self.engine = self.engine, None
            stopper = None
            if grpc_server is not None:
                # The servers drain at once, so stopping takes one grace period, not three.
                stopper = threading.Thread(
                    target=grpc_server.stop, args=(self.grace_s,), name="gnomon-grpc-stop"
                )
                stopper.start()
            flight_stopper = None
            if flight_server is not None:
                # Flight's shutdown waits for every call in flight, without a limit of its
                # own: give it the grace period, then close the engine under what remains.
                flight_stopper = threading.Thread(
                    target=flight_server.shutdown, name="gnomon-flight-stop", daemon=True
                )
                flight_stopper.start()
            if http_server is not None:
                http_server.stop(self.grace_s)
            if pg_server is not None:
                pg_server.stop(self.grace_s)
            if stopper is not None:
                stopper.join()
            if flight_stopper is not None:
                flight_stopper.join(self.grace_s)
            self.unfinished = self._cancel_queries() or bool(
                flight_stopper is not None and flight_stopper.is_alive()
            )
            owners, self._owners = self._owners, None
            if owners is not None:
                owners.close()
            self.placement.leave()
            if engine is not None:
                engine.close()
                log.info("engine closed", extra={"data_dir": self.data_dir})
            if self._dir_lock is not None:
                os.close(self._dir_lock)
                self._dir_lock = None
            gc.unfreeze()

    def _figures(self, engine: Engine) -> Figures:
        """What this node reports of itself (rows written, queries, ... per second)."""
        return Figures(
            engine,
            rows_written=self.metrics.rows_written.total,
            queries=lambda: self.metrics.requests.total(
                lambda labels: labels[1] in QUERY_ENDPOINTS
            ),
        )

    def _endpoints(self) -> dict[str, str]:
        """Where this node serves, by protocol (its advertised host, else the bind address)."""
        host = self.bind if self.advertise is None else self.advertise[0]
        return {
            "grpc": f"{host}:{self.grpc_port}",
            "http": f"{host}:{self.http_port}",
            "flight": f"{host}:{self.flight_port}",
        }

    def _route(self, router: Router, tables: LocalTables, table: str) -> dict[str, Any]:
        """The endpoints of the node serving ``table``: its owner's where another node
        serves it, this node's where it does (NotFound for no such table); and its
        followers' (``followers``, follower reads go there) when it has some."""
        if not may_know(table):
            raise NotFound(f"table {table!r} does not exist")
        route = router.routes([table]).get(table)
        if route is None or route.endpoint == router.me:
            tables.describe(table)
            found: dict[str, Any] = dict(self._endpoints())
        else:
            found = {"grpc": route.endpoint, **route.endpoints}
        if route is not None and route.followers:
            found["followers"] = [{"grpc": f, **e} for f, e in route.followers.items()]
        return found

    def _flight_query(
        self, executor: SqlExecutor, sql: str, unions: Mapping[str, Sequence[str]]
    ) -> pa.Table:
        """The answer of a Flight query ticket, under the query limits every query runs
        under (its memory pool, its answer's size, its turn among the running queries)."""
        with self.queries.running():
            return executor.execute(sql, unions).table()

    def _flight_route(
        self, router: Router, tables: LocalTables, partitions: Partitions, table: str
    ) -> dict[str, Any]:
        """The Flight endpoint serving ``table``, or each of its sub-tables' for a partition
        table with its key (a Spark job reads and writes at each owner), and those of their
        followers (``followers``: where a job allowing follower reads reads)."""
        found = partitions.find(table)
        subs = [table] if found is None else found.sub_tables()
        parts = []
        for t in subs:
            where = self._route(router, tables, t)
            followers = [f["flight"] for f in where.get("followers", ()) if "flight" in f]
            parts.append({"table": t, "flight": where["flight"], "followers": followers})
        return {
            "table": table,
            "parts": parts,
            "key": None if found is None else list(found.spec.rule.columns),
        }

    def _cancel_queries(self) -> bool:
        """Cancel the queries still running; True if some still run after CANCEL_WAIT_S."""
        running = self.queries.cancel_all("gnomon is stopping")
        if running and not self.queries.wait_done(CANCEL_WAIT_S):
            log.warning("queries still running at stop", extra={"wait_s": CANCEL_WAIT_S})
            return True
        return False

    def run_forever(self, stop: threading.Event | None = None) -> None:
        """Start (unless started) and serve until ``stop`` is set (by default: until SIGTERM
        or SIGINT), then stop gracefully.

        Meant as a process's main loop: if stopping left work running (DataFusion planning
        a query, which nothing interrupts), the process ends here with ``os._exit`` once the
        engine is closed and the output flushed. Left to the interpreter, its shutdown would
        race the native threads still running such work, and a thread calling back into
        Python as the interpreter finalises aborts the process (``Fatal Python error:
        PyGILState_Release``)."""
        with contextlib.ExitStack() as signals:
            if stop is None:
                stop = signals.enter_context(stop_signals(log))
            try:
                if self.engine is None:
                    self.start()
                while not stop.wait(0.5):
                    pass
            finally:
                self.stop()
        if self.unfinished:
            log.warning("exiting with work still running; the engine is closed")
            logging.shutdown()
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)

    def __enter__(self) -> Standalone:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _peer_connections(self, protocol: str) -> PeerConnections | None:
        """The rate new connections to the gRPC or Flight server (``protocol``) are admitted
        at; None without max_connections_per_s."""
        per_s = self.max_connections_per_s
        if per_s <= 0:
            return None
        refused = self.metrics.connections_refused
        return PeerConnections(ConnectionRate(per_s), lambda: refused.inc(protocol, "rate"))

    # -- metrics ---------------------------------------------------------------------------------

    def _register_query_gauges(self) -> None:
        queries = self.queries
        limits = queries.limits
        settings = {
            "max_concurrent_queries": limits.max_concurrent,
            "max_concurrent_queries_per_user": limits.max_concurrent_per_user,
            "max_queued_queries": limits.max_queued,
            "max_queued_queries_per_user": limits.max_queued_per_user,
            "query_queue_timeout_s": limits.queue_timeout_s,
            "query_timeout_s": queries.timeout_s or None,
            "max_statement_bytes": limits.max_statement_bytes,
            "query_memory_bytes": limits.memory_bytes,
            "max_result_bytes": limits.max_result_bytes,
            "server_memory_bytes": limits.server_memory_bytes,
            "max_generated_values": limits.max_generated_values,
        }
        self.metrics.gauge(
            "gnomon_query_limit",
            "The query limits this server enforces, by setting (those set only).",
            ["setting"],
            lambda: [((k,), float(v)) for k, v in settings.items() if v is not None],
        )
        self.metrics.gauge(
            "gnomon_queries",
            "Queries running now, and waiting for a turn under max_concurrent_queries.",
            ["state"],
            lambda: [(("running",), float(queries.running_now)), (("queued",), queries.queued)],
        )
        self.metrics.gauge(
            "gnomon_query_memory_held_bytes",
            "Bytes the running queries hold of server_memory_bytes: their DataFusion pools, "
            "the scan batches handed on and their answers.",
            [],
            lambda: [((), float(queries.memory.held))],
        )
        self.metrics.counted(
            "gnomon_queries_refused_total",
            "Queries a limit turned away since start: concurrency (waited in the queue too "
            "long), queued and user_queued (the server's or the user's queue full), timeout, "
            "statement_bytes, memory_bytes, result_bytes, server_memory_bytes, "
            "generated_values.",
            ["limit"],
            lambda: [((k,), float(n)) for k, n in queries.refusals.counts().items()],
        )
        self.metrics.counted(
            "gnomon_query_planning_total",
            "Work spent finding queries' tables since start: DataFusion plans made (plans), "
            "and schemas asked of the nodes serving remote tables (remote_describes; once "
            "per table and route).",
            ["kind"],
            lambda: [((k,), float(n)) for k, n in PLANNING.counts().items()],
        )

    def _register_engine_gauges(self, engine: Engine) -> None:
        def tables() -> Iterable[tuple[Labels, float]]:
            yield (), float(len(engine.stats().tables))

        def memtables() -> Iterable[tuple[Labels, float]]:
            """Bytes and rows held in memtables (active and immutable), over all tables."""
            stats = engine.stats()
            yield ("bytes",), float(stats.memtable_bytes)
            yield ("rows",), float(stats.memtable_rows)

        def ssts() -> Iterable[tuple[Labels, float]]:
            for t in engine.stats().tables:
                yield (t.name, "files"), float(t.sst_files)
                yield (t.name, "bytes"), float(t.sst_bytes)
                yield (t.name, "rows"), float(t.sst_rows)

        def pending() -> Iterable[tuple[Labels, float]]:
            yield (), float(engine.stats().pending_flushes)

        def failing() -> Iterable[tuple[Labels, float]]:
            yield (), float(engine.stats().flush_failing)

        def cache_figures(cache: CacheStats) -> Iterable[tuple[Labels, float]]:
            yield ("bytes",), float(cache.bytes)
            yield ("capacity_bytes",), float(cache.capacity_bytes)
            yield ("hits",), float(cache.hits)
            yield ("misses",), float(cache.misses)

        def decoded() -> Iterable[tuple[Labels, float]]:
            return cache_figures(engine.stats().decoded_cache)

        def file_cache() -> Iterable[tuple[Labels, float]]:
            return cache_figures(engine.stats().file_cache)

        m = self.metrics
        offload = engine.offload
        if offload is not None:
            m.gauge(
                "gnomon_compaction_tasks",
                "Compaction merges since start by where they ran: offloaded, local, or "
                "fallback_<reason> (an offload that failed and was merged here).",
                ["outcome"],
                lambda: [((o,), float(n)) for o, n in sorted(offload.outcomes().items())],
            )
        m.gauge("gnomon_tables", "Tables in the catalog.", [], tables)

        def follower_lag() -> Iterable[tuple[Labels, float]]:
            for shard_id, followed in sorted(engine.followed().items()):
                records, seconds = followed.lag()
                yield (str(shard_id), "records"), float(records)
                yield (str(shard_id), "seconds"), seconds

        m.gauge(
            "gnomon_follower_lag",
            "How far each shard followed here is behind its leader: log records not applied "
            "yet, and seconds since it was last caught up (0 when caught up).",
            ["shard", "unit"],
            follower_lag,
        )
        m.gauge(
            "gnomon_memtable_size",
            "Data held in memtables, not yet flushed to SSTs.",
            ["unit"],
            memtables,
        )
        m.gauge(
            "gnomon_table_ssts",
            "Live SSTs of each table at its current version.",
            ["table", "unit"],
            ssts,
        )
        m.gauge(
            "gnomon_decoded_cache",
            "Decoded SST column chunks kept for scans: held and allowed bytes, chunks found "
            "(hits) and decoded (misses) since start.",
            ["unit"],
            decoded,
        )
        m.gauge(
            "gnomon_sst_file_cache",
            "What scans derive from SST files (footers, statistics, series directories, "
            "tombstones) kept in memory: held (estimated) and allowed bytes, entries found "
            "(hits) and made (misses) since start.",
            ["unit"],
            file_cache,
        )
        m.gauge("gnomon_pending_flushes", "Immutable memtables waiting to be flushed.", [], pending)
        m.gauge(
            "gnomon_tables_flush_failing",
            "Tables whose last flush attempt failed (it is being retried).",
            [],
            failing,
        )


def _is_open(engine: Engine) -> bool:
    try:
        engine.list_tables()
    except Closed:
        return False
    return True
