"""One compaction node (``gnomon compaction-node``): the gRPC CompactionService, the HTTP
metrics endpoint, its executor, and the registration-plus-heartbeat loop with meta that
reports its load (running and queued tasks over slots) and figures (running, queued, slots,
input bytes merged per second, CPU)."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterable
from concurrent import futures

import grpc

from compaction_node.executor import Executor, LocalExecutor, StoreSettings
from compaction_node.http import MetricsServer
from compaction_node.service import CompactionService
from compaction_node.tasks import Tasks
from gnomon.config import CompactionNodeConfig, write_ports_file
from gnomon.errors import InvalidArgument
from gnomon.metrics import Labels, Registry
from gnomon.peer import Peer, SecretCheck
from gnomon.stopping import stop_signals
from gnomon.tls import ServerTls
from meta.client import MetaClient, NodeAgent
from meta.model import NodeKind
from node.server.listen import bind_failed, check_free

log = logging.getLogger("gnomon.compaction_node")

#: Calls in flight to a stopping node get this long to finish.
GRACE_S = 5.0


def open_executor(cfg: CompactionNodeConfig) -> Executor:
    settings = StoreSettings(cfg.store, cfg.s3_endpoint, cfg.s3_region)
    if cfg.executor == "ray":
        from compaction_node.ray_executor import RayExecutor

        return RayExecutor(settings, cfg.data_dir, address=cfg.ray_address, slots=cfg.slots)
    return LocalExecutor(settings.open(cfg.data_dir), cfg.data_dir)


class CompactionNode:
    def __init__(self, cfg: CompactionNodeConfig) -> None:
        self.cfg = cfg
        self.grpc_port = cfg.grpc_port
        self.http_port = cfg.http_port
        self.metrics = Registry()
        self.tasks: Tasks | None = None
        self._executor: Executor | None = None
        self._grpc: grpc.Server | None = None
        self._http: MetricsServer | None = None
        self._agent: NodeAgent | None = None
        self._stop_lock = threading.Lock()

    @property
    def name(self) -> str:
        """Its name in meta: the endpoint data nodes reach its gRPC at."""
        return self.cfg.advertise or f"{self.cfg.bind}:{self.grpc_port}"

    def start(self) -> None:
        """Serve, then register with meta; Unavailable (nothing left open) if a port is
        taken or meta cannot be reached."""
        cfg = self.cfg
        check_free("gRPC", cfg.bind, cfg.grpc_port, "grpc_port")
        check_free("HTTP", cfg.bind, cfg.http_port, "http_port")
        try:
            self._executor = executor = open_executor(cfg)
            tls = (
                None
                if cfg.tls_cert is None or cfg.tls_key is None
                else ServerTls(cfg.tls_cert, cfg.tls_key)
            )
            self._http = MetricsServer(self.metrics, bind=cfg.bind, port=cfg.http_port, tls=tls)
            self.http_port = self._http.start()
            peer = Peer(cfg.cluster_secret, cfg.cluster_ca)
            server = grpc.server(
                # One thread per slot and per queue place, and some for Status calls.
                futures.ThreadPoolExecutor(2 * cfg.slots + 4, thread_name_prefix="gnomon-cn"),
                options=[("grpc.max_receive_message_length", 64 * 1024**2)],
                # Data nodes (and the admin CLI) are its only callers: they hold the secret.
                interceptors=[] if peer.secret is None else [SecretCheck(peer.secret)],
            )
            address = f"{cfg.bind}:{cfg.grpc_port}"
            port = (
                server.add_insecure_port(address)
                if tls is None
                else server.add_secure_port(address, tls.grpc_credentials())
            )
            if port == 0:
                raise bind_failed("gRPC", cfg.bind, cfg.grpc_port, "grpc_port", "bind failed")
            self.grpc_port = port
            if cfg.advertise is None and cfg.bind in ("0.0.0.0", "::"):
                raise InvalidArgument(
                    f"bind {cfg.bind} is no address data nodes can reach: set --advertise"
                )
            self.tasks = tasks = Tasks(cfg.slots, name=self.name)
            service = CompactionService(tasks, executor, hold_answer_s=cfg.hold_answer_s)
            server.add_generic_rpc_handlers([service.handler()])
            server.start()
            self._grpc = server
            self._register_metrics(tasks)
            self._agent = NodeAgent(
                MetaClient(cfg.meta, peer=peer),
                self.name,
                NodeKind.COMPACTION,
                ttl_s=cfg.lease_ttl_s,
                # Three heartbeats a lease: meta picks a node only while its last one is
                # under half a lease old, so one late heartbeat does not take it out.
                interval_s=cfg.lease_ttl_s / 3,
                load=lambda: (tasks.load(), {}),
                endpoints={"http": f"{self.name.rsplit(':', 1)[0]}:{self.http_port}"},
                figures=tasks.figures,
            )
            self._agent.start()
            write_ports_file(cfg.ports_file, {"grpc": self.grpc_port, "http": self.http_port})
        except BaseException:
            self.stop()
            raise
        log.info(
            "gnomon compaction node serving",
            extra={
                "node": self.name,
                "grpc": f"{cfg.bind}:{self.grpc_port}",
                "http": f"{cfg.bind}:{self.http_port}",
                "executor": executor.name,
                "slots": cfg.slots,
                "meta": cfg.meta,
            },
        )

    def _register_metrics(self, tasks: Tasks) -> None:
        def held() -> Iterable[tuple[Labels, float]]:
            now = tasks.held()
            running = sum(1 for t in now if t.running)
            yield ("running",), float(running)
            yield ("queued",), float(len(now) - running)

        def ended() -> Iterable[tuple[Labels, float]]:
            counts = tasks.counts()
            yield ("done",), float(counts.done)
            yield ("failed",), float(counts.failed)
            yield ("discarded",), float(counts.discarded)

        def merged() -> Iterable[tuple[Labels, float]]:
            counts = tasks.counts()
            yield ("read",), float(counts.bytes_read)
            yield ("written",), float(counts.bytes_written)

        m = self.metrics
        m.gauge(
            "gnomon_compaction_node_tasks",
            "Tasks held now, running or waiting for a slot.",
            ["state"],
            held,
        )
        m.gauge(
            "gnomon_compaction_node_slots",
            "Merges run at once.",
            [],
            lambda: [((), float(tasks.slots))],
        )
        m.gauge(
            "gnomon_compaction_node_tasks_ended",
            "Tasks ended since start: done (answered), failed, discarded (caller gone).",
            ["result"],
            ended,
        )
        m.gauge(
            "gnomon_compaction_node_bytes",
            "SST bytes merged since start: inputs read, outputs written.",
            ["direction"],
            merged,
        )

    def stop(self) -> None:
        """Stop heartbeating (meta stops picking this node), refuse new tasks, let calls in
        flight finish for the grace period, then stop the executor. Safe to call twice."""
        with self._stop_lock:
            agent, self._agent = self._agent, None
            if agent is not None:
                agent.stop()
                agent.client.close()
            if self.tasks is not None:
                self.tasks.close()
            server, self._grpc = self._grpc, None
            if server is not None:
                server.stop(GRACE_S).wait()
            http, self._http = self._http, None
            if http is not None:
                http.stop()
            executor, self._executor = self._executor, None
            if executor is not None:
                executor.close()

    def run_forever(self, stop: threading.Event | None = None) -> None:
        """Serve until ``stop`` is set (by default: until SIGTERM or SIGINT), then stop."""
        with contextlib.ExitStack() as signals:
            if stop is None:
                stop = signals.enter_context(stop_signals(log))
            try:
                while not stop.wait(0.5):
                    pass
            finally:
                self.stop()

    def __enter__(self) -> CompactionNode:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
