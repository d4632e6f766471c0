"""Shards moved on a running cluster while clients write and read (real etcd, broker, S3
server, meta and ``gnomon node`` processes): an operator's migrate, split and merge, and the
rebalancing that gives a joining node shards and spreads leaders and followers evenly over
the nodes after a start, a join and a death. The contract under each move: the writer (the
published HoraeDB SDK) and a SQL reader see no error at all, and every acknowledged row is
stored exactly once afterwards.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gnomon_app.devcluster.cluster import DevCluster
from meta.client import MetaClient
from testkit.spread import SPREAD_LIMIT_S, copies
from testkit.wait import wait_until
from tests.cluster.support import http_sql
from tests.cluster.test_failover import (
    LEASE_TTL_S,
    SETTLE_S,
    Rows,
    Writer,
    assert_acked_once,
    create_tables,
)

pytestmark = pytest.mark.cluster

TABLES = [f"mv_{i}" for i in range(4)]


class Reader:
    """Counts a table's rows over SQL through one node, again and again, keeping errors."""

    def __init__(self, endpoint: str, table: str) -> None:
        self.errors: list[str] = []
        self.reads = 0
        self._endpoint, self._table = endpoint, table
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            status, body = http_sql(self._endpoint, f"SELECT count(*) AS n FROM {self._table}")
            if status != 200:
                self.errors.append(f"{status} {body}")
            self.reads += 1

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=60)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[DevCluster]:
    with DevCluster(tmp_path / "cluster", nodes=2, shards=2, lease_ttl_s=LEASE_TTL_S) as running:
        yield running


def _shard_of(client: MetaClient, table: str) -> int:
    (route,) = client.route([table])
    return route.shard_id


def _done(client: MetaClient, proc_id: int) -> None:
    proc = client.wait_procedure(proc_id, timeout_s=SETTLE_S)
    assert proc.status == "done", f"{proc.kind}: {proc.status} {proc.error}"


def test_migrate_split_and_merge_under_a_writer_and_a_reader(
    cluster: DevCluster, tmp_path: Path
) -> None:
    create_tables(cluster, TABLES)
    writer = Writer(cluster, TABLES, tmp_path, batch=10)
    reader = Reader(cluster.node_endpoints[0].http, TABLES[0])
    try:
        with MetaClient(cluster.meta) as client:
            writer.wait_progress(3)

            shard = _shard_of(client, TABLES[0])
            (info,) = [s for s in client.shards() if s.id == shard]
            target = next(n.grpc for n in cluster.node_endpoints if n.grpc != info.leader)
            _done(client, client.migrate(shard, target).id)
            assert cluster.leader_of(TABLES[0]) == cluster.node_index(target)
            writer.wait_progress(3)

            # Every table on one shard, then split it: half of them move to a new shard.
            other = next(s.id for s in client.shards() if s.id != shard)
            _done(client, client.merge(shard, other).id)
            assert {_shard_of(client, t) for t in TABLES} == {shard}
            writer.wait_progress(3)

            _done(client, client.split(shard).id)
            homes = {_shard_of(client, t) for t in TABLES}
            assert len(homes) == 2 and shard in homes
            writer.wait_progress(3)
    finally:
        reader.stop()
        writer.stop()
    assert writer.errors == [], writer.errors[:3]
    assert reader.errors == [], reader.errors[:3]
    assert reader.reads > 0
    assert_acked_once(cluster, writer.snapshot())


def test_a_joining_node_receives_shards(tmp_path: Path) -> None:
    # Two shards a node: the third node can take one and narrow the spread.
    with DevCluster(tmp_path / "cluster", nodes=2, shards=4, lease_ttl_s=LEASE_TTL_S) as cluster:
        _join(cluster, tmp_path)


def _join(cluster: DevCluster, tmp_path: Path) -> None:
    create_tables(cluster, TABLES[:2])
    writer = Writer(cluster, TABLES[:2], tmp_path, batch=10)
    try:
        writer.wait_progress(2)
        joined = cluster.add_node()
        name = cluster.node_endpoints[joined].grpc
        with MetaClient(cluster.meta) as client:
            # The rebalancer's promise: within 30 s, with no operator action.
            wait_until(
                "the new node leads a shard",
                lambda: any(s.leader == name for s in client.shards()),
                timeout_s=30,
            )
        writer.wait_progress(3)
    finally:
        writer.stop()
    assert writer.errors == [], writer.errors[:3]
    assert_acked_once(cluster, writer.snapshot())


def test_leaders_and_followers_spread_soon_after_a_start_a_join_and_a_death(
    tmp_path: Path,
) -> None:
    """As ``gnomon dev-cluster --nodes 3 --followers 1`` starts a cluster: its nodes register
    one after another, so the first is assigned every shard and the second follows them all.
    Within 30 s the nodes' leader shards, and their follower shards, differ by at most one;
    so again within 30 s of a fourth node joining, and of a node dying."""
    began = time.monotonic()
    with (
        DevCluster(tmp_path / "cluster", nodes=3, followers=1, lease_ttl_s=LEASE_TTL_S) as cluster,
        MetaClient(cluster.meta) as client,
    ):

        def spread(what: str, nodes: list[str], since: float) -> None:
            limit = SPREAD_LIMIT_S - (time.monotonic() - since)
            wait_until(
                f"an even spread {what}", lambda: copies(client, nodes).even, timeout_s=limit
            )

        nodes = [n.grpc for n in cluster.node_endpoints]
        spread("after the start", nodes, began)
        began = time.monotonic()
        joined = cluster.node_endpoints[cluster.add_node()].grpc
        spread("after a join", [*nodes, joined], began)
        began = time.monotonic()
        cluster.kill_node(0)
        spread("after a death", [*nodes[1:], joined], began)


def test_a_split_then_a_migrate_loses_no_row_written_through_stale_routes(
    tmp_path: Path,
) -> None:
    """A split moves a table to a new shard on the same node; a migrate then moves that shard
    away while a Direct-mode writer still sends to the old leader, which is killed last. The
    old leader's route cache still places the table in the shard it left (a split tells nodes
    of its new shard only), and a node must never open a table in a shard on such a route's
    word: it would acknowledge rows into a log that the table's owner never reads."""
    tables = [f"sp_{i}" for i in range(2)]
    with DevCluster(
        tmp_path / "cluster", nodes=3, shards=1, followers=1, lease_ttl_s=LEASE_TTL_S
    ) as cluster:
        with MetaClient(cluster.meta) as client:
            (shard,) = client.shards()
            old = cluster.node_index(shard.leader)
            # Created through the leader, which caches both routes (shard 0, itself).
            create_tables(cluster, tables, through=old)
            direct = [Rows(t) for t in tables]
            for rows in direct:
                assert rows.write(shard.leader)[0] == 200
            _done(client, client.split(shard.id).id)
            moved = next(t for t in tables if _shard_of(client, t) != shard.id)
            new_shard = _shard_of(client, moved)
            # The SDK asks the old leader for routes: it names itself for both tables.
            writer = Writer(cluster, tables, tmp_path, batch=10, entry=old)
            try:
                writer.wait_progress(3)
                target = next(n.grpc for n in cluster.node_endpoints if n.grpc != shard.leader)
                _done(client, client.migrate(new_shard, target).id)
                assert cluster.leader_of(moved) == cluster.node_index(target)
                for rows in direct:
                    code, error = rows.write(shard.leader)
                    assert code == 200, error
                writer.wait_progress(5)
                # Every row acknowledged so far is where the table's owner reads it.
                assert_acked_once(cluster, _with(writer.snapshot(), direct), down={old})
                cluster.kill_node(old)
                cluster.wait_settled(without={shard.leader}, timeout_s=SETTLE_S)
                writer.wait_progress(3)
            finally:
                writer.stop()
        assert_acked_once(cluster, _with(writer.snapshot(), direct), down={old})


def _with(acked: dict[str, list[int]], direct: list[Rows]) -> dict[str, list[int]]:
    return {t: ids + next(r.acked for r in direct if r.table == t) for t, ids in acked.items()}
