"""The cluster's state as plain values: nodes, shards, tables and procedures.

These are what planners read and procedures change; ``meta/tables.py`` maps them to rows of the
StructuredTable SPI. Everything here is immutable so a snapshot can be handed to a planner while
the service keeps changing the live state.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

#: A data node's heartbeat figure of how far it is behind a shard's leader it follows
#: (seconds since it was last caught up): this prefix and the shard id.
FOLLOWER_LAG = "follower_lag_s:"


class NodeKind(StrEnum):
    DATA = "data"
    COMPACTION = "compaction"
    #: Owns no shards (the planners place none there): answers queries across the data
    #: nodes and sends writes to them.
    QUERY = "query"


class ShardStatus(StrEnum):
    #: Created but not yet given to a node (no node registered yet, or its node vanished
    #: with nobody to take it).
    UNASSIGNED = "unassigned"
    READY = "ready"
    #: Held by a running procedure (its id is in ``Shard.procedure``); planners leave it alone.
    BUSY = "busy"


class ProcedureStatus(StrEnum):
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


@dataclass(frozen=True)
class Node:
    """A registered data node or compaction node; ``name`` is its ``host:port`` endpoint."""

    name: str
    kind: NodeKind
    online: bool
    #: The etcd lease its liveness key hangs on; heartbeats refresh it.
    lease_id: int
    registered_ms: int
    #: Its other endpoints by protocol ("http", "flight"), as (protocol, host:port) pairs.
    endpoints: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Shard:
    id: int
    leader: str | None
    followers: tuple[str, ...]
    #: Increases on every leadership change, so a deposed leader's writes can be fenced.
    epoch: int
    status: ShardStatus
    #: The running procedure holding this shard, if any.
    procedure: int | None = None
    #: Its leader was chosen by an operator (migrate, switch role): rebalancing leaves the
    #: shard where it is, counting it, until it loses that leader (its node dies).
    pinned: bool = False

    def nodes(self) -> tuple[str, ...]:
        return ((self.leader,) if self.leader else ()) + self.followers


@dataclass(frozen=True)
class Table:
    id: int
    name: str
    schema: bytes
    #: None for the parent of a partition table (its data lives in the sub-tables).
    shard_id: int | None
    created_ms: int
    #: Partition tables: the parent has ``partitions`` > 0; each sub-table names its parent
    #: and its index.
    partitions: int = 0
    parent_id: int | None = None
    partition_index: int = 0


@dataclass(frozen=True)
class Procedure:
    """A persisted state machine: ``step`` is the index of the next step to run."""

    id: int
    kind: str
    params: dict[str, Any] = field(hash=False)
    step: int
    status: ProcedureStatus
    error: str = ""
    updated_ms: int = 0
