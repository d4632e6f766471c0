"""One meta instance: the gRPC server, the election, and while leading, the core and its worker.

Every instance serves gRPC. One campaign loop per instance tries to win the election; the winner
builds a :class:`~meta.core.MetaCore` for its term (load the state, resume procedures) and runs
its worker (scheduling rounds, procedures) while keeping its election lease alive. Losing the
lease, or being fenced by a newer term, ends the term: the core is dropped and the instance
campaigns again. Followers answer every call with "not leader, the leader is X".

An instance starts only if etcd answers, and serves the standard gRPC health service
(``grpc.health.v1.Health``, open without the cluster secret): SERVING while its campaign rounds
reach etcd, NOT_SERVING while they fail (an instance without etcd can neither lead nor name the
leader) and once it is stopping.
"""

from __future__ import annotations

import logging
import threading
from concurrent import futures
from dataclasses import dataclass, field

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from gnomon.errors import GnomonError, NotLeader
from gnomon.etcd import EtcdAccess
from gnomon.peer import Peer, SecretCheck
from gnomon.shard_control import GrpcNodeCalls
from gnomon.store.etcd import EtcdStore
from meta.core import MetaCore, MetaSettings
from meta.etcd import EtcdClient
from meta.liveness import Election, Liveness
from meta.service import MetaService
from meta.store import ClusterStore
from meta.wire import SERVICE

log = logging.getLogger("gnomon.meta.server")

#: How long ``stop`` gives each of its waits (calls in flight, the campaign round, resigning),
#: so an instance stops within a few seconds even while etcd does not answer.
_STOP_STEP_S = 1.0


@dataclass(frozen=True)
class ServerConfig:
    etcd: str
    #: How etcd is reached: its user and password, its CA, a client certificate.
    etcd_access: EtcdAccess = field(default_factory=EtcdAccess)
    #: etcd key prefix of this cluster; the meta state lives under ``<namespace>/meta``.
    namespace: str = "/gnomon"
    bind: str = "127.0.0.1"
    grpc_port: int = 2390
    #: The endpoint other processes reach this instance at (default ``bind:port``).
    advertise: str | None = None
    #: TTL of the leader's election lease: how long a dead leader goes unnoticed.
    election_ttl_s: int = 3
    settings: MetaSettings = field(default_factory=MetaSettings)
    #: The cluster secret every caller must present (and this instance presents to the
    #: nodes it asks to release shards), and the CA of the nodes' TLS.
    peer: Peer = field(default_factory=Peer)
    #: TLS of its gRPC server (None: plain gRPC).
    credentials: grpc.ServerCredentials | None = None


class MetaServer:
    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        root = f"{config.namespace.rstrip('/')}/meta"
        self._root = root
        self._etcd = EtcdClient(config.etcd, access=config.etcd_access)
        self._store = EtcdStore(config.etcd, namespace=f"{root}/store", access=config.etcd_access)
        self._liveness = Liveness(self._etcd, root)
        self._calls = GrpcNodeCalls(peer=config.peer)
        secret = config.peer.secret
        self._grpc = grpc.server(
            futures.ThreadPoolExecutor(max_workers=64, thread_name_prefix="gnomon-meta"),
            handlers=[MetaService(self).handler()],
            interceptors=[] if secret is None else [SecretCheck(secret)],
        )
        self._health = health.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self._health, self._grpc)
        self._stop = threading.Event()
        self._core: MetaCore | None = None
        #: Set to end the current term (stop sets it too, so a leader lets go at once).
        self._term_ended: threading.Event | None = None
        self._election: Election | None = None
        self._campaign: threading.Thread | None = None
        #: Why the last campaign round failed; None while rounds reach etcd.
        self._etcd_error: str | None = None
        self.port = 0

    def core(self) -> MetaCore:
        core = self._core
        if core is not None:
            return core
        leader = self._election.leader() if self._election is not None else ""
        raise NotLeader(
            f"this meta instance does not lead; the leader is {leader or 'unknown'}", leader=leader
        )

    def start(self) -> int:
        """Check that etcd answers (``Unavailable`` naming it if not, before listening), then
        serve gRPC and start campaigning; the bound port."""
        self._etcd.get(f"{self._root}/leader".encode())
        address, credentials = (
            f"{self.config.bind}:{self.config.grpc_port}",
            self.config.credentials,
        )
        self.port = (
            self._grpc.add_insecure_port(address)
            if credentials is None
            else self._grpc.add_secure_port(address, credentials)
        )
        identity = self.config.advertise or f"{self.config.bind}:{self.port}"
        self._election = Election(self._etcd, self._root, identity, self.config.election_ttl_s)
        self._set_ready(True)
        self._grpc.start()
        self._campaign = threading.Thread(
            target=self._campaign_loop, name="meta-campaign", daemon=True
        )
        self._campaign.start()
        log.info("meta listening", extra={"endpoint": identity})
        return self.port

    def wait(self) -> None:
        self._stop.wait()

    def stop(self) -> None:
        """Stop serving and campaigning within a few seconds, whether etcd answers or not. A
        leader resigns when etcd answers (its last round reached it and the campaign thread
        ended in time), so another instance leads at once; otherwise its lease lapses by
        itself. Closing the etcd clients cancels the calls still waiting on an etcd that does
        not answer."""
        self._stop.set()
        self._health.enter_graceful_shutdown()
        serving = self._grpc.stop(_STOP_STEP_S)
        term = self._term_ended
        if term is not None:
            term.set()
        campaign = self._campaign
        if campaign is not None:
            campaign.join(timeout=_STOP_STEP_S)
        reachable = self._etcd_error is None and not (campaign is not None and campaign.is_alive())
        if self._election is not None and reachable:
            try:
                self._election.resign(timeout_s=_STOP_STEP_S)
            except GnomonError as e:
                log.warning("could not resign", extra={"error": str(e)})
        self._calls.close()
        self._store.close()
        self._etcd.close()
        if campaign is not None:
            campaign.join(timeout=_STOP_STEP_S)
        serving.wait(_STOP_STEP_S)

    # -- readiness ------------------------------------------------------------------------------

    def _set_ready(self, ready: bool) -> None:
        status = (
            health_pb2.HealthCheckResponse.SERVING
            if ready
            else health_pb2.HealthCheckResponse.NOT_SERVING
        )
        # The whole instance ("") and its one service, as probes may ask for either.
        for service in ("", SERVICE):
            self._health.set(service, status)

    def _reached_etcd(self) -> None:
        if self._etcd_error is not None:
            log.info("etcd answers again; ready", extra={"etcd": self.config.etcd})
            self._etcd_error = None
            self._set_ready(True)

    def _etcd_failed(self, e: GnomonError) -> None:
        """Said once when rounds start failing (and once when they recover, above): a round
        fails every third of the election TTL for as long as etcd is away."""
        if self._stop.is_set():
            return  # the clients closing under the round
        if self._etcd_error is None:
            log.warning(
                "campaign failed; not ready until etcd answers again",
                extra={"error": str(e), "etcd": self.config.etcd},
            )
            self._set_ready(False)
        else:
            log.debug("campaign failed", extra={"error": str(e)})
        self._etcd_error = str(e)

    # -- leading --------------------------------------------------------------------------------

    def _campaign_loop(self) -> None:
        assert self._election is not None
        pause = self.config.election_ttl_s / 3
        while not self._stop.is_set():
            try:
                won = self._election.campaign()
                self._reached_etcd()
                if won:
                    self._lead(self._election)
            except GnomonError as e:
                self._etcd_failed(e)
            except Exception:
                # A bug must not leave the instance silently out of the election for good.
                log.exception("meta term ended by an unexpected error")
            self._stop.wait(pause)

    def _lead(self, election: Election) -> None:
        core = MetaCore(
            ClusterStore(self._store), self._liveness, self.config.settings, self._calls
        )
        ended = threading.Event()
        worker = threading.Thread(
            target=self._work, args=(core, ended), name="meta-worker", daemon=True
        )
        self._core = core
        self._term_ended = ended
        worker.start()
        pause = self.config.election_ttl_s / 3
        try:
            while not self._stop.is_set() and not ended.is_set():
                try:
                    kept = election.keep()
                except GnomonError as e:
                    # Not ready from now, not once the worker below has given up on etcd too.
                    self._etcd_failed(e)
                    raise
                if not kept:
                    log.warning("lost the meta election", extra={"term": core.term})
                    break
                ended.wait(pause)
        finally:
            self._core = None
            self._term_ended = None
            ended.set()
            core.wakeup.set()
            core.close()
            worker.join(timeout=30)

    def _work(self, core: MetaCore, ended: threading.Event) -> None:
        try:
            for report in core.work(ended):
                if report.plans:
                    log.info(
                        "scheduling round",
                        extra={"plans": len(report.plans), "plan_s": round(report.plan_s, 4)},
                    )
        except GnomonError as e:
            # Fenced by a newer term, or the store went away: end this term.
            log.warning("meta worker stopped", extra={"error": str(e), "term": core.term})
        except Exception:
            log.exception("meta worker failed", extra={"term": core.term})
        finally:
            ended.set()
