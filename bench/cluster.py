"""Cluster benchmark on loopback, in one run: failover RTO (a shard reopened elsewhere, and
taken over by its follower), the HoraeDB SDK's writes through three nodes in Direct and Proxy
mode, write stalls while shards move, follower lag, partition-table queries, and one cluster
node's ingest beside a standalone server.

(a) Failover RTO. A three-node dev cluster (real etcd, broker, S3 server, meta and ``gnomon
    node`` processes) holds several tables. Each round SIGKILLs a node that leads a table's
    shard and times, from the kill, one-row gRPC writes of that table sent to a surviving node
    (which routes or forwards them), retried until one is acknowledged. Also timed: when the
    meta service first routes the table to another node (detection), and when the killed
    node's lease expired (its liveness key vanished from etcd: before that nobody may act), so
    "after expiry" is what the cluster takes once it may. The killed node is then restarted and
    the cluster left to settle before the next round. Target: the median within the lease TTL
    + 3 s.
(b) SDK writes through the three nodes, Direct vs Proxy. The published ``horaedb-client`` in a
    subprocess: the same clients, batches and tables in both modes (every batch holds points of
    every table, so each write spans the nodes); Direct asks for routes and sends each owner its
    part, Proxy sends everything to one node, which forwards the parts it does not own. Runs
    alternate between the modes; the median of each. ``direct_vs_proxy`` = direct / proxy.
    The SDK's Direct mode sends a Route request before every write, even when all its routes
    are cached (then naming no table), so it pays one more round trip per write than Proxy.
(c) Ingest of one cluster node (WAL on the broker, SSTs on the S3 server, catalog on etcd)
    beside ``gnomon standalone`` on disk with its default durability (WAL fsynced before each
    answer): the TSBS cpu-only rows as line protocol over HTTP, the same bodies and client
    workers for both, alternating which goes first. Target: cluster / standalone >= 0.5.
(d) Shard moves under a steady writer. On the cluster of (a): a writer sends gRPC writes
    holding one row of every table of a shard, back to back, through a node that does not lead
    it, while an operator migrates that shard to another node, and then splits a shard. The
    longest wait between two acknowledged writes while each move runs (and a second after) is
    its stall: target <= 1 s. Refused writes are counted (there should be none: a node waits
    for a moving table at its new home).
(e) Followers. Another three-node cluster whose meta service gives every shard a follower
    (``--followers 1``). Follower lag: a steady writer at a table's leader while a reader sends
    follower reads to its follower; for each acknowledged write, the time until a follower
    read first sees it (p50, p99). Fast failover: as in (a), SIGKILL a table's leader; its
    follower takes over (checked), replaying only the log tail it had not applied. Target: the
    median time from the lease's expiry to the first acknowledged write <= 1 s, next to (a)'s.
(f) Partition tables: the TSBS cpu-only queries on a 4-partition table whose sub-tables the
    meta service spreads over the nodes of (a), against the same rows in one table on one
    node, every answer pair checked equal (``bench/partitions.py``); partition / one table per
    query type.

Every row written is counted afterwards. Prints a table, then one JSON line.

    python -m bench.cluster --kills 5 --lease-ttl-s 6
"""

from __future__ import annotations

import argparse
import itertools
import json
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import grpc
import pyarrow as pa

from bench.partitions import Settings as PartitionSettings
from bench.partitions import run_partitions
from bench.tsbs.cpu_only import INTERVAL_MS, cpu_only_batches
from bench.tsbs.gnomon_server import GnomonServer
from bench.tsbs.payloads import line_protocol
from bench.tsbs.serving import HttpClient
from bench.tsbs.system import send_all
from gnomon.devcluster.cluster import NAMESPACE, DevCluster
from gnomon.proto import storage_pb2
from meta.client import MetaClient
from meta.etcd import EtcdClient
from node.server.http import ARROW_STREAM
from tests.server.sdk import run_sdk

#: What the JSON line calls the durability of each ingest target.
DURABILITY = {
    "standalone": "disk WAL fsynced before each answer (--wal-sync always, the default)",
    "cluster": "WAL on the Kafka-protocol broker, SSTs on the S3 server, catalog on etcd",
}
RTO_SLACK_S = 3.0
INGEST_RATIO_TARGET = 0.5
#: One write attempt during failover; short, so a write stuck on the dead node is retried soon.
ATTEMPT_TIMEOUT_S = 1.0
RETRY_PAUSE_S = 0.05
#: Bound on the wait for a write after a kill, and on the cluster settling after a restart.
FAILOVER_LIMIT_S = 120.0
SETTLE_LIMIT_S = 60.0
#: Shard leaders unchanged this long count as settled.
SETTLED_FOR_S = 3.0
SDK_TIMEOUT_S = 900.0
WRITE = "/storage.StorageService/Write"
LP_PATH = "/influxdb/v1/write?db=public&precision=ms"


class BenchError(RuntimeError):
    """A write was refused, never acknowledged, or rows went missing."""


@dataclass(frozen=True)
class Settings:
    lease_ttl_s: int = 6
    kills: int = 5
    tables: int = 12
    sdk_clients: int = 4
    #: Points per SDK write, spread evenly over the tables.
    sdk_batch: int = 300
    sdk_writes: int = 80
    reps: int = 3
    hosts: int = 100
    steps: int = 2000
    rows_per_batch: int = 10_000
    workers: int = 2
    #: The partition-table queries (f): TSBS hosts and hours of rows.
    partition_hosts: int = 40
    partition_hours: int = 12


# -- helpers -------------------------------------------------------------------------------


def _owners(cluster: DevCluster, tables: Sequence[str]) -> dict[str, Any]:
    """Each table's route (leader endpoint, its http endpoint) as the meta service has it."""
    with MetaClient(cluster.meta) as client:
        return {r.table: r for r in client.route(list(tables))}


def _port(endpoint: str) -> int:
    return int(endpoint.rsplit(":", 1)[1])


def _scalar(http: str, query: str, *, read: str = "leader") -> Any:
    """The one value ``query`` answers, through the HTTP SQL API at ``http`` (host:port)."""
    body, content_type = HttpClient(_port(http)).post_typed(
        "/sql?format=arrow", json.dumps({"query": query, "read": read}).encode()
    )
    if not content_type.startswith(ARROW_STREAM):
        raise BenchError(f"{query}: {body[:300]!r}")
    return pa.ipc.open_stream(body).read_all().column(0)[0].as_py()


def _count(http: str, table: str) -> int:
    """``count(*)`` of ``table`` through the HTTP SQL API at ``http`` (host:port)."""
    return int(_scalar(http, f"SELECT count(*) AS n FROM {table}"))


def _poster(http: str) -> Callable[[bytes], None]:
    """Sends a line-protocol body to ``http`` (host:port), one keep-alive connection per
    calling thread."""
    client = HttpClient(_port(http))

    def post(body: bytes) -> None:
        client.post(LP_PATH, body)

    return post


def _one_row(table: str, ts: int, v: float = 1.0) -> bytes:
    req = storage_pb2.WriteRequest()
    req.context.database = "public"
    t = req.table_requests.add(table=table, tag_names=["host"], field_names=["v"])
    entry = t.entries.add()
    entry.tags.add(name_index=0).value.string_value = "failover"
    entry.field_groups.add(timestamp=ts).fields.add(name_index=0).value.float64_value = v
    return req.SerializeToString()


def _write_once(channel: grpc.Channel, table: str, ts: int, v: float = 1.0) -> str | None:
    """None if one row of ``table`` (field ``v``) was acknowledged, else why not."""
    call = channel.unary_unary(
        WRITE,
        request_serializer=lambda b: b,
        response_deserializer=storage_pb2.WriteResponse.FromString,
    )
    try:
        resp = call(_one_row(table, ts, v), timeout=ATTEMPT_TIMEOUT_S)
    except grpc.RpcError as e:
        return f"{e.code().name}: {e.details()}"
    return None if resp.header.code == 200 else f"{resp.header.code}: {resp.header.error}"


def _bounded(what: str, limit_s: float, done: Callable[[], bool], pause_s: float) -> None:
    deadline = time.monotonic() + limit_s
    while not done():
        if time.monotonic() > deadline:
            raise BenchError(f"{what}: not within {limit_s}s")
        time.sleep(pause_s)


# -- (a) failover ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Kill:
    node: str
    table: str
    rto_s: float
    #: When the meta service was first seen routing the table to another node (None: the
    #: write went through before).
    rerouted_s: float | None
    attempts: int
    first_error: str
    #: When the killed node's lease expired (its liveness key vanished from etcd).
    expired_s: float | None = None

    @property
    def after_expiry_s(self) -> float | None:
        """From the lease's expiry (when the cluster may act) to the first acknowledged
        write."""
        return None if self.expired_s is None else self.rto_s - self.expired_s


class _Expiry:
    """Watches a node's liveness key on etcd (``<namespace>/meta/live/<name>``) on a thread
    and keeps when it vanished: the moment its lease expired."""

    def __init__(self, cluster: DevCluster, name: str, began: float) -> None:
        assert cluster.etcd is not None
        self.at: float | None = None
        self._key = f"{NAMESPACE}/meta/live/{name}".encode()
        self._etcd = EtcdClient(cluster.etcd.endpoint)
        self._began = began
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-expiry", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.01):
            if self._etcd.get(self._key) is None:
                self.at = time.perf_counter() - self._began
                return

    def stop(self) -> float | None:
        self._stop.set()
        self._thread.join(timeout=10)
        self._etcd.close()
        return self.at


def _settle(cluster: DevCluster, nodes: int) -> None:
    """Until ``nodes`` nodes are live, every shard is ready and led by one of them, and no
    shard has changed for :data:`SETTLED_FOR_S` (rebalancing onto a new node is over)."""
    seen: list[Any] = [None, time.monotonic()]

    def settled() -> bool:
        with MetaClient(cluster.meta) as client:
            live = {n.name for n in client.nodes() if n.live}
            leaders = tuple((s.id, s.leader, s.epoch, s.status) for s in client.shards())
        now = time.monotonic()
        if leaders != seen[0]:
            seen[0], seen[1] = leaders, now
        return (
            len(live) == nodes
            and all(leader in live and status == "ready" for _, leader, _, status in leaders)
            and now - seen[1] >= SETTLED_FOR_S
        )

    _bounded("the cluster settling", SETTLE_LIMIT_S, settled, 0.2)


def _victim(cluster: DevCluster, tables: Sequence[str], round_: int) -> tuple[int, str]:
    """A node leading some table's shard (a different one each round where possible), and
    that table."""
    owners = _owners(cluster, tables)
    indices = [
        i for i, ep in enumerate(cluster.node_endpoints)
        if any(r.endpoint == ep.grpc for r in owners.values())
    ]  # fmt: skip
    i = indices[round_ % len(indices)]
    table = next(t for t, r in owners.items() if r.endpoint == cluster.node_endpoints[i].grpc)
    return i, table


def _moved(meta: MetaClient, table: str, old: str) -> bool:
    """Whether the meta service routes ``table`` to a node other than ``old``."""
    endpoint = meta.route([table])[0].endpoint
    return bool(endpoint) and endpoint != old


def _kill_and_write(cluster: DevCluster, i: int, table: str, ts: int) -> Kill:
    victim = cluster.node_endpoints[i]
    entry = next(ep for ep in cluster.node_endpoints if ep.name != victim.name)
    attempts, first_error = 0, ""
    rerouted: float | None = None
    with grpc.insecure_channel(entry.grpc) as channel, MetaClient(cluster.meta) as meta:
        began = time.perf_counter()
        expiry = _Expiry(cluster, victim.grpc, began)
        cluster.processes[victim.name].kill(signal.SIGKILL)
        while True:
            # The route first, so a reroute is seen before the write it lets through.
            if rerouted is None and _moved(meta, table, victim.grpc):
                rerouted = time.perf_counter() - began
            attempts += 1
            error = _write_once(channel, table, ts + attempts)
            now = time.perf_counter() - began
            if error is None:
                break
            first_error = first_error or error
            if now > FAILOVER_LIMIT_S:
                raise BenchError(f"no write of {table} acknowledged {now:.0f}s after the kill")
            time.sleep(RETRY_PAUSE_S)
        # The write may go through before the lease is seen to lapse (another node
        # served it): then the expiry still bounds when the cluster could act.
        _bounded(
            "the killed node's lease expiring",
            FAILOVER_LIMIT_S,
            lambda: expiry.at is not None,
            0.01,
        )
    return Kill(victim.name, table, now, rerouted, attempts, first_error, expiry.stop())


def failover(cluster: DevCluster, tables: Sequence[str], kills: int) -> list[Kill]:
    """``kills`` rounds of: SIGKILL a table's owner, write that table until acknowledged,
    restart the node, let the cluster settle."""
    out: list[Kill] = []
    for k in range(kills):
        _settle(cluster, len(cluster.node_endpoints))
        i, table = _victim(cluster, tables, k)
        out.append(_kill_and_write(cluster, i, table, 1_800_000_000_000 + k * 1_000_000))
        cluster.processes[cluster.node_endpoints[i].name].stop()
        cluster.start_node(i)
    _settle(cluster, len(cluster.node_endpoints))
    return out


# -- (d) shard moves under a steady writer -------------------------------------------------

MOVE_STALL_TARGET_S = 1.0
#: How long the writer goes on after a move ended (a stall may come right after it).
AFTER_MOVE_S = 1.0


def _rows(tables: Sequence[str], ts: int) -> bytes:
    """One write holding a row of each of ``tables``."""
    req = storage_pb2.WriteRequest()
    req.context.database = "public"
    for table in tables:
        t = req.table_requests.add(table=table, tag_names=["host"], field_names=["v"])
        entry = t.entries.add()
        entry.tags.add(name_index=0).value.string_value = "moves"
        entry.field_groups.add(timestamp=ts).fields.add(name_index=0).value.float64_value = 1.0
    return req.SerializeToString()


class _SteadyWriter:
    """Writes back to back on a thread, keeping when each write was acknowledged."""

    def __init__(self, endpoint: str, tables: Sequence[str], ts: int) -> None:
        self.acks: list[float] = []
        self.errors: list[str] = []
        self._endpoint, self._tables, self._ts = endpoint, list(tables), ts
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-writer", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        with grpc.insecure_channel(self._endpoint) as channel:
            call = channel.unary_unary(
                WRITE,
                request_serializer=lambda b: b,
                response_deserializer=storage_pb2.WriteResponse.FromString,
            )
            k = 0
            while not self._stop.is_set():
                k += 1
                try:
                    resp = call(_rows(self._tables, self._ts + k), timeout=FAILOVER_LIMIT_S)
                    error = None if resp.header.code == 200 else resp.header.error
                except grpc.RpcError as e:
                    error = f"{e.code().name}: {e.details()}"
                if error is None:
                    self.acks.append(time.perf_counter())
                else:
                    self.errors.append(error)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=FAILOVER_LIMIT_S)


@dataclass(frozen=True)
class ShardMove:
    kind: str
    shard: int
    tables: int
    #: The longest wait between acknowledged writes from the move's start to a second after.
    stall_s: float
    #: How long the move's procedure took.
    move_s: float
    writes: int
    refused: int
    first_refusal: str


def _move_under_writer(
    cluster: DevCluster, kind: str, start: Callable[[MetaClient, Any], Any], ts: int
) -> ShardMove:
    with MetaClient(cluster.meta) as meta:
        counts = Counter(r.shard_id for r in meta.route([t.name for t in meta.tables()]))
        # The ready shard holding the most tables (a split moves half of them).
        shard = max(
            (s for s in meta.shards() if counts[s.id] and s.status == "ready"),
            key=lambda s: (counts[s.id], -s.id),
        )
        tables = sorted(r.table for r in meta.route([t.name for t in meta.tables()])
                        if r.shard_id == shard.id)  # fmt: skip
        entry = next(ep for ep in cluster.node_endpoints if ep.grpc != shard.leader)
        writer = _SteadyWriter(entry.grpc, tables, ts)
        try:
            _bounded(
                "the writer's first acknowledgement",
                SETTLE_LIMIT_S,
                lambda: bool(writer.acks),
                0.05,
            )
            began = time.perf_counter()
            proc = start(meta, shard)
            done = meta.wait_procedure(proc.id, timeout_s=FAILOVER_LIMIT_S)
            ended = time.perf_counter()
            if done.status != "done":
                raise BenchError(f"{kind} of shard {shard.id}: {done.status} {done.error}")
            time.sleep(AFTER_MOVE_S)
        finally:
            writer.stop()
    acks = [began] + [t for t in writer.acks if t > began]
    gaps = [b - a for a, b in itertools.pairwise(acks)]
    return ShardMove(
        kind,
        shard.id,
        len(tables),
        max(gaps, default=ended + AFTER_MOVE_S - began),
        ended - began,
        len(writer.acks),
        len(writer.errors),
        writer.errors[0] if writer.errors else "",
    )


def moves(cluster: DevCluster) -> list[ShardMove]:
    """A migrate, then a split, each under a steady writer of the moved shard's tables."""

    def migrate(meta: MetaClient, shard: Any) -> Any:
        target = next(ep.grpc for ep in cluster.node_endpoints if ep.grpc != shard.leader)
        return meta.migrate(shard.id, target)

    out = []
    for k, (kind, start) in enumerate(
        (("migrate", migrate), ("split", lambda meta, shard: meta.split(shard.id)))
    ):
        _settle(cluster, len(cluster.node_endpoints))
        out.append(_move_under_writer(cluster, kind, start, 1_900_000_000_000 + k * 10_000_000))
    return out


# -- (e) followers: fast failover and lag ---------------------------------------------------

FAST_RTO_TARGET_S = 1.0
#: Writes of the steady writer whose visibility on the follower is timed.
LAG_WRITES = 300
LAG_WRITE_PAUSE_S = 0.01


def _settle_followers(cluster: DevCluster) -> None:
    """:func:`_settle`, and every shard has a live follower."""
    nodes = len(cluster.node_endpoints)

    def followed() -> bool:
        with MetaClient(cluster.meta) as client:
            live = {n.name for n in client.nodes() if n.live}
            return all(any(f in live for f in s.followers) for s in client.shards())

    _bounded("every shard having a live follower", SETTLE_LIMIT_S, followed, 0.2)
    _settle(cluster, nodes)


def _follower_lag(cluster: DevCluster, table: str) -> list[float]:
    """Seconds from each acknowledged write of ``table`` (at its leader) to the first
    follower read on its follower that sees it, under a steady writer."""
    with MetaClient(cluster.meta) as meta:
        (route,) = meta.route([table])
    follower = next(ep for ep in cluster.node_endpoints if ep.grpc == route.followers[0].endpoint)
    leader = next(ep for ep in cluster.node_endpoints if ep.grpc == route.endpoint)
    seen: list[tuple[float, float]] = []  # (answered at, newest v seen)
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            v = _scalar(follower.http, f"SELECT max(v) AS v FROM {table}", read="follower")
            seen.append((time.perf_counter(), -1.0 if v is None else float(v)))

    reader = threading.Thread(target=read, name="bench-follower-reader", daemon=True)
    acked: list[float] = []
    with grpc.insecure_channel(leader.grpc) as channel:
        base = float(_scalar(leader.http, f"SELECT max(v) AS v FROM {table}") or 0.0)
        reader.start()
        try:
            for k in range(1, LAG_WRITES + 1):
                error = _write_once(channel, table, 1_950_000_000_000 + k, base + k)
                if error is not None:
                    raise BenchError(f"a steady write to {table}'s leader failed: {error}")
                acked.append(time.perf_counter())
                time.sleep(LAG_WRITE_PAUSE_S)
            _bounded(
                "the follower seeing the last write",
                SETTLE_LIMIT_S,
                lambda: bool(seen) and seen[-1][1] >= base + LAG_WRITES,
                0.01,
            )
        finally:
            stop.set()
            reader.join(timeout=30)
    lags = []
    for k, at in enumerate(acked, start=1):
        visible = next(t for t, v in seen if v >= base + k)
        lags.append(max(0.0, visible - at))
    return lags


def followers(s: Settings, scratch: Path) -> tuple[list[float], list[Kill]]:
    """On three nodes with a follower for every shard: the follower lag under a steady
    writer, then SIGKILLs of a table's leader (its follower takes over) as in (a)."""
    tables = [f"bench_f{i}" for i in range(3)]
    with DevCluster(
        scratch / "cluster-followers", nodes=3, shards=3, followers=1, lease_ttl_s=s.lease_ttl_s
    ) as cluster:
        with grpc.insecure_channel(cluster.node_endpoints[0].grpc) as channel:
            for i, table in enumerate(tables):
                error = _write_once(channel, table, 1_940_000_000_000 + i)
                if error is not None:
                    raise BenchError(f"creating {table}: {error}")
        _settle_followers(cluster)
        lags = _follower_lag(cluster, tables[0])
        kills = []
        for k in range(min(s.kills, 3)):
            _settle_followers(cluster)
            i, table = _victim(cluster, tables, k)
            with MetaClient(cluster.meta) as meta:
                (route,) = meta.route([table])
            kill = _kill_and_write(cluster, i, table, 1_960_000_000_000 + k * 1_000_000)
            with MetaClient(cluster.meta) as meta:
                (after,) = meta.route([table])
            if after.endpoint != route.followers[0].endpoint:
                raise BenchError(f"{table} went to {after.endpoint}, not its follower")
            kills.append(kill)
            cluster.processes[cluster.node_endpoints[i].name].stop()
            cluster.start_node(i)
    return lags, kills


def _p(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# -- (b) SDK writes, Direct vs Proxy --------------------------------------------------------

_SDK_SCENARIO = """
async def scenario(ctx):
    tables, n_clients, n_writes, batch, t0 = {tables!r}, {clients}, {writes}, {batch}, {t0}
    per_table = batch // len(tables)

    def requests(k):
        out = []
        for w in range(n_writes + 1):
            req = WriteRequest()
            req.add_points([
                point(t, t0 + w * per_table + i, {{"client": V().string(f"c{{k}}")}},
                      {{"v": V().double(i)}})
                for t in tables for i in range(per_table)
            ])
            out.append(req)
        return out

    clients = [client({mode!r}) for _ in range(n_clients)]
    reqs = [requests(k) for k in range(n_clients)]

    async def send(k, todo):
        ok = failed = 0
        for req in todo:
            got = await clients[k].write(ctx, req)
            ok, failed = ok + got.get_success(), failed + got.get_failed()
        return [ok, failed]

    # The first write of each client is not timed: routes, connections, new tables (made by
    # one client first: concurrent first writes of a new table through different nodes
    # are not what is measured here).
    warm = [await send(0, reqs[0][:1])]
    warm += await asyncio.gather(*(send(k, reqs[k][:1]) for k in range(1, n_clients)))
    began = time.perf_counter()
    timed = await asyncio.gather(*(send(k, reqs[k][1:]) for k in range(n_clients)))
    elapsed = time.perf_counter() - began
    return {{"elapsed": elapsed, "warm": [sum(x) for x in zip(*warm)],
             "timed": [sum(x) for x in zip(*timed)]}}
"""


def _sdk_run(cluster: DevCluster, s: Settings, tables: Sequence[str], mode: str, run: int,
             scratch: Path) -> float:  # fmt: skip
    """Rows per second of one SDK run; every point of it acknowledged."""
    per_table = s.sdk_batch // len(tables)
    scenario = _SDK_SCENARIO.format(
        tables=list(tables), clients=s.sdk_clients, writes=s.sdk_writes, batch=s.sdk_batch,
        t0=1_700_000_000_000 + run * (s.sdk_writes + 1) * per_table, mode=mode,
    )  # fmt: skip
    work = scratch / f"sdk-{run}"
    work.mkdir(parents=True)
    out = run_sdk(cluster.node_endpoints[0].grpc, scenario, work, timeout_s=SDK_TIMEOUT_S)
    points = s.sdk_clients * s.sdk_writes * per_table * len(tables)
    if out["timed"] != [points, 0] or out["warm"] != [s.sdk_clients * per_table * len(tables), 0]:
        raise BenchError(f"SDK {mode}: acknowledged {out}, sent {points} timed points")
    return float(points / out["elapsed"])


def sdk_writes(
    cluster: DevCluster, s: Settings, tables: Sequence[str], scratch: Path
) -> dict[str, list[float]]:
    """Rows/s of each run per mode; runs alternate which mode goes first."""
    rates: dict[str, list[float]] = {"Direct": [], "Proxy": []}
    run = 0
    for rep in range(s.reps):
        for mode in ("Direct", "Proxy") if rep % 2 == 0 else ("Proxy", "Direct"):
            rates[mode].append(_sdk_run(cluster, s, tables, mode, run, scratch))
            run += 1
    per_table = s.sdk_batch // len(tables)
    expected = run * s.sdk_clients * (s.sdk_writes + 1) * per_table
    for table, route in _owners(cluster, tables).items():
        got = _count(route.endpoints["http"], table)
        if got != expected:
            raise BenchError(f"SDK writes: {table} holds {got} rows, {expected} were written")
    return rates


# -- (c) ingest: one cluster node vs standalone ---------------------------------------------


def _bodies(s: Settings, rep: int) -> list[bytes]:
    """The rep's line-protocol bodies: the same hosts and steps, its own time range."""
    start = 1_451_606_400_000 + rep * s.steps * INTERVAL_MS
    return [
        line_protocol(b)
        for b in cpu_only_batches(s.hosts, s.steps, start_ms=start, rows_per_batch=s.rows_per_batch)
    ]


def ingest(s: Settings, scratch: Path) -> dict[str, list[float]]:
    """Rows/s of each rep per target. Both run at once (the cluster's services idle while the
    standalone server writes); the first body of each is written untimed (table creation)."""
    warm = line_protocol(next(cpu_only_batches(s.hosts, 1, start_ms=1_400_000_000_000)))
    standalone = GnomonServer(scratch / "standalone")
    try:
        with DevCluster(scratch / "cluster-1", nodes=1, lease_ttl_s=s.lease_ttl_s) as cluster:
            targets = {
                "standalone": f"127.0.0.1:{standalone.http_port}",
                "cluster": cluster.node_endpoints[0].http,
            }
            posts = {name: _poster(http) for name, http in targets.items()}
            rates: dict[str, list[float]] = {name: [] for name in targets}
            for post in posts.values():
                post(warm)
            for rep in range(s.reps):
                bodies = _bodies(s, rep)
                order = list(targets) if rep % 2 == 0 else list(targets)[::-1]
                for name in order:
                    seconds = send_all(bodies, posts[name], s.workers)
                    rates[name].append(s.hosts * s.steps / seconds)
            expected = s.hosts * (1 + s.reps * s.steps)
            for name, http in targets.items():
                got = _count(http, "cpu")
                if got != expected:
                    raise BenchError(f"ingest: {name} holds {got} rows, {expected} were written")
    finally:
        standalone.stop()
    return rates


# -- the run --------------------------------------------------------------------------------


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 2)


def run(s: Settings, scratch: Path) -> dict[str, Any]:
    tables = [f"bench_t{i}" for i in range(s.tables)]
    # As many shards on each node: the meta service weighs a node by the shards it leads and
    # places every new table on the lightest, so with uneven counts all would land on one.
    nodes = 3
    with DevCluster(
        scratch / "cluster-3", nodes=nodes, shards=2 * nodes, lease_ttl_s=s.lease_ttl_s
    ) as cluster:
        # Shards move onto the nodes that joined last for a while after the cluster is up.
        _settle(cluster, nodes)
        sdk = sdk_writes(cluster, s, tables, scratch)
        spread = sorted(
            sum(r.endpoint == ep.grpc for r in _owners(cluster, tables).values())
            for ep in cluster.node_endpoints
        )
        moved = moves(cluster)
        partitioned = run_partitions(
            cluster, PartitionSettings(hosts=s.partition_hosts, hours=s.partition_hours)
        )
        kills = failover(cluster, tables, s.kills)
    lags, fast = followers(s, scratch)
    rates = ingest(s, scratch)
    stall = {m.kind: round(m.stall_s, 3) for m in moved}
    fast_after = statistics.median(k.after_expiry_s or 0.0 for k in fast)
    reopen_after = statistics.median(k.after_expiry_s or 0.0 for k in kills)
    rto = statistics.median(k.rto_s for k in kills)
    direct, proxy = (statistics.median(sdk[m]) for m in ("Direct", "Proxy"))
    standalone, node = (statistics.median(rates[t]) for t in ("standalone", "cluster"))
    return {
        "bench": "cluster",
        "rto_s": round(rto, 2),
        "lease_ttl_s": s.lease_ttl_s,
        "rto_target_s": s.lease_ttl_s + RTO_SLACK_S,
        "rto_met": rto <= s.lease_ttl_s + RTO_SLACK_S,
        "kills": [_kill_doc(k) for k in kills],
        "reopen_rto_after_expiry_s": round(reopen_after, 2),
        "fast_rto_after_expiry_s": round(fast_after, 2),
        "fast_rto_target_s": FAST_RTO_TARGET_S,
        "fast_rto_met": fast_after <= FAST_RTO_TARGET_S,
        "fast_kills": [_kill_doc(k) for k in fast],
        "follower_lag_p50_s": round(_p(lags, 0.5), 3),
        "follower_lag_p99_s": round(_p(lags, 0.99), 3),
        "follower_lag_writes": len(lags),
        "migrate_stall_s": stall["migrate"],
        "split_stall_s": stall["split"],
        "stall_target_s": MOVE_STALL_TARGET_S,
        "stall_met": max(stall.values()) <= MOVE_STALL_TARGET_S,
        "moves": [
            {**asdict(m), "stall_s": round(m.stall_s, 3), "move_s": round(m.move_s, 3)}
            for m in moved
        ],
        "partition_queries": partitioned["queries"],
        "partition_ratio_median": partitioned["ratio_median"],
        "partition_rows": partitioned["rows"],
        "direct_vs_proxy": round(direct / proxy, 2),
        "sdk_rows_per_s": {m: round(statistics.median(v)) for m, v in sdk.items()},
        "sdk_runs_rows_per_s": {m: [round(x) for x in v] for m, v in sdk.items()},
        "sdk_tables_per_node": spread,
        "cluster_vs_standalone_ingest": round(node / standalone, 2),
        "ingest_target": INGEST_RATIO_TARGET,
        "ingest_met": node / standalone >= INGEST_RATIO_TARGET,
        "ingest_rows_per_s": {"standalone": round(standalone), "cluster": round(node)},
        "ingest_runs_rows_per_s": {t: [round(x) for x in v] for t, v in rates.items()},
        "durability": DURABILITY,
        "settings": asdict(s),
    }


def _kill_doc(k: Kill) -> dict[str, Any]:
    return {
        **asdict(k),
        "rto_s": round(k.rto_s, 2),
        "rerouted_s": _round(k.rerouted_s),
        "expired_s": _round(k.expired_s),
        "after_expiry_s": _round(k.after_expiry_s),
    }


def table(doc: dict[str, Any]) -> str:
    s = doc["settings"]
    rto = ", ".join(f"{k['rto_s']:.2f}" for k in doc["kills"])
    rerouted = ", ".join(str(k["rerouted_s"]) for k in doc["kills"])
    lines = [
        ("failover RTO, median (s)", f"{doc['rto_s']:.2f}",
         f"target <= {doc['rto_target_s']:.0f} (lease TTL {doc['lease_ttl_s']} s + 3)"),
        ("  each kill (s)", rto, "SIGKILL -> first acknowledged write"),
        ("  rerouted by meta (s)", rerouted, "SIGKILL -> route names another node"),
        ("  after lease expiry (s)", f"{doc['reopen_rto_after_expiry_s']:.2f}",
         "median: lease expired -> first acknowledged write (shard reopened elsewhere)"),
        ("fast failover after expiry (s)", f"{doc['fast_rto_after_expiry_s']:.2f}",
         f"target <= {FAST_RTO_TARGET_S:.0f}; the follower takes over: "
         + ", ".join(f"{k['after_expiry_s']:.2f}" for k in doc["fast_kills"])),
        ("follower lag p50 / p99 (s)",
         f"{doc['follower_lag_p50_s']:.3f} / {doc['follower_lag_p99_s']:.3f}",
         f"ack at the leader -> seen by a follower read, {doc['follower_lag_writes']} writes"),
        *(
            (f"{m['kind']} stall (s)", f"{m['stall_s']:.3f}",
             f"target <= {MOVE_STALL_TARGET_S:.0f}; shard {m['shard']} ({m['tables']} tables) "
             f"moved in {m['move_s']:.2f} s, {m['writes']} writes, {m['refused']} refused")
            for m in doc["moves"]
        ),
        ("partition table / one table",
         f"{doc['partition_ratio_median']:.2f}",
         f"median over the TSBS query types, {doc['partition_rows']:,} rows; 4 sub-tables over "
         "3 nodes vs one table on one node, answers equal; per type: "
         + ", ".join(f"{n} {q['ratio']:.2f}" for n, q in doc["partition_queries"].items())),
        ("SDK Direct rows/s", f"{doc['sdk_rows_per_s']['Direct']:,}",
         f"{s['sdk_clients']} clients x {s['sdk_batch']} points/write over {s['tables']} tables"),
        ("SDK Proxy rows/s", f"{doc['sdk_rows_per_s']['Proxy']:,}",
         f"tables per node {doc['sdk_tables_per_node']}"),
        ("  direct / proxy", f"{doc['direct_vs_proxy']:.2f}", ""),
        ("standalone ingest rows/s", f"{doc['ingest_rows_per_s']['standalone']:,}",
         DURABILITY["standalone"]),
        ("cluster node ingest rows/s", f"{doc['ingest_rows_per_s']['cluster']:,}",
         DURABILITY["cluster"]),
        ("  cluster / standalone", f"{doc['cluster_vs_standalone_ingest']:.2f}",
         f"target >= {INGEST_RATIO_TARGET}"),
    ]  # fmt: skip
    w0 = max(len(a) for a, _, _ in lines)
    w1 = max(len(b) for _, b, _ in lines)
    return "\n".join(f"{a.ljust(w0)}  {b.rjust(w1)}  {c}".rstrip() for a, b, c in lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    defaults = Settings()
    for name, value in asdict(defaults).items():
        parser.add_argument("--" + name.replace("_", "-"), type=int, default=value)
    parser.add_argument("--scratch", default=None, help="Where the data directories go.")
    args = vars(parser.parse_args(argv))
    scratch_dir = args.pop("scratch")
    s = Settings(**args)
    if min(asdict(s).values()) < 1 or s.lease_ttl_s < 3 or s.sdk_batch < s.tables:
        parser.error("every count must be positive, lease TTL >= 3, sdk-batch >= tables")
    with tempfile.TemporaryDirectory(prefix="bench-cluster-", dir=scratch_dir) as scratch:
        doc = run(s, Path(scratch))
    print(table(doc))
    print(json.dumps(doc, separators=(",", ":")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
