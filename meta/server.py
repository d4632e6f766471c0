"""One meta instance: the gRPC server, the election, and while leading, the core and its worker.

Every instance serves gRPC. One campaign loop per instance tries to win the election; the winner
builds a :class:`~meta.core.MetaCore` for its term (load the state, resume procedures) and runs
its worker (scheduling rounds, procedures) while keeping its election lease alive. Losing the
lease, or being fenced by a newer term, ends the term: the core is dropped and the instance
campaigns again. Followers answer every call with "not leader, the leader is X".
"""

from __future__ import annotations

import logging
import threading
from concurrent import futures
from dataclasses import dataclass, field

import grpc

from gnomon.errors import GnomonError, NotLeader
from gnomon.peer import Peer, SecretCheck
from gnomon.shard_control import GrpcNodeCalls
from gnomon.store.etcd import EtcdStore
from meta.core import MetaCore, MetaSettings
from meta.etcd import EtcdClient
from meta.liveness import Election, Liveness
from meta.service import MetaService
from meta.store import ClusterStore

log = logging.getLogger("gnomon.meta.server")


@dataclass(frozen=True)
class ServerConfig:
    etcd: str
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
        self._etcd = EtcdClient(config.etcd)
        self._store = EtcdStore(config.etcd, namespace=f"{root}/store")
        self._liveness = Liveness(self._etcd, root)
        self._calls = GrpcNodeCalls(peer=config.peer)
        secret = config.peer.secret
        self._grpc = grpc.server(
            futures.ThreadPoolExecutor(max_workers=64, thread_name_prefix="gnomon-meta"),
            handlers=[MetaService(self).handler()],
            interceptors=[] if secret is None else [SecretCheck(secret)],
        )
        self._stop = threading.Event()
        self._core: MetaCore | None = None
        self._election: Election | None = None
        self._campaign: threading.Thread | None = None
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
        """Serve gRPC and start campaigning; the bound port."""
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
        self._stop.set()
        if self._campaign is not None:
            self._campaign.join(timeout=10)
        if self._election is not None:
            try:
                self._election.resign()
            except GnomonError as e:
                log.warning("could not resign", extra={"error": str(e)})
        self._grpc.stop(2).wait(3)
        self._calls.close()
        self._store.close()
        self._etcd.close()

    # -- leading --------------------------------------------------------------------------------

    def _campaign_loop(self) -> None:
        assert self._election is not None
        pause = self.config.election_ttl_s / 3
        while not self._stop.is_set():
            try:
                if self._election.campaign():
                    self._lead(self._election)
            except GnomonError as e:
                log.warning("campaign failed", extra={"error": str(e)})
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
        worker.start()
        pause = self.config.election_ttl_s / 3
        try:
            while not self._stop.is_set() and not ended.is_set():
                if not election.keep():
                    log.warning("lost the meta election", extra={"term": core.term})
                    break
                ended.wait(pause)
        finally:
            self._core = None
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
