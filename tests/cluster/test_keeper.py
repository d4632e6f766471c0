"""Data-node engines driven by a real meta service: real etcd (meta state and the catalog and
manifests through the StructuredTable SPI), a real ``gnomon meta`` process, WAL regions on a
real Kafka-protocol broker; the engines, their shard keepers and heartbeats run in this
process. A node that stops heartbeating (as a paused or partitioned node would) loses its
shards to the other, which reads every row the first acknowledged, and the first can then
neither acknowledge a write nor commit a flush."""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest

from gnomon.errors import AlreadyExists, Fenced, NotFound, NotOwner
from gnomon.store.etcd import EtcdStore
from gnomon_app.devcluster.brokers import Broker, running_tansu
from meta.client import MetaClient, NodeAgent
from meta.model import NodeKind, ShardStatus
from node.cluster import tables
from node.cluster.keeper import ShardKeeper
from node.cluster.lease import LeaseClock
from node.cluster.placer import MetaPlacer
from node.cluster.routes import RouteCache
from node.engine.config import EngineConfig
from node.engine.engine import Engine
from node.engine.options import TableOptions
from objectstore.local import LocalObjectStore
from testkit.etcd import EtcdServer
from testkit.wait import wait_until
from tests.engine.conftest import CPU, cpu_batch
from tests.meta.conftest import NODE_TTL_S, WAIT_S, Cluster
from wal_kafka import KafkaWal

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    with running_tansu(tmp_path_factory.mktemp("tansu")) as running:
        yield running


@dataclass
class DataNode:
    name: str
    engine: Engine
    lease: LeaseClock
    agent: NodeAgent
    keeper: ShardKeeper

    def stop_heartbeats(self) -> None:
        self.keeper.stop()
        self.agent.stop()


@pytest.fixture
def cluster(etcd: EtcdServer, tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(etcd, tmp_path)
    yield c
    c.close()


T = TypeVar("T")


def _while_lease_lapsed(call: Callable[[], T]) -> T:
    """``call()``, tried again for up to WAIT_S while the node refuses it for a lease that is
    not current (checked before anything is written), as the servers try such requests
    again; the engine alone does not."""
    deadline = time.monotonic() + WAIT_S
    while True:
        try:
            return call()
        except Fenced:
            if time.monotonic() > deadline:
                raise
        time.sleep(0.1)


def _node(
    stack: contextlib.ExitStack, cluster: Cluster, broker: Broker, index: int, wal_ns: str
) -> DataNode:
    name = f"127.0.0.1:{21000 + index}"
    data_dir = cluster.workdir / f"node{index}"
    os.makedirs(data_dir, exist_ok=True)
    client = cluster.client()
    placer = MetaPlacer(client, RouteCache(client))
    engine = Engine(
        EngineConfig(data_dir=str(data_dir), compaction_threads=0, gc_interval_s=0),
        meta=EtcdStore(cluster.etcd.endpoint, namespace=f"{cluster.namespace}/catalog"),
        wal=KafkaWal(broker.bootstrap, namespace=wal_ns),
        store=LocalObjectStore(str(cluster.workdir / "sst")),
        placer=placer,
    )
    stack.callback(engine.close)
    lease = LeaseClock()
    agent = NodeAgent(
        client, name, NodeKind.DATA, ttl_s=NODE_TTL_S, interval_s=0.3, on_renewed=lease.renewed
    )
    agent.start()
    keeper = ShardKeeper(engine, client, name, lease=lease, interval_s=0.3, on_pass=lease.caught_up)
    # As a node wires them: a table placed here is opened at its first use, not only at
    # the next periodic pass (the test uses tables right after another node made them).
    placer.catch_up = keeper.reconcile
    keeper.start()
    node = DataNode(name, engine, lease, agent, keeper)
    stack.callback(node.stop_heartbeats)
    return node


def _led_by(client: MetaClient, name: str) -> dict[int, int]:
    return {s.id: s.epoch for s in client.shards() if s.leader == name}


def test_shards_follow_the_meta_service_and_fail_over(cluster: Cluster, broker: Broker) -> None:
    cluster.meta(shards=4)
    client = cluster.client()
    wal_ns = f"ns{uuid.uuid4().hex[:6]}"
    with contextlib.ExitStack() as stack:
        a = _node(stack, cluster, broker, 1, wal_ns)
        b = _node(stack, cluster, broker, 2, wal_ns)
        # Settled: the leaders spread two and two (the second node's first shard comes
        # before its second, and a table placed between them could move with it).
        for node in (a, b):
            wait_until(
                f"{node.name} to open the two shards it leads",
                lambda n=node: (
                    len(_led_by(client, n.name)) == 2
                    and n.engine.shards() == _led_by(client, n.name)
                ),
                timeout_s=WAIT_S,
            )

        # A table placed by the meta service opens on its shard's leader.
        (info,) = client.create_table("cpu", tables.encode(CPU, TableOptions()))
        owner, other = (a, b) if info.shard_id in a.engine.shards() else (b, a)
        owner.keeper.poke()
        wait_until(
            "the owner to open cpu", lambda: "cpu" in owner.engine.list_tables(), timeout_s=WAIT_S
        )
        assert owner.engine.shard_of("cpu") == info.shard_id
        assert "cpu" not in other.engine.list_tables()
        owner.engine.write("cpu", cpu_batch(["h1", "h2"], [1, 2], [1.0, 2.0]))
        routes = RouteCache(client)
        assert routes.lookup(["cpu", "nosuch"])["cpu"].endpoint == owner.name
        assert set(routes.lookup(["cpu", "nosuch"])) == {"cpu"}

        # The owner stops heartbeating (paused, partitioned): past its lease the other node
        # leads its shards at a later epoch and reads what it acknowledged.
        epoch = _led_by(client, owner.name)[info.shard_id]
        owner.stop_heartbeats()
        wait_until(
            "the meta service to fail the shard over",
            lambda: _led_by(client, other.name).get(info.shard_id, 0) > epoch,
            timeout_s=WAIT_S,
        )
        wait_until("cpu to reopen", lambda: "cpu" in other.engine.list_tables(), timeout_s=WAIT_S)
        assert routes.lookup(["cpu"])["cpu"].endpoint == owner.name  # cached until told
        routes.invalidate(shard_id=info.shard_id)
        assert routes.lookup(["cpu"])["cpu"].endpoint == other.name
        got = other.engine.read_all("cpu", columns=["usage"]).column("usage").to_pylist()
        assert sorted(got) == [1.0, 2.0]
        other.engine.write("cpu", cpu_batch(["h3"], [3], [3.0]))

        # The deposed owner fenced itself before the failover and cannot commit after it.
        assert not owner.lease()
        with pytest.raises(Fenced):
            owner.engine.write("cpu", cpu_batch(["h4"], [4], [4.0]))
        with pytest.raises((Fenced, NotOwner)):
            owner.engine.flush("cpu")
        other.engine.flush("cpu")
        got = other.engine.read_all("cpu", columns=["usage"]).column("usage").to_pylist()
        assert sorted(got) == [1.0, 2.0, 3.0]


def test_tables_made_through_any_node_live_on_their_owner(cluster: Cluster, broker: Broker) -> None:
    cluster.meta(shards=4)
    client = cluster.client()
    wal_ns = f"ns{uuid.uuid4().hex[:6]}"
    with contextlib.ExitStack() as stack:
        nodes = [_node(stack, cluster, broker, i, wal_ns) for i in (3, 4)]
        # Spread 2 and 2 and at rest: a shard still moving (the second node joined after
        # the first took every shard) refuses its tables' writes until it has moved.
        for node in nodes:
            wait_until(
                f"{node.name} to open the 2 shards it leads",
                lambda n=node: (
                    len(_led_by(client, n.name)) == 2
                    and all(s.status == ShardStatus.READY.value for s in client.shards())
                    and n.engine.shards() == _led_by(client, n.name)
                ),
                timeout_s=WAIT_S,
            )
        names = [f"t{i}" for i in range(6)]
        for i, name in enumerate(names):
            node = nodes[i % 2]
            # A refusal for a lease not current (a busy machine delays its renewal) comes
            # after the table was placed: tried again, as servers try, it is found made.
            _while_lease_lapsed(
                lambda n=node, t=name: n.engine.create_table(t, CPU, if_not_exists=True)
            )
        with pytest.raises(AlreadyExists):
            nodes[1].engine.create_table("t0", CPU)
        assert nodes[1].engine.create_table("t0", CPU, if_not_exists=True).name == "t0"
        routes = {r.table: r.endpoint for r in client.route(names)}
        by_name = {n.name: n for n in nodes}
        for name in names:
            owner = by_name[routes[name]]
            other = nodes[1] if owner is nodes[0] else nodes[0]
            # The owner opens a table made through the other node at its first use.
            assert (
                _while_lease_lapsed(
                    lambda o=owner, t=name: o.engine.write(t, cpu_batch(["h"], [1], [1.0]))
                )
                == 1
            )
            with pytest.raises(NotOwner, match=owner.name):
                other.engine.write(name, cpu_batch(["h"], [2], [2.0]))
        # Dropped behind the owner's back (an operator through the meta service): the owner
        # drops its data at its next pass.
        owner = by_name[routes["t5"]]
        assert client.drop_table("t5")
        wait_until(
            "t5 to be dropped", lambda: "t5" not in owner.engine.list_tables(), timeout_s=WAIT_S
        )
        with pytest.raises(NotFound):
            owner.engine.write("t5", cpu_batch(["h"], [3], [3.0]))
