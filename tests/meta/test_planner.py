"""The schedulers' pure planning rules, on cluster states built in memory."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from meta.compaction import least_loaded
from meta.model import Node, NodeKind, Shard, ShardStatus, Table
from meta.planner import (
    MOVES_PER_PROCEDURE,
    Plan,
    pick_table_shard,
    place_partitions,
    plan_assign,
    plan_failover,
    plan_followers,
    plan_rebalance,
)
from meta.state import ClusterState
from meta.tables import Batch


def cluster(
    nodes: dict[str, bool],
    shards: Sequence[tuple[str | None, tuple[str, ...]]],
    *,
    loads: dict[int, float] | None = None,
) -> ClusterState:
    """Data nodes (name -> live) and shards (leader, followers), ids in order."""
    state = ClusterState()
    state.apply(
        Batch(
            nodes=[Node(n, NodeKind.DATA, True, 1, 0) for n in nodes],
            shards=[
                Shard(
                    i,
                    leader,
                    followers,
                    1 if leader else 0,
                    ShardStatus.READY if leader else ShardStatus.UNASSIGNED,
                )
                for i, (leader, followers) in enumerate(shards)
            ],
        )
    )
    state.live = {n for n, live in nodes.items() if live}
    state.shard_loads.update(loads or {})
    return state


def leaders_after(state: ClusterState, plans: list[Plan]) -> dict[int, str | None]:
    return {m.shard_id: m.leader for p in plans for m in p.moves}


def test_failover_promotes_a_live_follower() -> None:
    state = cluster({"a": False, "b": True, "c": True}, [("a", ("b",)), ("b", ("a",))])
    plans = plan_failover(state.view())
    assert [p.node for p in plans] == ["a"]
    moves = {m.shard_id: m for m in plans[0].moves}
    assert moves[0].leader == "b" and moves[0].followers == ()
    # A shard the dead node only followed keeps its leader and loses the follower.
    assert moves[1].leader == "b" and moves[1].followers == ()


def test_failover_without_follower_reopens_on_least_loaded_node() -> None:
    state = cluster(
        {"a": False, "b": True, "c": True}, [("a", ()), ("a", ()), ("b", ()), ("b", ())]
    )
    got = leaders_after(state, plan_failover(state.view()))
    # c holds nothing, so it takes both (after the first, c=1 < b=2).
    assert got == {0: "c", 1: "c"}


def test_failover_with_no_live_node_leaves_shards_unassigned() -> None:
    state = cluster({"a": False}, [("a", ())])
    assert leaders_after(state, plan_failover(state.view())) == {0: None}


def test_failover_of_a_node_without_shards_still_records_it_offline() -> None:
    state = cluster({"a": False, "b": True}, [("b", ())])
    plans = plan_failover(state.view())
    assert [(p.node, p.moves) for p in plans] == [("a", ())]


def test_failover_is_chunked_per_procedure() -> None:
    n = MOVES_PER_PROCEDURE * 2 + 5
    state = cluster({"a": False, "b": True}, [("a", ())] * n)
    plans = plan_failover(state.view())
    assert [len(p.moves) for p in plans] == [MOVES_PER_PROCEDURE, MOVES_PER_PROCEDURE, 5]


def test_busy_shards_are_left_to_their_procedure() -> None:
    state = cluster({"a": False, "b": True}, [("a", ())])
    state.apply(Batch(shards=[Shard(0, "a", (), 1, ShardStatus.BUSY, 7)]))
    assert [p.moves for p in plan_failover(state.view())] == [()]


def test_assign_spreads_unassigned_shards_evenly() -> None:
    state = cluster({"a": True, "b": True, "c": True}, [(None, ())] * 9 + [("a", ())] * 3)
    counts = Counter(leaders_after(state, plan_assign(state.view())).values())
    assert counts == {"b": 4, "c": 4, "a": 1}


def test_assign_needs_a_live_node() -> None:
    state = cluster({"a": False}, [(None, ())])
    assert plan_assign(state.view()) == []


def test_rebalance_moves_load_to_a_new_node() -> None:
    state = cluster({"a": True, "b": True, "c": True}, [("a", ())] * 10 + [("b", ())] * 10)
    plans = plan_rebalance(state.view(), max_ratio=1.1)
    assert all(p.reason == "rebalance" for p in plans)
    after = Counter(s.leader for s in state.shards.values())
    for shard_id, leader in leaders_after(state, plans).items():
        after[state.shards[shard_id].leader] -= 1
        after[leader] += 1
    assert sorted(after.values()) == [6, 7, 7]


def test_rebalance_weighs_reported_shard_loads() -> None:
    # a leads one heavy shard, b many light ones: moving light shards would not help a.
    loads = {0: 10.0} | {i: 1.0 for i in range(1, 11)}
    state = cluster({"a": True, "b": True}, [("a", ())] + [("b", ())] * 10, loads=loads)
    assert plan_rebalance(state.view(), max_ratio=1.1) == []


def test_rebalance_ignores_dead_nodes_and_stops_when_balanced() -> None:
    state = cluster({"a": True, "b": True, "z": False}, [("a", ())] * 2 + [("b", ())] * 2)
    assert plan_rebalance(state.view()) == []


def test_new_table_goes_to_the_least_loaded_node_and_its_emptiest_shard() -> None:
    state = cluster({"a": True, "b": True}, [("a", ()), ("a", ()), ("b", ()), ("b", ())])
    state.shard_loads.update({0: 5.0, 1: 5.0})
    state.apply(Batch(tables=[Table(1, "t", b"", 2, 0), Table(2, "u", b"", 0, 0)]))
    assert pick_table_shard(state.view()) == 3


def test_new_tables_made_in_a_burst_spread_over_the_nodes() -> None:
    """Loads arrive with heartbeats; table counts are current: a burst of new tables must not
    all land on the node that looked idlest before it began."""
    state = cluster(
        {"a": True, "b": True, "c": True}, [("a", ())] * 3 + [("b", ())] * 3 + [("c", ())] * 2
    )
    placed: dict[str | None, int] = {}
    for i in range(12):
        shard_id = pick_table_shard(state.view())
        assert shard_id is not None
        state.apply(Batch(tables=[Table(i + 1, f"t{i}", b"", shard_id, 0)]))
        leader = state.shards[shard_id].leader
        placed[leader] = placed.get(leader, 0) + 1
    assert placed == {"a": 4, "b": 4, "c": 4}


def test_no_shard_for_a_table_without_live_nodes() -> None:
    state = cluster({"a": False}, [("a", ())])
    assert pick_table_shard(state.view()) is None


def test_partitions_are_spread_over_distinct_nodes() -> None:
    state = cluster({"a": True, "b": True, "c": True}, [("a", ()), ("b", ()), ("c", ())] * 2)
    shards = place_partitions(state.view(), 3)
    assert len({state.shards[s].leader for s in shards}) == 3
    # More sub-tables than nodes wrap round onto other shards of the same nodes.
    six = place_partitions(state.view(), 6)
    assert len(set(six)) == 6


def test_compaction_pick_prefers_low_load_and_takes_turns_among_equals() -> None:
    loads = {"x": 0.5, "y": 0.1, "z": 0.1}
    assert [least_loaded(["x", "y", "z"], loads, turn) for turn in range(4)] == [
        "y",
        "z",
        "y",
        "z",
    ]
    assert least_loaded([], loads, 0) is None


def test_a_shard_left_on_an_offline_node_is_still_failed_over() -> None:
    state = cluster({"a": False, "b": True}, [("a", ())])
    state.apply(Batch(nodes=[Node("a", NodeKind.DATA, False, 1, 0)]))
    assert leaders_after(state, plan_failover(state.view())) == {0: "b"}
    # Without shards, an offline node needs nothing more.
    state.apply(Batch(shards=[Shard(0, "b", (), 2, ShardStatus.READY)]))
    assert plan_failover(state.view()) == []


def test_followers_go_to_the_nodes_following_least() -> None:
    state = cluster(
        {"a": True, "b": True, "c": True, "d": False},
        [("a", ()), ("b", ()), ("c", ("a",)), ("a", ("d",))],
    )
    (plan,) = plan_followers(state.view(), 1)
    assert plan.reason == "add_follower"
    after = {m.shard_id: (m.leader, m.followers) for m in plan.moves}
    # Shard 2 has its follower; shard 3's is dead, so it gets a live one; none on its leader.
    assert set(after) == {0, 1, 3}
    assert all(leader not in followers for leader, followers in after.values())
    followed = Counter(f for _, fs in after.values() for f in fs) + Counter({"a": 1})
    assert max(followed.values()) - min(followed[n] for n in "abc") <= 1
    assert plan_followers(state.view(), 0) == []


def test_followers_need_other_live_nodes() -> None:
    state = cluster({"a": True}, [("a", ())])
    assert plan_followers(state.view(), 2) == []
