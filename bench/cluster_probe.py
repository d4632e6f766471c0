"""What the cluster benchmark does to a running dev cluster and how it watches it: one-row
writes retried until acknowledged, routes and owners, the cluster settling, a node SIGKILLed
with its lease's expiry watched on etcd (``bench/cluster.py`` (a), (e))."""

from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import grpc
import pyarrow as pa

from bench.tsbs.serving import HttpClient
from gnomon.proto import storage_pb2
from gnomon_app.devcluster.cluster import NAMESPACE, DevCluster
from meta.client import MetaClient
from meta.etcd import EtcdClient
from node.server.http import ARROW_STREAM

#: One write attempt during failover; short, so a write stuck on the dead node is retried soon.
ATTEMPT_TIMEOUT_S = 1.0
RETRY_PAUSE_S = 0.05
#: Bound on the wait for a write after a kill, and on the cluster settling after a restart.
FAILOVER_LIMIT_S = 120.0
SETTLE_LIMIT_S = 60.0
#: Shard leaders unchanged this long count as settled.
SETTLED_FOR_S = 3.0
WRITE = "/storage.StorageService/Write"


class BenchError(RuntimeError):
    """A write was refused, never acknowledged, or rows went missing."""


def owners(cluster: DevCluster, tables: Sequence[str]) -> dict[str, Any]:
    """Each table's route (leader endpoint, its http endpoint) as the meta service has it."""
    with MetaClient(cluster.meta) as client:
        return {r.table: r for r in client.route(list(tables))}


def port(endpoint: str) -> int:
    return int(endpoint.rsplit(":", 1)[1])


def scalar(http: str, query: str, *, read: str = "leader") -> Any:
    """The one value ``query`` answers, through the HTTP SQL API at ``http`` (host:port)."""
    body, content_type = HttpClient(port(http)).post_typed(
        "/sql?format=arrow", json.dumps({"query": query, "read": read}).encode()
    )
    if not content_type.startswith(ARROW_STREAM):
        raise BenchError(f"{query}: {body[:300]!r}")
    return pa.ipc.open_stream(body).read_all().column(0)[0].as_py()


def count(http: str, table: str) -> int:
    """``count(*)`` of ``table`` through the HTTP SQL API at ``http`` (host:port)."""
    return int(scalar(http, f"SELECT count(*) AS n FROM {table}"))


def one_row(table: str, ts: int, v: float = 1.0) -> bytes:
    req = storage_pb2.WriteRequest()
    req.context.database = "public"
    t = req.table_requests.add(table=table, tag_names=["host"], field_names=["v"])
    entry = t.entries.add()
    entry.tags.add(name_index=0).value.string_value = "failover"
    entry.field_groups.add(timestamp=ts).fields.add(name_index=0).value.float64_value = v
    return req.SerializeToString()


def write_once(channel: grpc.Channel, table: str, ts: int, v: float = 1.0) -> str | None:
    """None if one row of ``table`` (field ``v``) was acknowledged, else why not."""
    call = channel.unary_unary(
        WRITE,
        request_serializer=lambda b: b,
        response_deserializer=storage_pb2.WriteResponse.FromString,
    )
    try:
        resp = call(one_row(table, ts, v), timeout=ATTEMPT_TIMEOUT_S)
    except grpc.RpcError as e:
        return f"{e.code().name}: {e.details()}"
    return None if resp.header.code == 200 else f"{resp.header.code}: {resp.header.error}"


def bounded(what: str, limit_s: float, done: Callable[[], bool], pause_s: float) -> None:
    deadline = time.monotonic() + limit_s
    while not done():
        if time.monotonic() > deadline:
            raise BenchError(f"{what}: not within {limit_s}s")
        time.sleep(pause_s)


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


def settle(cluster: DevCluster, nodes: int) -> None:
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

    bounded("the cluster settling", SETTLE_LIMIT_S, settled, 0.2)


def victim(cluster: DevCluster, tables: Sequence[str], round_: int) -> tuple[int, str]:
    """A node leading some table's shard (a different one each round where possible), and
    that table."""
    routes = owners(cluster, tables)
    indices = [
        i for i, ep in enumerate(cluster.node_endpoints)
        if any(r.endpoint == ep.grpc for r in routes.values())
    ]  # fmt: skip
    i = indices[round_ % len(indices)]
    table = next(t for t, r in routes.items() if r.endpoint == cluster.node_endpoints[i].grpc)
    return i, table


def moved(meta: MetaClient, table: str, old: str) -> bool:
    """Whether the meta service routes ``table`` to a node other than ``old``."""
    endpoint = meta.route([table])[0].endpoint
    return bool(endpoint) and endpoint != old


def kill_and_write(cluster: DevCluster, i: int, table: str, ts: int) -> Kill:
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
            if rerouted is None and moved(meta, table, victim.grpc):
                rerouted = time.perf_counter() - began
            attempts += 1
            error = write_once(channel, table, ts + attempts)
            now = time.perf_counter() - began
            if error is None:
                break
            first_error = first_error or error
            if now > FAILOVER_LIMIT_S:
                raise BenchError(f"no write of {table} acknowledged {now:.0f}s after the kill")
            time.sleep(RETRY_PAUSE_S)
        # The write may go through before the lease is seen to lapse (another node
        # served it): then the expiry still bounds when the cluster could act.
        bounded(
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
        settle(cluster, len(cluster.node_endpoints))
        i, table = victim(cluster, tables, k)
        out.append(kill_and_write(cluster, i, table, 1_800_000_000_000 + k * 1_000_000))
        cluster.processes[cluster.node_endpoints[i].name].stop()
        cluster.start_node(i)
    settle(cluster, len(cluster.node_endpoints))
    return out
