"""Fixtures of the meta tests: a real etcd per module, meta instances as real subprocesses
(``gnomon meta``) on free loopback ports, and simulated nodes that register and heartbeat
through the real client library."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Callable, Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest

from gnomon import shard_control
from gnomon_app.admin import CRASH_ENV
from gnomon_app.devcluster.cluster import MOVE_S
from meta.client import MetaClient, NodeAgent
from meta.model import NodeKind
from testkit.etcd import EtcdServer
from testkit.procs import Server
from testkit.wait import START_S, bound

#: Short leases so failures are seen quickly; one scheduling round every INTERVAL_S.
NODE_TTL_S = 2
ELECTION_TTL_S = 2
INTERVAL_S = 0.3
#: How long what these tests wait for may take with the settings above: the timers (a meta
#: instance's campaign, its lease and a pause of a third of it; a node's lease; a round),
#: then the work, stretched on a busy machine (a restarted instance's start; shards moved).
WAIT_S = ELECTION_TTL_S * 4 / 3 + NODE_TTL_S + INTERVAL_S + bound(START_S + MOVE_S)


class MetaProcess:
    """One ``gnomon meta`` instance on a free port (the one it got at its first start);
    restartable on the same port and namespace."""

    def __init__(self, etcd: str, namespace: str, workdir: Path, *, shards: int) -> None:
        self.etcd = etcd
        self.namespace = namespace
        self.workdir = workdir
        self.shards = shards
        self.port = 0
        self.name = f"meta-{uuid.uuid4().hex[:8]}"
        self.server: Server | None = None
        self.starts = 0

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, *, crash_after: str | None = None) -> None:
        self.starts += 1
        argv = [
            sys.executable,
            "-m",
            "gnomon_app.cli",
            "--log-level=INFO",
            "meta",
            f"--etcd={self.etcd}",
            f"--grpc-port={self.port}",
            f"--namespace={self.namespace}",
            f"--shards={self.shards}",
            f"--node-ttl-s={NODE_TTL_S}",
            f"--election-ttl-s={ELECTION_TTL_S}",
            f"--interval-s={INTERVAL_S}",
        ]
        env = {CRASH_ENV: crash_after} if crash_after else {}
        log = self.workdir / f"{self.name}-{self.starts}.log"
        self.server, ports = Server.start_gnomon(argv, log=log, env=env)
        self.port = ports["grpc"]

    def exit_code(self, timeout_s: float = 20.0) -> int:
        """Wait for the process to exit by itself; its exit code."""
        assert self.server is not None
        return self.server.proc.wait(timeout=timeout_s)

    def kill(self) -> None:
        assert self.server is not None
        self.server.kill()
        self.server.proc.wait(timeout=10)
        self.server.stop()

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()


class Cluster:
    """Meta instances sharing one namespace, plus simulated nodes."""

    def __init__(self, etcd: EtcdServer, workdir: Path) -> None:
        self.etcd = etcd
        self.workdir = workdir
        self.namespace = f"/test/{uuid.uuid4().hex[:12]}"
        self.metas: list[MetaProcess] = []
        self.agents: list[NodeAgent] = []
        self.clients: list[MetaClient] = []
        self.controls: list[grpc.Server] = []
        #: What the simulated nodes were asked to let go of: (node, shard, epoch, tables).
        self.released: list[tuple[str, int, int, list[int] | None]] = []

    def meta(
        self, *, shards: int = 6, start: bool = True, crash_after: str | None = None
    ) -> MetaProcess:
        m = MetaProcess(self.etcd.endpoint, self.namespace, self.workdir, shards=shards)
        self.metas.append(m)
        if start:
            m.start(crash_after=crash_after)
        return m

    def client(self) -> MetaClient:
        c = MetaClient([m.endpoint for m in self.metas], retry_for_s=30.0)
        self.clients.append(c)
        return c

    def node(
        self,
        index: int,
        *,
        ttl_s: int = NODE_TTL_S,
        kind: NodeKind = NodeKind.DATA,
        load: Callable[[], float] = lambda: 0.0,
    ) -> NodeAgent:
        """A simulated node heartbeating every third of its TTL with the load ``load()``,
        serving the shard control the meta service calls (it lets go at once)."""
        name = f"127.0.0.1:{20000 + index}"
        if kind is NodeKind.DATA:
            self._serve_control(name)
        agent = NodeAgent(
            self.client(),
            name,
            kind,
            ttl_s=ttl_s,
            interval_s=ttl_s / 3,
            load=lambda: (load(), {}),
        )
        agent.start()
        self.agents.append(agent)
        return agent

    def _serve_control(self, name: str) -> None:
        def release(shard_id: int, epoch: int, tables: object) -> list[str]:
            listed = None if tables is None else sorted(tables)  # type: ignore[call-overload]
            self.released.append((name, shard_id, epoch, listed))
            return []

        server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        server.add_generic_rpc_handlers((shard_control.handler(release),))
        server.add_insecure_port(name)
        server.start()
        self.controls.append(server)

    def close(self) -> None:
        for server in self.controls:
            server.stop(0)
        for agent in self.agents:
            agent.stop()
        for c in self.clients:
            c.close()
        for m in self.metas:
            m.stop()


@pytest.fixture
def cluster(etcd: EtcdServer, tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(etcd, tmp_path)
    yield c
    c.close()
