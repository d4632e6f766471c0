"""A whole gnomon cluster on loopback under one directory: etcd, a Kafka-protocol broker, an S3
server, meta instances and data nodes, each a subprocess on free ports, stopped together.

The data nodes are real ``gnomon node`` processes with their WAL regions on the broker, their
SSTs in a bucket of the S3 server and the catalog on etcd, exactly as in a deployment; only
the three external services are development stand-ins (tansu and moto keep everything in
memory, so the cluster's data lives as long as they run).

``auth`` turns authentication on as a secured deployment would: a fresh cluster secret that
every process presents to the others, ``--auth`` on the data nodes, and a first superuser
made in the catalog before they start (:attr:`DevCluster.admin`); it also turns etcd's own
authentication on, and the meta service and the data nodes reach etcd as its user ``gnomon``
(:meth:`EtcdServer.enable_auth`). ``tls`` makes a throwaway CA (``node/security/ca.py``) whose
certificate every process serves with (the data nodes' HTTP, gRPC and Flight, the meta
service's gRPC, the compaction nodes' gRPC and HTTP, and etcd, which asks its clients for a
certificate of that CA too), and which the processes trust when they call each other.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import sys
import time
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from gnomon.config import MetaConfig
from gnomon.errors import GnomonError, Unavailable
from gnomon.peer import CA_ENV, SECRET_ENV, Peer
from gnomon_app.devcluster.brokers import running_tansu, start_moto
from gnomon_app.devcluster.etcd import EtcdServer
from gnomon_app.devcluster.procs import (
    SLOWDOWN,
    START_S,
    START_TIMEOUT_S,
    PortTaken,
    Server,
    how_it_ended,
    on_free_ports,
)

if TYPE_CHECKING:
    from node.security.accounts import Accounts
    from node.security.ca import Issued

#: Credentials of the development S3 server (it accepts any).
S3_ENV = {
    "AWS_ACCESS_KEY_ID": "gnomon-dev",
    "AWS_SECRET_ACCESS_KEY": "gnomon-dev-secret",
    "AWS_DEFAULT_REGION": "us-east-1",
}
BUCKET = "gnomon"
#: A started cluster is ready once no shard changed hands for this long.
SETTLE_QUIET_S = 2.0
#: The meta service's timers, as the cluster runs it (its defaults): the leading instance's
#: lease, and the seconds between its scheduling rounds.
ELECTION_TTL_S = float(MetaConfig.election_ttl_s)
ROUND_S = float(MetaConfig.interval_s)
#: Seconds of work moving shards takes on an idle machine once a round planned it: the
#: procedure's commits, and the new leaders opening them (replaying their WAL tails). Measured
#: under 0.6 s (``python -m bench.cluster``: a reopened shard serves that soon after its old
#: leader's lease expired).
MOVE_S = 1.0
#: Seconds a local Ray takes to start on an idle machine (a compaction node's ``--executor
#: ray`` starts one before it serves; measured 7.6 s).
RAY_START_S = 8.0
#: A call to a process of the cluster, on an idle machine (well under this).
CALL_S = 0.1


def settle_timeout_s(lease_ttl_s: float, *, rounds: int = 1) -> float:
    """How long the cluster may take to settle after a node or the leading meta instance died
    (or started): the timers first, which a machine's load does not stretch (the dead node's
    lease, the dead leader's lease, ``rounds`` scheduling rounds and the quiet time a settled
    cluster shows), then the work of moving the shards, which it does (:data:`SLOWDOWN`)."""
    timers = lease_ttl_s + ELECTION_TTL_S + rounds * ROUND_S + SETTLE_QUIET_S
    return timers + SLOWDOWN * MOVE_S


#: With a port base B: meta instance j listens on B + j, data node i serves HTTP on B + 10 + i,
#: gRPC on B + 20 + i and Arrow Flight on B + 30 + i; compaction node k serves gRPC on B + 40 + k
#: and HTTP on B + 50 + k; query node q HTTP on B + 60 + q, gRPC on B + 70 + q and Flight on
#: B + 80 + q; the PostgreSQL protocol of data node i on B + 90 + i, of query node q on
#: B + 100 + q (so at most 10 of each).
META_PORTS, HTTP_PORTS, GRPC_PORTS, FLIGHT_PORTS = 0, 10, 20, 30
COMPACTION_GRPC_PORTS, COMPACTION_HTTP_PORTS = 40, 50
QUERY_HTTP_PORTS, QUERY_GRPC_PORTS, QUERY_FLIGHT_PORTS = 60, 70, 80
PG_PORTS, QUERY_PG_PORTS = 90, 100
NAMESPACE = "/gnomon"
#: The superuser an ``auth`` cluster is made with.
ADMIN_USER = "admin"


@dataclass(frozen=True)
class NodeEndpoints:
    name: str
    http: str
    grpc: str
    flight: str
    #: The PostgreSQL protocol's address ("" for a process without one).
    pg: str = ""


def _endpoints(name: str, ports: dict[str, int]) -> NodeEndpoints:
    http, grpc, flight, pg = (f"127.0.0.1:{ports[p]}" for p in ("http", "grpc", "flight", "pg"))
    return NodeEndpoints(name, http, grpc, flight, pg)


@dataclass
class DevCluster:
    root: Path
    nodes: int = 3
    metas: int = 1
    shards: int = 8
    #: Seconds a silent node keeps its shards; short, so failover shows quickly.
    lease_ttl_s: int = 6
    #: Extra environment of the meta processes (tests arm meta's crash hook through it).
    meta_env: dict[str, str] = field(default_factory=dict)
    #: Followers each shard gets (the meta service's ``--followers``).
    followers: int = 0
    #: Compaction nodes; with any, the data nodes offload their merges to them.
    compaction_nodes: int = 0
    #: Query nodes: nodes that own no shards and answer for the data nodes.
    query_nodes: int = 0
    #: Extra flags of the data nodes and of the compaction nodes, and extra environment of
    #: the compaction nodes (tests set timeouts, the executor, the answer hold).
    node_flags: tuple[str, ...] = ()
    compaction_flags: tuple[str, ...] = ()
    compaction_env: dict[str, str] = field(default_factory=dict)
    #: Fixed ports from this base (see META_PORTS); None: any free ones, reported by the
    #: processes themselves (the data nodes' gRPC ports, which name them, picked before).
    port_base: int | None = None
    #: Authentication on (a cluster secret, a first superuser: :attr:`admin`).
    auth: bool = False
    #: TLS on every process's servers, from a throwaway CA (:attr:`ca`).
    tls: bool = False
    #: With ``auth``: the first superuser's name and password.
    admin: tuple[str, str] | None = None
    #: With ``tls``: the PEM file of the CA the processes' certificate is signed by.
    ca: Path | None = None
    #: What the processes present to each other (the secret, the CA).
    peer: Peer = field(default_factory=Peer)
    etcd: EtcdServer | None = None
    bootstrap: str = ""
    s3_endpoint: str = ""
    meta_endpoints: list[str] = field(default_factory=list)
    node_endpoints: list[NodeEndpoints] = field(default_factory=list)
    compaction_endpoints: list[NodeEndpoints] = field(default_factory=list)
    query_endpoints: list[NodeEndpoints] = field(default_factory=list)
    processes: dict[str, Server] = field(default_factory=dict)
    _tls_flags: tuple[str, ...] = ()
    _issued: Issued | None = None
    _stack: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)
    #: The broker and the S3 server, by the names the summary gives them.
    _services: dict[str, Server] = field(default_factory=dict)
    #: Pids of the processes whose end :meth:`exited` told already.
    _told: set[int] = field(default_factory=set)

    @property
    def meta(self) -> str:
        return ",".join(self.meta_endpoints)

    def _peer_env(self) -> dict[str, str]:
        """The environment that hands every process the secret and the CA."""
        env = {}
        if self.peer.secret is not None:
            env[SECRET_ENV] = self.peer.secret
        if self.peer.ca is not None:
            env[CA_ENV] = self.peer.ca
        return env

    def etcd_env(self) -> dict[str, str]:
        """The environment that tells the meta service and the data nodes how to reach
        etcd (its user, whose password is in a file, and the TLS files)."""
        assert self.etcd is not None
        access = self.etcd.access
        given = {
            "GNOMON_ETCD_USER": access.user,
            "GNOMON_ETCD_PASSWORD_FILE": None if access.user is None else str(self._password_file),
            "GNOMON_ETCD_CA": access.ca,
            "GNOMON_ETCD_CERT": access.cert,
            "GNOMON_ETCD_KEY": access.key,
        }
        return {name: value for name, value in given.items() if value is not None}

    @property
    def _password_file(self) -> Path:
        return self.root / "etcd" / "gnomon-password"

    def _secure(self) -> None:
        """The secret and the CA (a fresh cluster gets fresh ones)."""
        ca = None
        if self.tls:
            from node.security.ca import make_ca

            self._issued = make_ca(self.root / "tls")
            self.ca = self._issued.ca
            self._tls_flags = (f"--tls-cert={self._issued.cert}", f"--tls-key={self._issued.key}")
            ca = str(self._issued.ca)
        self.peer = Peer(secrets.token_urlsafe(24) if self.auth else None, ca)

    @contextlib.contextmanager
    def accounts(self) -> Iterator[Accounts]:
        """The users, grants and tokens in the cluster's catalog, as ``gnomon admin users``
        would change them (signed with the cluster secret)."""
        from node.backends import Storage, open_catalog
        from node.security.accounts import Accounts

        assert self.etcd is not None
        store = open_catalog(str(self.root), Storage(catalog=self.catalog, etcd=self.etcd.access))
        try:
            yield Accounts(store, cluster_secret=self.peer.secret)
        finally:
            store.close()

    def _first_admin(self) -> None:
        """The superuser of an ``auth`` cluster, made in its catalog (on etcd) before any
        data node serves."""
        password = secrets.token_urlsafe(12)
        with self.accounts() as accounts:
            accounts.create_user(ADMIN_USER, password, superuser=True)
        self.admin = (ADMIN_USER, password)

    @property
    def catalog(self) -> str:
        assert self.etcd is not None
        return f"etcd://{self.etcd.endpoint}{NAMESPACE}/catalog"

    def _log(self, name: str) -> Path:
        """A fresh log per start of ``name``: a restart keeps what the killed run wrote."""
        logs = self.root / "logs"
        path = logs / f"{name}.log"
        run = 1
        while path.exists():
            run += 1
            path = logs / f"{name}.{run}.log"
        return path

    def start(self) -> None:
        """Start everything, empty (stopping what started if a part fails). What an earlier
        run left under the root is removed first: its WAL and SSTs lived in the memory of
        that run's broker and S3 server, so its catalog would name data that is gone."""
        nodes = (f"{kind}-{i}" for kind in ("node", "compaction", "query") for i in range(10))
        for leftover in ("etcd", *nodes):
            shutil.rmtree(self.root / leftover, ignore_errors=True)
        (self.root / "logs").mkdir(parents=True, exist_ok=True)
        try:
            self._secure()
            self._start_services()
            if self.auth:
                self._first_admin()
            for i in range(self.metas):
                self.start_meta(i)
            for i in range(self.nodes):
                self.start_node(i)
            for i in range(self.compaction_nodes):
                self.start_compaction_node(i)
            for i in range(self.query_nodes):
                self.start_query_node(i)
            self.wait_ready()
        except BaseException:
            self.stop()
            raise

    def _start_services(self) -> None:
        (self.root / "etcd").mkdir(exist_ok=True)
        self.etcd = EtcdServer(self.root / "etcd", tls=self._issued)
        self.etcd.start()
        self._stack.callback(self.etcd.stop)
        if self.auth:
            password = self.etcd.enable_auth(NAMESPACE).password
            assert password is not None
            # Readable by this user only from the moment it exists.
            fd = os.open(self._password_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(password + "\n")
        broker = self._stack.enter_context(running_tansu(self.root / "logs"))
        self.bootstrap = broker.bootstrap
        s3, self.s3_endpoint = start_moto(self.root / "logs")
        self._stack.callback(s3.stop)
        self._services.update(kafka=broker.server, s3=s3)
        import boto3  # type: ignore[import-untyped]

        boto3.client("s3", endpoint_url=self.s3_endpoint, **_boto_credentials()).create_bucket(
            Bucket=BUCKET
        )

    def _gnomon(
        self, name: str, argv: list[str], env: dict[str, str], timeout_s: float = START_TIMEOUT_S
    ) -> dict[str, int]:
        """Start the gnomon process ``name`` (``argv``: its command's) and wait until it
        serves; the ports it listens on, by protocol."""
        server, ports = Server.start_gnomon(
            [sys.executable, "-m", "gnomon_app.cli", "--log-level=INFO", *argv],
            log=self._log(name),
            env=env,
            timeout_s=timeout_s,
        )
        self.processes[name] = server
        return ports

    def _first_port(self, index: int, offset: int) -> int:
        """The port of the ``index``-th process of a kind (``offset``, e.g. META_PORTS) at its
        first start: from the port base, else 0 (any free one; the process reports it).
        Restarts reuse the ports a process got: the others were told them."""
        return 0 if self.port_base is None else self.port_base + offset + index

    def start_meta(self, index: int) -> None:
        """Start meta instance ``index``, or restart it on its port."""
        assert self.etcd is not None
        known = index < len(self.meta_endpoints)
        port = _port(self.meta_endpoints[index]) if known else self._first_port(index, META_PORTS)
        ports = self._gnomon(
            f"meta-{index}",
            [
                "meta",
                f"--etcd={self.etcd.endpoint}",
                f"--grpc-port={port}",
                f"--namespace={NAMESPACE}",
                f"--shards={self.shards}",
                f"--node-ttl-s={self.lease_ttl_s}",
                f"--followers={self.followers}",
                *self._tls_flags,
            ],
            {**self._peer_env(), **self.etcd_env(), **self.meta_env},
        )
        if not known:
            self.meta_endpoints.append(f"127.0.0.1:{ports['grpc']}")

    def start_node(self, index: int) -> None:
        """Start data node ``index`` (the next one: it joins the cluster), or restart it on
        its ports."""
        self._start_any_node(
            "node", index, self.node_endpoints, (GRPC_PORTS, HTTP_PORTS, FLIGHT_PORTS, PG_PORTS)
        )

    def start_query_node(self, index: int) -> None:
        """Start query node ``index`` (the next one), or restart it on its ports."""
        self._start_any_node(
            "query",
            index,
            self.query_endpoints,
            (QUERY_GRPC_PORTS, QUERY_HTTP_PORTS, QUERY_FLIGHT_PORTS, QUERY_PG_PORTS),
            ("--role=query",),
        )

    def _start_any_node(
        self,
        kind: str,
        index: int,
        endpoints: list[NodeEndpoints],
        offsets: tuple[int, int, int, int],
        flags: tuple[str, ...] = (),
    ) -> None:
        """Start the ``index``-th node of a ``kind`` ("node" or "query"; its endpoints kept in
        ``endpoints``, its first ports at ``offsets``: gRPC, HTTP, Flight, PostgreSQL), or
        restart it on its ports."""
        name = f"{kind}-{index}"
        if index < len(endpoints):
            known = endpoints[index]
            grpc = _port(known.grpc)
            try:
                self._start_node(
                    name, grpc, _port(known.http), _port(known.flight), flags, pg=_port(known.pg)
                )
                return
            except PortTaken:
                if self.port_base is not None:
                    raise
            # Another process's connection took a port while the node was down: its gRPC
            # port names it in the cluster and is kept; the others are picked anew.
            ports, _ = on_free_ports(
                lambda picked: self._start_node(name, grpc, 0, 0, flags, pg=picked[0])
            )
            endpoints[index] = _endpoints(name, ports)
            return
        if self.port_base is None:
            # Its gRPC endpoint, advertised, is its name in the cluster, and its PostgreSQL
            # port cannot be asked for as "any" (0 turns it off): ports picked before it
            # starts (again if another process takes one first). HTTP and Flight take any.
            ports, _ = on_free_ports(
                lambda picked: self._start_node(name, picked[0], 0, 0, flags, pg=picked[1]),
                count=2,
            )
        else:
            first = [self._first_port(index, o) for o in offsets]
            ports = self._start_node(name, first[0], first[1], first[2], flags, pg=first[3])
        endpoints.append(_endpoints(name, ports))

    def _start_node(
        self,
        name: str,
        grpc: int,
        http: int,
        flight: int,
        flags: tuple[str, ...] = (),
        *,
        pg: int,
    ) -> dict[str, int]:
        assert self.etcd is not None
        return self._gnomon(
            name,
            [
                "node",
                f"--data-dir={self.root / name}",
                f"--http-port={http}",
                f"--grpc-port={grpc}",
                f"--flight-port={flight}",
                f"--pg-port={pg}",
                f"--advertise=127.0.0.1:{grpc}",
                f"--meta={self.meta}",
                f"--wal=kafka://{self.bootstrap}",
                # tansu has no DeleteRecords: each node would find it out and warn.
                "--wal-delete-records=false",
                f"--store=s3://{BUCKET}/sst",
                f"--s3-endpoint={self.s3_endpoint}",
                f"--catalog={self.catalog}",
                f"--lease-ttl-s={self.lease_ttl_s}",
                *(["--compaction-mode=offload"] if self.compaction_nodes else []),
                *(["--auth=true"] if self.auth else []),
                *self._tls_flags,
                *self.node_flags,
                *flags,
            ],
            {**S3_ENV, **self._peer_env(), **self.etcd_env()},
        )

    def add_node(self) -> int:
        """Start one more data node (it joins the running cluster); its index."""
        index = len(self.node_endpoints)
        self.start_node(index)
        return index

    def add_compaction_node(self, env: dict[str, str] | None = None) -> int:
        """Start one more compaction node (with ``env`` beside the usual environment); its
        index."""
        index = len(self.compaction_endpoints)
        self.start_compaction_node(index, env)
        return index

    def start_compaction_node(self, index: int, env: dict[str, str] | None = None) -> None:
        """Start compaction node ``index`` (the next one), or restart it on its ports."""
        name = f"compaction-{index}"
        known = index < len(self.compaction_endpoints)
        if known:
            ep = self.compaction_endpoints[index]
            grpc, http = _port(ep.grpc), _port(ep.http)
        else:
            grpc = self._first_port(index, COMPACTION_GRPC_PORTS)
            http = self._first_port(index, COMPACTION_HTTP_PORTS)
        ports = self._gnomon(
            name,
            [
                "compaction-node",
                f"--meta={self.meta}",
                f"--store=s3://{BUCKET}/sst",
                f"--s3-endpoint={self.s3_endpoint}",
                f"--data-dir={self.root / name}",
                f"--grpc-port={grpc}",
                f"--http-port={http}",
                f"--lease-ttl-s={self.lease_ttl_s}",
                *self._tls_flags,
                *self.compaction_flags,
            ],
            {**S3_ENV, **self._peer_env(), **self.compaction_env, **(env or {})},
            # It may start a local Ray first.
            timeout_s=SLOWDOWN * (START_S + RAY_START_S),
        )
        if not known:
            self.compaction_endpoints.append(
                NodeEndpoints(name, f"127.0.0.1:{ports['http']}", f"127.0.0.1:{ports['grpc']}", "")
            )

    def signal_compaction_node(self, index: int, sig: int) -> None:
        """SIGKILL, SIGSTOP (its heartbeats stop, its lease runs on) or SIGCONT compaction
        node ``index``; after SIGKILL, wait until it is gone."""
        name = self.compaction_endpoints[index].name
        if sig == signal.SIGKILL:
            self._kill(name, sig)
        else:
            self.processes[name].kill(sig)

    def exited(self) -> list[str]:
        """The processes of the cluster that ended since this was last asked, each reaped (so
        none lingers as a zombie) and told in one line: its name and pid, how it ended (its
        exit code, or the signal that killed it) and where its log is."""
        watched = dict(self._services)
        if self.etcd is not None and self.etcd.server is not None:
            watched["etcd"] = self.etcd.server
        watched.update(self.processes)
        told = []
        for name, server in watched.items():
            if server.pid in self._told or server.proc.poll() is None:
                continue
            self._told.add(server.pid)
            how = how_it_ended(server.proc.returncode)
            told.append(f"{name} (pid {server.pid}) {how}; its log: {server.log}")
        return told

    def wait_ready(self, timeout_s: float | None = None) -> None:
        """Until every shard has a live leader among the nodes and the meta service has
        stopped moving shards onto the nodes that joined last (by default waiting as long as
        that takes with a round for each shard: see :func:`settle_timeout_s`)."""
        if timeout_s is None:
            timeout_s = settle_timeout_s(self.lease_ttl_s, rounds=self.shards)
        self.wait_settled(timeout_s=timeout_s, quiet_s=SETTLE_QUIET_S)

    @property
    def settle_timeout_s(self) -> float:
        """How long the cluster may take to settle after a node or meta instance died or
        started, by its settings (see :func:`settle_timeout_s`)."""
        return settle_timeout_s(self.lease_ttl_s)

    # -- faults (the failover tests) ---------------------------------------------------------------

    def node_index(self, name: str) -> int:
        """The index of the data node advertised as ``name`` (its gRPC endpoint)."""
        return next(i for i, ep in enumerate(self.node_endpoints) if ep.grpc == name)

    def kill_node(self, index: int, sig: int = signal.SIGKILL) -> None:
        """Kill data node ``index`` (SIGKILL: no flush, no goodbye) and wait until it is gone;
        :meth:`start_node` restarts it on the same ports."""
        self._kill(self.node_endpoints[index].name, sig)

    def kill_meta(self, index: int, sig: int = signal.SIGKILL) -> None:
        self._kill(f"meta-{index}", sig)

    def _kill(self, name: str, sig: int) -> None:
        server = self.processes[name]
        server.kill(sig)
        server.proc.wait(timeout=30)
        server.stop()

    def pause_node(self, index: int) -> None:
        """SIGSTOP data node ``index``: it keeps its sockets and state but runs nothing (its
        heartbeats stop, so meta fails its shards over once its lease expires)."""
        self.processes[self.node_endpoints[index].name].kill(signal.SIGSTOP)

    def resume_node(self, index: int) -> None:
        self.processes[self.node_endpoints[index].name].kill(signal.SIGCONT)

    def meta_leader(self) -> int:
        """The index of the meta instance leading now (the one that answers, not redirects)."""
        from meta.client import MetaClient

        for i, endpoint in enumerate(self.meta_endpoints):
            proc = self.processes.get(f"meta-{i}")
            if proc is None or proc.proc.poll() is not None:
                continue
            # No retry budget: a follower's redirect is an error here instead of followed.
            with MetaClient(
                endpoint, retry_for_s=0, timeout_s=SLOWDOWN * CALL_S, peer=self.peer
            ) as client:
                try:
                    client.shards()
                except GnomonError:
                    continue
                return i
        raise Unavailable("no meta instance is leading")

    def leader_of(self, table: str) -> int:
        """The index of the data node meta names as the leader of ``table``'s shard."""
        from meta.client import MetaClient

        with MetaClient(self.meta, peer=self.peer) as client:
            routes = client.route([table])
        if not routes or not routes[0].endpoint:
            raise Unavailable(f"table {table!r} has no leader now")
        return self.node_index(routes[0].endpoint)

    def wait_settled(
        self,
        *,
        without: Collection[str] = (),
        timeout_s: float | None = None,
        quiet_s: float = 0.0,
    ) -> None:
        """Until every shard is ready and led by a live node other than those in ``without``
        (the names of nodes just killed or paused: meta still names them until their lease
        expires), and no shard has changed hands for ``quiet_s`` (the meta service moves
        shards onto nodes that joined later, one round at a time). By default waits
        :attr:`settle_timeout_s`; while no meta instance leads (one just died) the calls are
        retried within that time."""
        from meta.client import MetaClient

        if timeout_s is None:
            timeout_s = self.settle_timeout_s
        deadline = time.monotonic() + timeout_s
        placement: dict[int, tuple[str, int]] = {}
        since = time.monotonic()
        with MetaClient(self.meta, peer=self.peer, retry_for_s=timeout_s) as client:
            while True:
                names = {n.name for n in client.nodes() if n.live} - set(without)
                shards = client.shards()
                now = {s.id: (s.leader, s.epoch) for s in shards}
                if now != placement:
                    placement, since = now, time.monotonic()
                pending = [s.id for s in shards if s.leader not in names or s.status != "ready"]
                if shards and not pending and time.monotonic() - since >= quiet_s:
                    return
                if time.monotonic() > deadline:
                    raise Unavailable(
                        f"the dev cluster did not become ready in {timeout_s}s: shards {pending} "
                        f"not ready on a live node; logs in {self.root / 'logs'}"
                    )
                time.sleep(0.1)

    def stop(self) -> None:
        # Nodes first, all at once (each flushes), then meta; the services last.
        servers = list(reversed(self.processes.values()))
        for server in servers:
            if server.proc.poll() is None:
                # A paused process would not act on the SIGTERM.
                server.kill(signal.SIGCONT)
                server.kill(signal.SIGTERM)
        for server in servers:
            server.stop()
        self.processes.clear()
        self._stack.close()

    def __enter__(self) -> DevCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _port(endpoint: str) -> int:
    return int(endpoint.rsplit(":", 1)[1])


def _boto_credentials() -> dict[str, str]:
    return {
        "aws_access_key_id": S3_ENV["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": S3_ENV["AWS_SECRET_ACCESS_KEY"],
        "region_name": S3_ENV["AWS_DEFAULT_REGION"],
    }
