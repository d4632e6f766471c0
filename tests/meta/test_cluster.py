"""The meta service against a real etcd, as real ``gnomon meta`` processes, with simulated
nodes registering and heartbeating through the client library: placement, routing, failover,
epochs, events, admin operations and leader takeover."""

from __future__ import annotations

import threading
from collections import Counter
from functools import partial

import pytest
from click.testing import CliRunner

from gnomon.errors import InvalidArgument, NotLeader
from gnomon.proto import meta_pb2 as pb
from gnomon_app.cli import main
from meta.client import MetaClient
from meta.model import NodeKind
from testkit.wait import wait_until

from .conftest import WAIT_S, Cluster

pytestmark = pytest.mark.integration


def leads(endpoint: str) -> bool:
    """Whether the meta instance at ``endpoint`` answers as leader (no redirect followed)."""
    with MetaClient(endpoint, retry_for_s=0) as client:
        try:
            client.nodes()
            return True
        except NotLeader:
            return False


def leaders(client: MetaClient) -> dict[int, str]:
    return {s.id: s.leader for s in client.shards()}


def all_assigned(client: MetaClient, nodes: int) -> bool:
    shards = client.shards()
    counts = Counter(s.leader for s in shards)
    return all(s.leader and s.status == "ready" for s in shards) and len(counts) == nodes


def test_new_tables_are_placed_evenly_and_routed(cluster: Cluster) -> None:
    cluster.meta(shards=6)
    client = cluster.client()
    agents = [cluster.node(i) for i in range(3)]
    wait_until("6 shards assigned over 3 nodes", lambda: all_assigned(client, 3), timeout_s=WAIT_S)
    assert Counter(leaders(client).values()) == {a.name: 2 for a in agents}

    for i in range(12):
        client.create_table(f"t{i}", b"schema")
    routes = client.route([f"t{i}" for i in range(12)])
    per_node = Counter(r.endpoint for r in routes)
    assert per_node == {a.name: 4 for a in agents}
    assert all(s.tables == 2 for s in client.shards())

    created = client.create_table("metrics", b"schema", partitions=3)
    assert [t.name for t in created] == ["metrics", "__metrics_0", "__metrics_1", "__metrics_2"]
    (route,) = client.route(["metrics"])
    assert not route.HasField("shard_id")
    assert len({p.endpoint for p in route.partitions}) == 3

    with pytest.raises(InvalidArgument, match="sub-table"):
        client.drop_table("__metrics_1")
    assert client.drop_table("metrics")
    assert not client.drop_table("metrics")
    assert {t.name for t in client.tables()} == {f"t{i}" for i in range(12)}


BAD_NAMES = ["/abs", "lp/evil", "../../evil", "a" * 5000, "nul\x00name", "", "123", "__mine"]


def test_invalid_table_names_are_refused_before_anything_is_recorded(cluster: Cluster) -> None:
    cluster.meta(shards=2)
    client = cluster.client()
    cluster.node(0)
    wait_until("2 shards assigned", lambda: all_assigned(client, 1), timeout_s=WAIT_S)
    for name in BAD_NAMES:
        with pytest.raises(InvalidArgument, match="invalid table name"):
            client.create_table(name, b"schema")
    # A valid name whose sub-tables' names would be too long.
    with pytest.raises(InvalidArgument, match="invalid table name"):
        client.create_table("p" * 254, b"schema", partitions=2)
    assert client.tables() == []
    client.create_table("fine", b"schema")
    assert [t.name for t in client.tables()] == ["fine"]


def test_failover_moves_every_leader_shard_of_a_silent_node(cluster: Cluster) -> None:
    cluster.meta(shards=6)
    client = cluster.client()
    agents = [cluster.node(i) for i in range(3)]
    wait_until("shards assigned", lambda: all_assigned(client, 3), timeout_s=WAIT_S)
    victim = agents[0].name
    # One follower for one of the victim's shards: failover promotes it instead of reopening.
    followed = min(s for s, leader in leaders(client).items() if leader == victim)
    client.wait_procedure(client.add_follower(followed, agents[1].name).id, timeout_s=20)
    before = {s.id: s for s in client.shards()}
    victim_shards = {s.id for s in before.values() if s.leader == victim}

    events: list[pb.ShardEvent] = []
    watcher = cluster.client()
    threading.Thread(target=lambda: events.extend(watcher.watch_shards()), daemon=True).start()

    agents[0].stop()
    wait_until(
        f"shards of {victim} failed over",
        lambda: victim not in leaders(client).values(),
        timeout_s=WAIT_S,
    )
    after = {s.id: s for s in client.shards()}
    for shard_id in victim_shards:
        assert after[shard_id].leader in (agents[1].name, agents[2].name)
        assert after[shard_id].epoch == before[shard_id].epoch + 1
        assert after[shard_id].status == "ready"
    assert after[followed].leader == agents[1].name
    # Shards of the live nodes kept their leader and epoch.
    for shard_id, shard in before.items():
        if shard_id not in victim_shards:
            assert after[shard_id].epoch == shard.epoch
    (node,) = [n for n in client.nodes() if n.name == victim]
    assert not node.online and not node.live

    wait_until(
        "OPEN events for the new leaders",
        lambda: (
            {(e.shard_id, e.node) for e in events if e.kind == pb.ShardEvent.OPEN}
            >= {(s, after[s].leader) for s in victim_shards}
        ),
        timeout_s=WAIT_S,
    )
    watcher.close()


def test_admin_operations_change_epochs_and_tables(cluster: Cluster) -> None:
    cluster.meta(shards=4)
    client = cluster.client()
    # Leases long enough that a busy machine delaying a heartbeat does not take a node
    # offline mid-test (this test is about admin operations, not failover).
    a, b = cluster.node(0, ttl_s=15), cluster.node(1, ttl_s=15)
    wait_until("shards assigned", lambda: all_assigned(client, 2), timeout_s=WAIT_S)
    for i in range(8):
        client.create_table(f"t{i}")
    shard = next(s for s in client.shards() if s.leader == a.name)

    done = client.wait_procedure(client.migrate(shard.id, b.name).id, timeout_s=20)
    assert done.status == "done"
    moved = next(s for s in client.shards() if s.id == shard.id)
    assert (moved.leader, moved.epoch) == (b.name, shard.epoch + 1)

    split = client.wait_procedure(client.split(shard.id).id, timeout_s=20)
    assert split.status == "done"
    by_id = {s.id: s for s in client.shards()}
    assert len(by_id) == 5 and by_id[shard.id].tables == 1
    new_id = max(by_id)
    assert by_id[new_id].tables == 1 and by_id[new_id].leader == b.name

    merged = client.wait_procedure(client.merge(shard.id, new_id).id, timeout_s=20)
    assert merged.status == "done"
    by_id = {s.id: s for s in client.shards()}
    assert new_id not in by_id and by_id[shard.id].tables == 2
    assert len(client.tables()) == 8

    # The same through the CLI.
    meta = ",".join(m.endpoint for m in cluster.metas)
    runner = CliRunner()
    listed = runner.invoke(main, ["admin", "nodes", "--meta", meta])
    assert listed.exit_code == 0 and a.name in listed.output and b.name in listed.output
    assert "t7" in runner.invoke(main, ["admin", "tables", "--meta", meta]).output
    moved_back = runner.invoke(main, ["admin", "migrate", "--meta", meta, str(shard.id), a.name])
    assert moved_back.exit_code == 0 and "done" in moved_back.output, moved_back.output
    shards_out = runner.invoke(main, ["admin", "shards", "--meta", meta]).output
    assert f"{shard.id} " in shards_out and "ready" in shards_out
    refused = runner.invoke(main, ["admin", "split", "--meta", meta, "999"])
    assert refused.exit_code == 1 and "shard 999 does not exist" in refused.output


def test_compaction_nodes_are_picked_by_load(cluster: Cluster) -> None:
    cluster.meta(shards=1)
    client = cluster.client()
    assert client.pick_compaction_node() is None
    loads = {100: 0.0, 101: 0.0}
    c1, c2 = (
        cluster.node(i, kind=NodeKind.COMPACTION, load=partial(loads.__getitem__, i)) for i in loads
    )
    # Equal loads (none reported yet): turns.
    picks = {client.pick_compaction_node() for _ in range(4)}
    assert picks == {c1.name, c2.name}
    loads.update({100: 0.9, 101: 0.2})
    client.heartbeat(c1.name, load=0.9)
    client.heartbeat(c2.name, load=0.2)
    assert {client.pick_compaction_node() for _ in range(4)} == {c2.name}
    c2.stop()
    wait_until("only c1 left", lambda: client.pick_compaction_node() == c1.name, timeout_s=WAIT_S)


def test_a_standby_meta_takes_over_when_the_leader_is_killed(cluster: Cluster) -> None:
    first, second = cluster.meta(shards=4), cluster.meta(shards=4)
    client = cluster.client()
    agents = [cluster.node(i, ttl_s=15) for i in range(2)]
    wait_until("shards assigned", lambda: all_assigned(client, 2), timeout_s=WAIT_S)
    for i in range(5):
        client.create_table(f"t{i}")
    before = {(s.id, s.leader, s.epoch, s.tables) for s in client.shards()}
    routes = client.route([f"t{i}" for i in range(5)])

    leader, standby = (first, second) if leads(first.endpoint) else (second, first)
    assert not leads(standby.endpoint)
    leader.kill()

    # The client finds the new leader by itself, and it knows everything the old one did.
    assert client.route([f"t{i}" for i in range(5)]) == routes
    assert {(s.id, s.leader, s.epoch, s.tables) for s in client.shards()} == before
    assert all(n.live for n in client.nodes() if n.name in {a.name for a in agents})
    client.create_table("after")
    assert {t.name for t in client.tables()} == {f"t{i}" for i in range(5)} | {"after"}
    assert leads(standby.endpoint)
