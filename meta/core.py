"""What the leading meta instance does: registration and heartbeats, tables and routes, admin
operations, compaction-node picks and the scheduling round. The gRPC service
(``meta/service.py``) is a thin layer over it; the bench drives it directly.

All reads are served from the in-memory :class:`~meta.state.ClusterState`; every change is a
store commit (fenced by the leader's term) followed by the same change in memory, both under one
lock, so memory never runs ahead of the store.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from gnomon.errors import AlreadyExists, InvalidArgument, NotFound, Unavailable
from gnomon.names import check_new_table_name, partition_name
from gnomon.shard_control import NodeCalls
from meta.compaction import CompactionPicker
from meta.events import EventBus, ShardEvent, opened
from meta.liveness import NodeLeases
from meta.model import Node, NodeKind, Procedure, Shard, ShardStatus, Table
from meta.planner import (
    Move,
    Plan,
    pick_table_shard,
    place_partitions,
    plan_assign,
    plan_failover,
    plan_followers,
    plan_rebalance,
)
from meta.runner import ProcedureRunner
from meta.store import NEXT_TABLE_ID, ClusterStore, now_ms
from meta.tables import Batch

log = logging.getLogger("gnomon.meta")

#: Seconds between looks at the node leases between rounds (a lapsed one starts a round).
LIVENESS_POLL_S = 0.1

#: Most sub-tables of one partition table: they are created in one store transaction.
MAX_PARTITIONS = 100


@dataclass(frozen=True)
class MetaSettings:
    #: Shards the cluster is created with (unassigned until data nodes register).
    shards: int = 8
    #: Lease TTL of a node that does not ask for one.
    node_ttl_s: int = 10
    #: Seconds between scheduling rounds (failover, assignment, rebalancing).
    interval_s: float = 1.0
    #: Rebalancing evens loads (leader counts held even) until the busiest live node carries at
    #: most this times the load of the idlest, or no move narrows the gap.
    rebalance_ratio: float = 1.05
    #: Shard moves one rebalancing round may plan.
    max_moves: int = 10_000
    #: Followers each shard gets on other live data nodes (0: none unless an operator adds
    #: them).
    followers: int = 0
    #: Test seam: ``"<kind>:<step>"`` makes the process exit right after that step.
    crash_after: str | None = None


@dataclass(frozen=True)
class NodeStatus:
    node: Node
    live: bool
    load: float
    leader_shards: int
    follower_shards: int
    #: What its last heartbeat reported of itself.
    figures: Mapping[str, float] = field(default_factory=dict)
    #: Seconds since its last heartbeat reached this instance (None: none yet).
    heartbeat_age_s: float | None = None


@dataclass(frozen=True)
class RouteInfo:
    table: Table
    shard: Shard | None
    partitions: tuple[RouteInfo, ...] = ()
    #: The shard leader's other endpoints by protocol.
    endpoints: tuple[tuple[str, str], ...] = ()
    #: The shard's followers: (gRPC endpoint, other endpoints by protocol).
    followers: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()


@dataclass(frozen=True)
class RoundReport:
    plans: tuple[Plan, ...]
    plan_s: float


class MetaCore:
    """The leader's state and operations for one term."""

    def __init__(
        self,
        store: ClusterStore,
        liveness: NodeLeases,
        settings: MetaSettings,
        calls: NodeCalls,
    ) -> None:
        """``calls``: how procedures reach data nodes (asking them to let go of shards)."""
        self.settings = settings
        self.store = store
        self.liveness = liveness
        self.lock = threading.RLock()
        self.term = store.take_term()
        self.state = store.load()
        store.ensure_shards(self.state, settings.shards)
        self.state.live = liveness.live()
        self.state.leases = liveness.live
        self.bus = EventBus()
        self.runner = ProcedureRunner(
            self.state, store, self.lock, self.bus, calls, crash_after=settings.crash_after
        )
        self._compaction = CompactionPicker(settings.node_ttl_s)
        self._figures: dict[str, dict[str, float]] = {}
        #: Set when an admin operation started a procedure, to wake the worker.
        self.wakeup = threading.Event()
        log.info(
            "leading",
            extra={
                "term": self.term,
                "nodes": len(self.state.nodes),
                "shards": len(self.state.shards),
                "tables": len(self.state.tables),
                "resuming": len(self.state.procedures),
            },
        )

    def _commit(self, batch: Batch) -> None:
        self.store.commit(batch)
        self.state.apply(batch)

    # -- nodes -------------------------------------------------------------------------------------

    def register_node(
        self,
        name: str,
        kind: NodeKind,
        ttl_s: int | None = None,
        endpoints: Mapping[str, str] | None = None,
    ) -> tuple[int, int]:
        """Register (or re-register) a node under a fresh lease; (lease id, TTL).
        ``endpoints`` are its other endpoints by protocol (routes carry the leader's)."""
        if not name or ":" not in name:
            raise InvalidArgument(f"node name {name!r} must be its host:port endpoint")
        ttl = ttl_s or self.settings.node_ttl_s
        lease = self.liveness.register(name, ttl)
        with self.lock:
            node = Node(name, kind, True, lease, now_ms(), tuple(sorted((endpoints or {}).items())))
            self._commit(Batch(nodes=[node]))
            self.state.live.add(name)
        self._compaction.beat(name, ttl)
        log.info("node registered", extra={"node": name, "kind": kind.value, "ttl_s": ttl})
        return lease, ttl

    def heartbeat(
        self,
        name: str,
        load: float,
        shard_loads: dict[int, float],
        figures: Mapping[str, float] | None = None,
    ) -> None:
        """Refresh a node's lease and record its load (and the ``figures`` it reports of
        itself, kept in memory for operators); NotFound means: register again."""
        with self.lock:
            node = self.state.nodes.get(name)
        if node is None:
            raise NotFound(f"node {name!r} is not registered")
        if not self.liveness.refresh(node.lease_id):
            with self.lock:
                self.state.live.discard(name)
            self._compaction.forget(name)
            raise NotFound(f"the lease of node {name!r} expired; register again")
        with self.lock:
            self.state.live.add(name)
            self.state.node_loads[name] = load
            self.state.shard_loads.update(shard_loads)
            self._figures[name] = dict(figures or {})
        self._compaction.beat(name)

    def nodes(self) -> list[NodeStatus]:
        with self.lock:
            view = self.state.view()
            followers: dict[str, int] = {}
            for shard in view.shards.values():
                for f in shard.followers:
                    followers[f] = followers.get(f, 0) + 1
            return [
                NodeStatus(
                    n,
                    n.name in view.live,
                    view.data_load(n.name)
                    if n.kind is NodeKind.DATA
                    else view.node_loads.get(n.name, 0.0),
                    len(view.leader_shards.get(n.name, ())),
                    followers.get(n.name, 0),
                    self._figures.get(n.name, {}),
                    self._compaction.age(n.name),
                )
                for n in sorted(view.nodes.values(), key=lambda n: n.name)
            ]

    def pick_compaction_node(self) -> str | None:
        """The compaction node a data node should offload a task to; None: compact locally
        (none is live with a fresh heartbeat)."""
        with self.lock:
            view = self.state.view()
            candidates = view.live_nodes(NodeKind.COMPACTION)
            loads = dict(view.node_loads)
            slots = {
                n: figures["slots"]
                for n in candidates
                if "slots" in (figures := self._figures.get(n, {}))
            }
        return self._compaction.pick(candidates, loads, slots)

    # -- tables ------------------------------------------------------------------------------------

    def create_table(self, name: str, schema: bytes, partitions: int = 0) -> list[Table]:
        """Create a table (a partition table with its sub-tables); the tables created, the
        table itself first."""
        if not 0 <= partitions <= MAX_PARTITIONS:
            raise InvalidArgument(f"partitions must be 0..{MAX_PARTITIONS}, not {partitions}")
        # Checked before anything is recorded: a table every node refuses to open would
        # stay in its shard's list.
        check_new_table_name(name, partitions)
        with self.lock:
            if self.state.table_named(name) is not None:
                raise AlreadyExists(f"table {name!r} already exists")
            view = self.state.view()
            shards = place_partitions(view, partitions) if partitions else [pick_table_shard(view)]
            if not shards or shards[0] is None:
                raise Unavailable(f"cannot place table {name!r}: no live data node leads a shard")
            first = self.state.counter(NEXT_TABLE_ID) + 1
            created = now_ms()
            if partitions:
                tables = [Table(first, name, schema, None, created, partitions)] + [
                    Table(first + 1 + i, partition_name(name, i), schema, s, created, 0, first, i)
                    for i, s in enumerate(shards)
                ]
            else:
                tables = [Table(first, name, schema, shards[0], created)]
            self._commit(Batch(tables=tables, counters={NEXT_TABLE_ID: first + len(tables) - 1}))
        log.info("table created", extra={"table": name, "id": first, "partitions": partitions})
        return tables

    def drop_table(self, name: str) -> bool:
        with self.lock:
            table = self.state.table_named(name)
            if table is None:
                return False
            if table.parent_id is not None:
                raise InvalidArgument(f"{name!r} is a sub-table; drop its partition table")
            ids = [table.id] + [t.id for t in self.state.sub_tables(table.id)]
            self._commit(Batch(dropped_tables=ids))
        log.info("table dropped", extra={"table": name, "id": table.id})
        return True

    def tables(self) -> list[Table]:
        with self.lock:
            return sorted(self.state.tables.values(), key=lambda t: t.id)

    def shards(self) -> list[tuple[Shard, int, float]]:
        """Every shard with its table count and load."""
        with self.lock:
            view = self.state.view()
            return [
                (s, len(view.shard_tables.get(s.id, ())), view.shard_load(s.id))
                for s in sorted(view.shards.values(), key=lambda s: s.id)
            ]

    def route(self, names: list[str]) -> list[RouteInfo]:
        """Where each named table lives; unknown names are left out."""
        with self.lock:
            routes = []
            for name in names:
                table = self.state.table_named(name)
                if table is not None:
                    routes.append(self._route(table))
            return routes

    def _route(self, table: Table) -> RouteInfo:
        shard = None if table.shard_id is None else self.state.shards.get(table.shard_id)
        subs = (
            tuple(self._route(t) for t in self.state.sub_tables(table.id))
            if table.partitions
            else ()
        )
        leader = None if shard is None or not shard.leader else self.state.nodes.get(shard.leader)
        followers = tuple(
            (f, node.endpoints)
            for f in (() if shard is None else shard.followers)
            if (node := self.state.nodes.get(f)) is not None
        )
        return RouteInfo(table, shard, subs, () if leader is None else leader.endpoints, followers)

    # -- events ------------------------------------------------------------------------------------

    def watch(
        self, node: str | None
    ) -> tuple[int, queue.Queue[ShardEvent | None], list[ShardEvent]]:
        """Subscribe to the shard events of ``node`` (all if None); also returns OPEN events for
        what it holds now, so a watcher starts from the full picture."""
        with self.lock:
            sub_id, q = self.bus.subscribe(node)
            current = [
                e
                for s in self.state.shards.values()
                if node is None or node in s.nodes()
                for e in opened(s)
                if node is None or e.node == node
            ]
        return sub_id, q, current

    # -- admin operations --------------------------------------------------------------------------

    def _ready_shard(self, shard_id: int) -> Shard:
        shard = self.state.shards.get(shard_id)
        if shard is None:
            raise NotFound(f"shard {shard_id} does not exist")
        if shard.status is ShardStatus.BUSY:
            raise Unavailable(f"shard {shard_id} is busy with procedure {shard.procedure}")
        return shard

    def _start(self, kind: str, params: dict[str, object]) -> Procedure:
        proc = self.runner.start(kind, params)
        self.wakeup.set()
        return proc

    def migrate(self, shard_id: int, target: str) -> Procedure:
        """Move a shard's leadership to ``target`` (a live data node)."""
        with self.lock:
            shard = self._ready_shard(shard_id)
            node = self.state.nodes.get(target)
            if node is None or node.kind is not NodeKind.DATA or target not in self.state.live:
                raise InvalidArgument(
                    f"cannot migrate shard {shard_id}: {target!r} is not a live data node"
                )
            if shard.leader == target:
                raise InvalidArgument(f"shard {shard_id} is already led by {target!r}")
            followers = tuple(f for f in shard.followers if f != target)
            move = Move(shard.id, shard.epoch, target, followers)
            return self._start("migrate", {"moves": [move.to_json()]})

    def switch_role(self, shard_id: int, new_leader: str) -> Procedure:
        """Make a follower of the shard its leader; the old leader becomes a follower."""
        with self.lock:
            shard = self._ready_shard(shard_id)
            if new_leader not in shard.followers:
                raise InvalidArgument(f"{new_leader!r} is not a follower of shard {shard_id}")
            followers = tuple(f for f in shard.followers if f != new_leader)
            if shard.leader:
                followers += (shard.leader,)
            move = Move(shard.id, shard.epoch, new_leader, followers)
            return self._start("switch_role", {"moves": [move.to_json()]})

    def add_follower(self, shard_id: int, follower: str) -> Procedure:
        """Give a shard one more follower (a live data node that is not yet one of its nodes)."""
        with self.lock:
            shard = self._ready_shard(shard_id)
            if follower in shard.nodes() or follower not in self.state.live:
                raise InvalidArgument(f"{follower!r} cannot follow shard {shard_id}")
            move = Move(shard.id, shard.epoch, shard.leader, (*shard.followers, follower))
            return self._start("add_follower", {"moves": [move.to_json()]})

    def split(self, shard_id: int) -> Procedure:
        with self.lock:
            self._ready_shard(shard_id)
            return self._start("split", {"shard": shard_id})

    def merge(self, shard_id: int, other_id: int) -> Procedure:
        with self.lock:
            if shard_id == other_id:
                raise InvalidArgument(f"cannot merge shard {shard_id} with itself")
            self._ready_shard(shard_id)
            self._ready_shard(other_id)
            return self._start("merge", {"shard": shard_id, "other": other_id})

    # -- scheduling --------------------------------------------------------------------------------

    def plan_round(self) -> RoundReport:
        """Refresh liveness from etcd and plan one round (failover first; then assignment,
        then followers; rebalancing only once nothing else is to do)."""
        live = self.liveness.live()
        start = time.perf_counter()
        with self.lock:
            self.state.live = live
            view = self.state.snapshot()
        plans = (
            plan_failover(view)
            or plan_assign(view)
            or plan_followers(view, self.settings.followers)
        )
        if not plans:
            plans = plan_rebalance(
                view, max_ratio=self.settings.rebalance_ratio, max_moves=self.settings.max_moves
            )
        return RoundReport(tuple(plans), time.perf_counter() - start)

    def run_round(self) -> RoundReport:
        """Plan one round, start its procedures and run every procedure to its end."""
        report = self.plan_round()
        for plan in report.plans:
            params: dict[str, object] = {"moves": [m.to_json() for m in plan.moves]}
            if plan.node:
                params["node"] = plan.node
            self.runner.start(plan.reason, params)
        self.runner.run_all()
        return report

    def work(self, stop: threading.Event) -> Iterator[RoundReport]:
        """The leader's worker: resume what a predecessor left, then (after a grace period) a
        round every interval, and admin procedures as soon as they are started. Yields each
        round's report."""
        self.runner.run_all()
        # Nodes could not heartbeat while no instance led, so their leases may have lapsed:
        # give them one lease period to register again before judging anyone dead.
        with self.lock:
            known = any(n.online for n in self.state.nodes.values())
        next_round = time.monotonic() + (self.settings.node_ttl_s if known else 0.0)
        grace_until = next_round
        while not stop.is_set():
            if time.monotonic() >= next_round:
                yield self.run_round()
                next_round = time.monotonic() + self.settings.interval_s
            self.wakeup.wait(max(0.0, min(next_round - time.monotonic(), LIVENESS_POLL_S)))
            self.wakeup.clear()
            # A lapsed lease is acted on at once, not at the next round: failover time after
            # expiry is then this poll, not the round interval.
            if time.monotonic() >= grace_until and self._lost_a_node():
                next_round = time.monotonic()
            self.runner.run_all()

    def _lost_a_node(self) -> bool:
        """Whether a node this instance holds live has lost its lease (one etcd range read)."""
        live = self.liveness.live()
        with self.lock:
            return bool(self.state.live - live)

    def close(self) -> None:
        self.bus.close()
