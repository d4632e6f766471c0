"""The schedulers' pure planning rules, on cluster states built in memory."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import replace

import pytest

from meta.compaction import least_loaded
from meta.model import Node, NodeKind, Procedure, ProcedureStatus, Shard, ShardStatus, Table
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
from meta.procedures import apply_moves, lock_moves, release_moves
from meta.state import ClusterState
from meta.tables import Batch

pytestmark = pytest.mark.unit


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


def run(state: ClusterState, plans: Iterable[Plan]) -> None:
    """Carry ``plans`` out as their procedures would (the steps that call no data node)."""
    for i, plan in enumerate(plans):
        params = {"moves": [m.to_json() for m in plan.moves], "node": plan.node}
        proc = Procedure(i, plan.reason, params, 0, ProcedureStatus.RUNNING)
        for step in (lock_moves, apply_moves, release_moves):
            result = step(state, proc)
            state.apply(result.batch)
            proc = replace(proc, params=result.params or proc.params)


def rebalanced(state: ClusterState) -> list[Plan]:
    """Rebalance, carry the plan out, and check that planning again moves nothing."""
    plans = plan_rebalance(state.view())
    assert all(p.reason == "rebalance" for p in plans)
    for move in (m for p in plans for m in p.moves):
        assert move.leader not in move.followers
        assert len(set(move.followers)) == len(move.followers)
    run(state, plans)
    assert plan_rebalance(state.view()) == []
    return plans


def led(state: ClusterState) -> dict[str, int]:
    """Leader shards per live data node."""
    return {n: len(state.leader_shards.get(n, ())) for n in state.live}


def followed(state: ClusterState) -> dict[str, int]:
    """Follower shards per live data node."""
    counts = dict.fromkeys(state.live, 0)
    for shard in state.shards.values():
        for f in shard.followers:
            counts[f] += 1
    return counts


def spread(counts: dict[str, int]) -> int:
    return max(counts.values()) - min(counts.values())


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


def test_rebalance_spreads_leaders_held_by_one_node_followed_by_another() -> None:
    """The dev cluster's start: every shard was assigned to the first node to register and
    followed by the second; the third follows nothing and leads nothing."""
    state = cluster({"a": True, "b": True, "c": True}, [("a", ("b",))] * 8)
    plans = rebalanced(state)
    assert spread(led(state)) <= 1 and spread(followed(state)) <= 1
    assert all(len(s.followers) == 1 and s.leader not in s.followers for s in state.shards.values())
    # Leadership went to b by switching roles (b already tails those shards' logs).
    to_b = [m for p in plans for m in p.moves if m.leader == "b"]
    assert to_b and all(m.followers == ("a",) for m in to_b)


def test_rebalance_evens_leader_counts_of_an_idle_cluster() -> None:
    loads = dict.fromkeys(range(7), 0.0)
    state = cluster({"a": True, "b": True, "c": True}, [("a", ())] * 7, loads=loads)
    rebalanced(state)
    assert sorted(led(state).values()) == [2, 2, 3]


def test_rebalance_moves_load_to_a_new_node() -> None:
    state = cluster({"a": True, "b": True, "c": True}, [("a", ())] * 10 + [("b", ())] * 10)
    rebalanced(state)
    assert sorted(led(state).values()) == [6, 7, 7]


def test_a_joining_node_gets_leaders_and_followers() -> None:
    state = cluster({"a": True, "b": True, "c": True}, [("a", ("b",))] * 8)
    rebalanced(state)
    state.apply(Batch(nodes=[Node("d", NodeKind.DATA, True, 1, 0)]))
    state.live = state.live | {"d"}
    rebalanced(state)
    assert led(state)["d"] == 2 and followed(state)["d"] == 2
    assert spread(led(state)) <= 1 and spread(followed(state)) <= 1


def test_a_dead_nodes_shards_end_spread_over_the_rest() -> None:
    state = cluster({n: True for n in "abcd"}, [("a", ("b",))] * 12)
    rebalanced(state)
    state.live = {"a", "b", "c"}
    run(state, plan_failover(state.view()))
    run(state, plan_followers(state.view(), 1))
    rebalanced(state)
    assert spread(led(state)) <= 1 and spread(followed(state)) <= 1
    assert all(s.leader != "d" and "d" not in s.followers for s in state.shards.values())
    assert all(len(s.followers) == 1 for s in state.shards.values())


def test_rebalance_keeps_counts_even_and_swaps_shards_to_even_loads() -> None:
    loads = {0: 2.0, 1: 2.0, 2: 1.0, 3: 1.0}
    state = cluster(
        {"a": True, "b": True}, [("a", ()), ("a", ()), ("b", ()), ("b", ())], loads=loads
    )
    rebalanced(state)
    view = state.view()
    assert led(state) == {"a": 2, "b": 2}
    assert view.data_load("a") == view.data_load("b") == 3.0


def test_rebalance_evens_counts_before_loads() -> None:
    # One heavy shard cannot be evened out against light ones without leaving a node with
    # many more shards than the other: counts win, loads are evened where counts allow.
    loads = {0: 10.0} | {i: 1.0 for i in range(1, 11)}
    state = cluster({"a": True, "b": True}, [("a", ())] + [("b", ())] * 10, loads=loads)
    rebalanced(state)
    assert sorted(led(state).values()) == [5, 6]


def test_rebalance_leaves_pinned_and_busy_shards_and_counts_them() -> None:
    state = cluster({"a": True, "b": True, "c": True}, [("a", ())] * 4 + [("b", ())] * 4)
    state.apply(
        Batch(
            shards=[replace(state.shards[i], pinned=True) for i in range(3)]
            + [replace(state.shards[3], status=ShardStatus.BUSY, procedure=9)]
        )
    )
    plans = rebalanced(state)
    assert {m.shard_id for p in plans for m in p.moves} <= set(range(4, 8))
    # a can give nothing; b gives c what narrows their gap.
    assert led(state) == {"a": 4, "b": 2, "c": 2}


def test_a_follower_goes_to_the_next_node_when_the_idlest_holds_the_shard() -> None:
    # a follows two shards that b leads; b follows nothing but cannot follow what it leads.
    shards: list[tuple[str | None, tuple[str, ...]]] = [("b", ("a",))] * 2
    state = cluster({n: True for n in "abcd"}, shards + [(n, ()) for n in "aaccdd"])
    (plan,) = rebalanced(state)
    (move,) = plan.moves
    assert move.leader == "b" and move.followers == ("c",)


def test_rebalance_ignores_dead_nodes_and_stops_when_balanced() -> None:
    state = cluster({"a": True, "b": True, "z": False}, [("a", ())] * 2 + [("b", ())] * 2)
    assert plan_rebalance(state.view()) == []


def test_rebalance_converges_on_random_clusters() -> None:
    """Whatever the start, one plan leaves leader and follower counts within one of each
    other (where nothing pinned holds them apart) and the next plans nothing."""
    rng = random.Random(11)
    for _ in range(60):
        nodes = [f"n{i}" for i in range(rng.randint(2, 7))]
        shards = []
        for _ in range(rng.randint(1, 40)):
            copies = rng.sample(nodes, rng.randint(1, min(3, len(nodes))))
            shards.append((copies[0], tuple(copies[1:])))
        loads = {i: rng.choice([0.0, 1.0, rng.uniform(0.1, 5.0)]) for i in range(len(shards))}
        state = cluster(dict.fromkeys(nodes, True), shards, loads=loads)
        rebalanced(state)
        assert spread(led(state)) <= 1
        assert all(s.leader not in s.followers for s in state.shards.values())
        assert sorted(len(s.followers) for s in state.shards.values()) == sorted(
            len(f) for _, f in shards
        )


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
