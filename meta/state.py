"""The in-memory cluster state of the leading meta instance.

The leader is the only writer of the cluster's tables, so after loading them once it keeps them
here and updates them with every batch it commits (``meta/store.py``): every lookup, route and
planning round reads memory, never the store. Alongside the persisted objects it keeps what is
volatile on purpose (lost on a meta crash, refilled by the next heartbeats): which nodes hold a
live lease, and the load figures the nodes report.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Set
from dataclasses import dataclass

from gnomon.names import partition_name
from meta.model import Node, NodeKind, Procedure, ProcedureStatus, Shard, Table
from meta.tables import Batch

#: The weight of a shard whose node has not reported its load (yet).
DEFAULT_SHARD_LOAD = 1.0


@dataclass(frozen=True)
class ClusterView:
    """What planners read. From :meth:`ClusterState.snapshot` it is a copy, safe to read while
    the service goes on; from :meth:`ClusterState.view` it is the live state (hold the lock)."""

    nodes: Mapping[str, Node]
    shards: Mapping[int, Shard]
    #: Data node name -> ids of the shards it leads.
    leader_shards: Mapping[str, Set[int]]
    #: Shard id -> ids of its tables.
    shard_tables: Mapping[int, Set[int]]
    #: Names of the nodes whose liveness lease exists.
    live: Set[str]
    shard_loads: Mapping[int, float]
    #: The node-level load figure of each node's last heartbeat.
    node_loads: Mapping[str, float]

    def shard_load(self, shard_id: int) -> float:
        return self.shard_loads.get(shard_id, DEFAULT_SHARD_LOAD)

    def data_load(self, node: str) -> float:
        """A data node's load: the summed load of the shards it leads."""
        return sum(self.shard_load(s) for s in self.leader_shards.get(node, ()))

    def live_nodes(self, kind: NodeKind) -> list[str]:
        """Live nodes of ``kind``, by name."""
        return sorted(
            n for n in self.live if (node := self.nodes.get(n)) is not None and node.kind is kind
        )


class ClusterState:
    """Persisted objects plus the indexes and volatile figures the leader serves from."""

    def __init__(self) -> None:
        self.nodes: dict[str, Node] = {}
        self.shards: dict[int, Shard] = {}
        self.tables: dict[int, Table] = {}
        self.procedures: dict[int, Procedure] = {}
        self.counters: dict[str, int] = {}
        self.table_ids: dict[str, int] = {}
        self.leader_shards: dict[str, set[int]] = {}
        self.shard_tables: dict[int, set[int]] = {}
        self.live: set[str] = set()
        #: The nodes holding a lease now, asked of the lease store (``live`` is the last
        #: round's view): for a procedure waiting on a node, which the round waits for.
        self.leases: Callable[[], Set[str]] = lambda: self.live
        self.shard_loads: dict[int, float] = {}
        self.node_loads: dict[str, float] = {}

    def counter(self, name: str) -> int:
        return self.counters.get(name, 0)

    def table_named(self, name: str) -> Table | None:
        table_id = self.table_ids.get(name)
        return None if table_id is None else self.tables[table_id]

    def sub_tables(self, parent_id: int) -> list[Table]:
        parent = self.tables[parent_id]
        names = (partition_name(parent.name, i) for i in range(parent.partitions))
        return [t for name in names if (t := self.table_named(name)) is not None]

    def running_procedures(self) -> list[Procedure]:
        return sorted(
            (p for p in self.procedures.values() if p.status is ProcedureStatus.RUNNING),
            key=lambda p: p.id,
        )

    # -- changes ---------------------------------------------------------------------------------

    def apply(self, batch: Batch) -> None:
        """Apply a committed batch."""
        for n in batch.nodes:
            self.nodes[n.name] = n
        for s in batch.shards:
            self._put_shard(s)
        for shard_id in batch.dropped_shards:
            self._drop_shard(shard_id)
        for t in batch.tables:
            self._put_table(t)
        for table_id in batch.dropped_tables:
            self._drop_table(table_id)
        for p in batch.procedures:
            if p.status is ProcedureStatus.RUNNING:
                self.procedures[p.id] = p
            else:
                # Finished procedures stay in the store for the record, not in memory.
                self.procedures.pop(p.id, None)
        self.counters.update(batch.counters)

    def _put_shard(self, s: Shard) -> None:
        old = self.shards.get(s.id)
        if old is not None and old.leader:
            self.leader_shards.get(old.leader, set()).discard(s.id)
        self.shards[s.id] = s
        self.shard_tables.setdefault(s.id, set())
        if s.leader:
            self.leader_shards.setdefault(s.leader, set()).add(s.id)

    def _drop_shard(self, shard_id: int) -> None:
        old = self.shards.pop(shard_id, None)
        if old is not None and old.leader:
            self.leader_shards.get(old.leader, set()).discard(shard_id)
        self.shard_tables.pop(shard_id, None)
        self.shard_loads.pop(shard_id, None)

    def _put_table(self, t: Table) -> None:
        old = self.tables.get(t.id)
        if old is not None and old.shard_id is not None:
            self.shard_tables.get(old.shard_id, set()).discard(t.id)
        self.tables[t.id] = t
        self.table_ids[t.name] = t.id
        if t.shard_id is not None:
            self.shard_tables.setdefault(t.shard_id, set()).add(t.id)

    def _drop_table(self, table_id: int) -> None:
        old = self.tables.pop(table_id, None)
        if old is None:
            return
        self.table_ids.pop(old.name, None)
        if old.shard_id is not None:
            self.shard_tables.get(old.shard_id, set()).discard(table_id)

    # -- views -----------------------------------------------------------------------------------

    def view(self) -> ClusterView:
        """The live state as a view (no copy): only while holding the state's lock."""
        return ClusterView(
            self.nodes,
            self.shards,
            self.leader_shards,
            self.shard_tables,
            self.live,
            self.shard_loads,
            self.node_loads,
        )

    def snapshot(self) -> ClusterView:
        """A copy for planning outside the lock."""
        return ClusterView(
            dict(self.nodes),
            dict(self.shards),
            {n: frozenset(s) for n, s in self.leader_shards.items()},
            {s: frozenset(t) for s, t in self.shard_tables.items()},
            frozenset(self.live),
            dict(self.shard_loads),
            dict(self.node_loads),
        )
