"""Schedulers plan, procedures act: pure functions from a :class:`~meta.state.ClusterView` to
what should change. Nothing here touches the store or the clock, so every rule is unit-testable
on a state built in memory.

A plan moves shards (:class:`Move`: a shard's new leader and followers, checked against the epoch
it was planned at) and is cut into chunks that one procedure commits per step.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from meta.model import NodeKind, ShardStatus
from meta.state import ClusterView

#: Shards one procedure moves: one step writes all of them in one store transaction.
MOVES_PER_PROCEDURE = 100


@dataclass(frozen=True)
class Move:
    shard_id: int
    #: The epoch the plan saw; a procedure skips the move if the shard changed since.
    epoch: int
    leader: str | None
    followers: tuple[str, ...] = ()

    def to_json(self) -> list[Any]:
        return [self.shard_id, self.epoch, self.leader, list(self.followers)]

    @staticmethod
    def from_json(v: Sequence[Any]) -> Move:
        return Move(int(v[0]), int(v[1]), v[2], tuple(v[3]))


@dataclass(frozen=True)
class Plan:
    """One procedure to start: ``reason`` names the scheduler (failover, assign, rebalance) or
    the admin operation; ``node`` is the offline node of a failover."""

    reason: str
    moves: tuple[Move, ...]
    node: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)


def chunked(moves: Sequence[Move], size: int = MOVES_PER_PROCEDURE) -> Iterator[tuple[Move, ...]]:
    for i in range(0, len(moves), size):
        yield tuple(moves[i : i + size])


class _LoadHeap:
    """Live data nodes by load, lowest first; taking one adds the weight given to it."""

    def __init__(self, view: ClusterView) -> None:
        self._heap = [(view.data_load(n), n) for n in view.live_nodes(NodeKind.DATA)]
        heapq.heapify(self._heap)

    def __bool__(self) -> bool:
        return bool(self._heap)

    def take(self, weight: float, avoid: Iterable[str] = ()) -> str | None:
        """The least-loaded node not in ``avoid`` (None if there is none)."""
        skipped: list[tuple[float, str]] = []
        banned = set(avoid)
        chosen: str | None = None
        while self._heap:
            load, name = heapq.heappop(self._heap)
            if name in banned:
                skipped.append((load, name))
                continue
            chosen = name
            heapq.heappush(self._heap, (load + weight, name))
            break
        for item in skipped:
            heapq.heappush(self._heap, item)
        return chosen


def plan_failover(view: ClusterView) -> list[Plan]:
    """For every data node whose lease is gone: record it offline and take it out of its shards.

    A shard it led gets a live follower as leader (fast: the follower already tails the WAL), or
    else is reopened on the least-loaded live node (slow: replays WAL and manifest), or else
    becomes unassigned. A shard it followed just loses that follower. A node holding no shard
    still gets a plan with no moves, which records it offline.
    """
    # Every data node without a lease: those still recorded online, and those already recorded
    # offline that some shard still names (a shard that was busy during their failover).
    dead = {
        n.name for n in view.nodes.values() if n.kind is NodeKind.DATA and n.name not in view.live
    }
    if not dead:
        return []
    heap = _LoadHeap(view)
    moves: dict[str, list[Move]] = {name: [] for name in sorted(dead)}
    for shard in sorted(view.shards.values(), key=lambda s: s.id):
        gone = [n for n in shard.nodes() if n in dead]
        if not gone or shard.status is ShardStatus.BUSY:
            continue
        followers = tuple(f for f in shard.followers if f not in dead)
        leader = shard.leader
        if leader in dead:
            alive = [f for f in followers if f in view.live]
            if alive:
                leader = alive[0]
                followers = tuple(f for f in followers if f != leader)
            else:
                leader = heap.take(view.shard_load(shard.id), avoid=followers)
        moves[gone[0]].append(Move(shard.id, shard.epoch, leader, followers))
    plans: list[Plan] = []
    for name, node_moves in moves.items():
        if node_moves or view.nodes[name].online:
            chunks = list(chunked(node_moves)) or [()]
            plans.extend(Plan("failover", chunk, node=name) for chunk in chunks)
    return plans


def plan_assign(view: ClusterView) -> list[Plan]:
    """Unassigned shards go to the least-loaded live data nodes."""
    heap = _LoadHeap(view)
    if not heap:
        return []
    moves: list[Move] = []
    for shard in sorted(view.shards.values(), key=lambda s: s.id):
        if shard.status is ShardStatus.UNASSIGNED:
            leader = heap.take(view.shard_load(shard.id))
            moves.append(Move(shard.id, shard.epoch, leader, shard.followers))
    return [Plan("assign", chunk) for chunk in chunked(moves)]


def plan_followers(view: ClusterView, wanted: int) -> list[Plan]:
    """Ready shards with fewer than ``wanted`` live followers get more, on the live data
    nodes holding no copy of them yet, those following the fewest shards first (a follower
    reads its shard's whole log, so followers are load too)."""
    if wanted <= 0:
        return []
    live = view.live_nodes(NodeKind.DATA)
    following: dict[str, int] = dict.fromkeys(live, 0)
    for shard in view.shards.values():
        for f in shard.followers:
            if f in following:
                following[f] += 1
    moves: list[Move] = []
    for shard in sorted(view.shards.values(), key=lambda s: s.id):
        if shard.status is not ShardStatus.READY or not shard.leader:
            continue
        followers = tuple(f for f in shard.followers if f in following)
        need = wanted - len(followers)
        candidates = sorted(
            (n for n in live if n not in shard.nodes()), key=lambda n: (following[n], n)
        )[: max(need, 0)]
        if not candidates:
            continue
        for node in candidates:
            following[node] += 1
        moves.append(Move(shard.id, shard.epoch, shard.leader, followers + tuple(candidates)))
    return [Plan("add_follower", chunk) for chunk in chunked(moves)]


def plan_rebalance(
    view: ClusterView, *, max_ratio: float = 1.05, max_moves: int = 10_000
) -> list[Plan]:
    """Move leader shards from the most- to the least-loaded live data node until the ratio of
    their loads is at most ``max_ratio`` (or no move helps, or ``max_moves`` are planned).

    Each move takes the shard of the busiest node whose load is closest to half the gap, among
    those smaller than the gap, so every move strictly narrows the spread between the two.
    """
    live = view.live_nodes(NodeKind.DATA)
    if len(live) < 2:
        return []
    loads = {n: view.data_load(n) for n in live}
    movable = {
        n: {
            s: view.shard_load(s)
            for s in view.leader_shards.get(n, ())
            if view.shards[s].status is ShardStatus.READY
        }
        for n in live
    }
    low = [(load, n) for n, load in loads.items()]
    high = [(-load, n) for n, load in loads.items()]
    heapq.heapify(low)
    heapq.heapify(high)
    moves: list[Move] = []
    while len(moves) < max_moves:
        lo_load, lo = _top(low, loads, sign=1)
        hi_load, hi = _top(high, loads, sign=-1)
        if hi == lo or hi_load <= 0 or hi_load <= max_ratio * lo_load:
            break
        gap = hi_load - lo_load
        best: tuple[float, int] | None = None
        for shard_id, weight in movable[hi].items():
            if weight < gap and lo not in view.shards[shard_id].followers:
                score = abs(gap / 2 - weight)
                if best is None or score < best[0]:
                    best = (score, shard_id)
        if best is None:
            break
        shard_id = best[1]
        weight = movable[hi].pop(shard_id)
        movable[lo][shard_id] = weight
        shard = view.shards[shard_id]
        moves.append(Move(shard_id, shard.epoch, lo, shard.followers))
        loads[hi] -= weight
        loads[lo] += weight
        heapq.heappush(low, (loads[hi], hi))
        heapq.heappush(low, (loads[lo], lo))
        heapq.heappush(high, (-loads[hi], hi))
        heapq.heappush(high, (-loads[lo], lo))
    return [Plan("rebalance", chunk) for chunk in chunked(moves)]


def _top(heap: list[tuple[float, str]], loads: dict[str, float], *, sign: int) -> tuple[float, str]:
    """The heap's best entry that is current (entries go stale as loads change)."""
    while True:
        key, name = heap[0]
        if sign * key == loads[name]:
            return loads[name], name
        heapq.heappop(heap)


def pick_table_shard(view: ClusterView) -> int | None:
    """The shard for a new table: on the live data node holding the fewest tables (then the
    least loaded), its shard holding the fewest tables (ready shards first). None when no
    live node leads a shard. Table counts come first because they are this service's own,
    current to the last commit, while loads arrive with heartbeats: tables made in a burst
    would all land on the node that looked idlest a heartbeat ago."""
    best: tuple[bool, int, float, int, int] | None = None
    for node in view.live_nodes(NodeKind.DATA):
        shard_ids = view.leader_shards.get(node, ())
        if not shard_ids:
            continue
        load = view.data_load(node)
        tables = sum(len(view.shard_tables.get(s, ())) for s in shard_ids)
        for shard_id in shard_ids:
            busy = view.shards[shard_id].status is not ShardStatus.READY
            key = (busy, tables, load, len(view.shard_tables.get(shard_id, ())), shard_id)
            if best is None or key < best:
                best = key
    return None if best is None else best[4]


def place_partitions(view: ClusterView, count: int) -> list[int]:
    """Shards for the ``count`` sub-tables of a partition table: on distinct nodes, least-loaded
    first, wrapping round when there are fewer nodes than sub-tables."""
    nodes = sorted(
        (
            (view.data_load(n), n)
            for n in view.live_nodes(NodeKind.DATA)
            if view.leader_shards.get(n)
        ),
    )
    if not nodes:
        return []
    chosen: list[int] = []
    used: dict[str, set[int]] = {}
    for i in range(count):
        node = nodes[i % len(nodes)][1]
        candidates = sorted(
            view.leader_shards[node],
            key=lambda s: (
                s in used.get(node, set()),
                view.shards[s].status is not ShardStatus.READY,
                len(view.shard_tables.get(s, ())),
                s,
            ),
        )
        chosen.append(candidates[0])
        used.setdefault(node, set()).add(candidates[0])
    return chosen
