"""Schedulers plan, procedures act: pure functions from a :class:`~meta.state.ClusterView` to
what should change. Nothing here touches the store or the clock, so every rule is unit-testable
on a state built in memory.

A plan moves shards (:class:`Move`: a shard's new leader and followers, checked against the epoch
it was planned at) and is cut into chunks that one procedure commits per step.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

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
    """Even out the live data nodes, in three passes over one placement (each shard moves at
    most once in the plan, to where the passes leave it):

    1. leader counts, whatever the loads (an idle cluster's may all be zero): the node leading
       most hands a shard to the one leading fewest, until counts differ by at most one (a
       node with nothing that may move is passed over for the next);
    2. loads, counts held: while a node carries more than ``max_ratio`` times the load of an
       idler one, it hands that node a shard (only if it leads more) or swaps one for a
       lighter one of it, whichever brings the two nearest;
    3. follower counts: a follower moves from the node following most to one following at
       least two fewer that holds no copy of the shard (the next such node when the idlest
       holds one), until counts differ by at most one.

    Leadership moved to a node that follows the shard is the cheap move (it already tails the
    shard's log), so it is preferred, and the old leader takes its place as follower. Shards
    pinned by an operator and busy shards count where they are but never move. Every move
    narrows a gap between two nodes, so passes end and a settled cluster plans nothing; at
    most ``max_moves`` shards move.
    """
    placement = _Placement(view)
    if len(placement.nodes) < 2:
        return []
    _even_leaders(placement, max_moves)
    _even_loads(placement, max_ratio, max_moves)
    _even_followers(placement, max_moves)
    return [Plan("rebalance", chunk) for chunk in chunked(placement.moves())]


#: Load gains smaller than this are float noise, not worth a move.
_EPSILON = 1e-9

_T = TypeVar("_T")


class _Ranking:
    """Nodes ordered by a key that changes as a plan goes: a heap holding an entry per change
    of a node's key, whose stale entries are dropped as they surface."""

    def __init__(self, nodes: Iterable[str], key: Callable[[str], tuple[Any, ...]]) -> None:
        self._key = key
        self._heap = [(key(n), n) for n in nodes]
        heapq.heapify(self._heap)

    def changed(self, *nodes: str) -> None:
        for n in nodes:
            heapq.heappush(self._heap, (self._key(n), n))

    def first(self) -> str | None:
        while self._heap:
            key, node = self._heap[0]
            if key == self._key(node):
                return node
            heapq.heappop(self._heap)
        return None

    def find(
        self, attempt: Callable[[str], _T | None], until: Callable[[str], bool]
    ) -> tuple[str, _T] | None:
        """The first node, best first, that ``attempt`` finds something for, looking no
        further than the first node ``until`` holds for."""
        seen: list[tuple[tuple[Any, ...], str]] = []
        try:
            while self._heap:
                key, node = heapq.heappop(self._heap)
                if key != self._key(node):
                    continue
                seen.append((key, node))
                if until(node):
                    return None
                found = attempt(node)
                if found is not None:
                    return node, found
            return None
        finally:
            for entry in seen:
                heapq.heappush(self._heap, entry)


class _Placement:
    """The shards of the live data nodes as a rebalancing plan moves them: each shard's leader
    and followers, and each node's shards (led, of those the movable, followed) and load."""

    def __init__(self, view: ClusterView) -> None:
        self.view = view
        self.nodes = view.live_nodes(NodeKind.DATA)
        self.leader: dict[int, str] = {}
        self.followers: dict[int, list[str]] = {}
        self.led: dict[str, set[int]] = {n: set() for n in self.nodes}
        self.movable: dict[str, set[int]] = {n: set() for n in self.nodes}
        self.followed: dict[str, set[int]] = {n: set() for n in self.nodes}
        self.load: dict[str, float] = dict.fromkeys(self.nodes, 0.0)
        self.weight: dict[int, float] = {}
        #: Ready, unpinned shards with a live leader: the ones a plan may move.
        self.free: set[int] = set()
        self.moved: set[int] = set()
        for shard in view.shards.values():
            if shard.leader not in self.led:
                continue  # unassigned, or its leader is dead: assignment's and failover's
            self.leader[shard.id] = shard.leader
            self.followers[shard.id] = list(shard.followers)
            self.led[shard.leader].add(shard.id)
            self.weight[shard.id] = view.shard_load(shard.id)
            self.load[shard.leader] += self.weight[shard.id]
            if shard.status is ShardStatus.READY and not shard.pinned:
                self.free.add(shard.id)
                self.movable[shard.leader].add(shard.id)
            for f in shard.followers:
                if f in self.followed:
                    self.followed[f].add(shard.id)
        spread = max(1, len(self.nodes))
        self.mean_load = sum(self.load.values()) / spread
        #: Leaders a node holds when counts are even, at most.
        self.most_led = -(-len(self.leader) // spread)

    def move_leader(self, shard_id: int, to: str) -> None:
        old = self.leader[shard_id]
        followers = self.followers[shard_id]
        if to in followers:
            followers[followers.index(to)] = old
            self.followed[to].discard(shard_id)
            self.followed[old].add(shard_id)
        self.leader[shard_id] = to
        for held in (self.led, self.movable):
            held[old].discard(shard_id)
            held[to].add(shard_id)
        self.load[old] -= self.weight[shard_id]
        self.load[to] += self.weight[shard_id]
        self.moved.add(shard_id)

    def move_follower(self, shard_id: int, old: str, to: str) -> None:
        followers = self.followers[shard_id]
        followers[followers.index(old)] = to
        self.followed[old].discard(shard_id)
        self.followed[to].add(shard_id)
        self.moved.add(shard_id)

    def leader_for(self, hi: str, lo: str) -> int | None:
        """The shard of ``hi`` to hand ``lo``: one ``lo`` follows first, then the one whose
        load is nearest to what ``lo`` lacks of the mean load per shard it has yet to take
        (so nodes filling up from nothing end near the mean, not with the heaviest)."""
        lacks = (self.mean_load - self.load[lo]) / max(1, self.most_led - len(self.led[lo]))
        weight = self.weight
        return min(
            self.movable[hi] & self.followed[lo] or self.movable[hi],
            key=lambda s: (abs(weight[s] - lacks), s),
            default=None,
        )

    def exchange(self, hi: str, lo: str) -> tuple[int, int | None] | None:
        """The shard ``hi`` gives ``lo`` and the one it takes back (None: none), moving the
        load nearest to half their gap; None if no exchange narrows the gap."""
        half = (self.load[hi] - self.load[lo]) / 2
        best: tuple[float, int, int] | None = None
        if len(self.led[hi]) > len(self.led[lo]):
            # A hand-over (-1: nothing back) only from the node leading more: counts hold.
            for s in self.movable[hi]:
                candidate = (abs(half - self.weight[s]), s, -1)
                best = candidate if best is None else min(best, candidate)
        # Swaps: for each shard of hi, the shards of lo nearest to leaving half the gap.
        theirs = sorted((self.weight[s], s) for s in self.movable[lo])
        for s in self.movable[hi]:
            w = self.weight[s]
            i = bisect.bisect_left(theirs, (w - half, -1))
            for back_w, back in theirs[max(0, i - 1) : i + 1]:
                candidate = (abs(half - (w - back_w)), s, back)
                best = candidate if best is None else min(best, candidate)
        if best is None or best[0] >= half - _EPSILON:
            return None
        return best[1], None if best[2] < 0 else best[2]

    def follower_for(self, hi: str, lo: str) -> int | None:
        """A shard ``hi`` follows that ``lo`` may follow instead (it holds no copy of it)."""
        return min(
            (
                s
                for s in self.followed[hi]
                if s in self.free and self.leader[s] != lo and lo not in self.followers[s]
            ),
            default=None,
        )

    def moves(self) -> list[Move]:
        moves = []
        for shard_id in sorted(self.moved):
            shard = self.view.shards[shard_id]
            leader, followers = self.leader[shard_id], tuple(self.followers[shard_id])
            if (leader, followers) != (shard.leader, shard.followers):
                moves.append(Move(shard_id, shard.epoch, leader, followers))
        return moves


def _even_leaders(p: _Placement, max_moves: int) -> None:
    _even(
        p,
        max_moves,
        high=lambda n: (-len(p.led[n]), -p.load[n], n),
        low=lambda n: (len(p.led[n]), p.load[n], n),
        attempt=p.leader_for,
        until=lambda hi, lo: len(p.led[hi]) - len(p.led[lo]) <= 1,
        act=lambda hi, lo, shard_id: p.move_leader(shard_id, lo),
    )


def _even_loads(p: _Placement, max_ratio: float, max_moves: int) -> None:
    def act(hi: str, lo: str, exchange: tuple[int, int | None]) -> None:
        given, taken = exchange
        p.move_leader(given, lo)
        if taken is not None:
            p.move_leader(taken, hi)

    _even(
        p,
        max_moves,
        high=lambda n: (-p.load[n], n),
        low=lambda n: (p.load[n], n),
        attempt=p.exchange,
        until=lambda hi, lo: p.load[hi] <= max_ratio * p.load[lo],
        act=act,
    )


def _even_followers(p: _Placement, max_moves: int) -> None:
    _even(
        p,
        max_moves,
        high=lambda n: (-len(p.followed[n]), n),
        # Among nodes following as few, those leading fewer take followers first.
        low=lambda n: (len(p.followed[n]), len(p.led[n]), n),
        attempt=p.follower_for,
        until=lambda hi, lo: len(p.followed[hi]) - len(p.followed[lo]) <= 1,
        act=lambda hi, lo, shard_id: p.move_follower(shard_id, hi, lo),
    )


def _even(
    p: _Placement,
    max_moves: int,
    *,
    high: Callable[[str], tuple[Any, ...]],
    low: Callable[[str], tuple[Any, ...]],
    attempt: Callable[[str, str], _T | None],
    until: Callable[[str, str], bool],
    act: Callable[[str, str, _T], None],
) -> None:
    """One pass: of the nodes best by ``high`` and those best by ``low`` (each looked at only
    while ``until`` does not hold for the pair), the first pair ``attempt`` finds a move for
    makes it (``act``), until none does. Both orders rank by what ``until`` compares, so the
    pass ends at a placement where no pair of nodes has a move left."""
    highs, lows = _Ranking(p.nodes, high), _Ranking(p.nodes, low)

    def partner(hi: str) -> tuple[str, _T] | None:
        return lows.find(lambda lo: attempt(hi, lo), lambda lo: until(hi, lo))

    while len(p.moved) < max_moves and (lowest := lows.first()) is not None:
        found = highs.find(partner, lambda hi: until(hi, lowest))
        if found is None:
            return
        giver, (taker, move) = found
        act(giver, taker, move)
        highs.changed(giver, taker)
        lows.changed(giver, taker)


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
