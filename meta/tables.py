"""How the cluster state is stored: one StructuredTable per kind of object, and the mapping of
the values of ``meta/model.py`` to their rows.

No table has a secondary index: the leading meta instance keeps the whole state in memory, so
every lookup is served there, and each object written costs exactly one key in an etcd
transaction (an indexed row would cost three), which is what keeps batches large.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gnomon.store.api import Row
from gnomon.store.spec import TableSpec, spec
from meta.model import Node, NodeKind, Procedure, ProcedureStatus, Shard, ShardStatus, Table

#: Counters and cluster-wide settings: ``term`` (the fencing number of the leading meta),
#: ``next_table_id``, ``next_shard_id``, ``next_procedure_id``.
CLUSTER = spec("meta_cluster", [("name", "string"), ("value", "long")], ["name"])
NODES = spec(
    "meta_nodes",
    [
        ("name", "string"),
        ("kind", "string"),
        ("online", "int"),
        ("lease_id", "long"),
        ("registered_ms", "long"),
        ("endpoints", "string"),
    ],
    ["name"],
)
SHARDS = spec(
    "meta_shards",
    [
        ("id", "long"),
        ("leader", "string"),
        ("followers", "string"),
        ("epoch", "long"),
        ("status", "string"),
        ("procedure", "long"),
        ("pinned", "int"),
    ],
    ["id"],
)
TABLES = spec(
    "meta_tables",
    [
        ("id", "long"),
        ("name", "string"),
        ("schema", "bytes"),
        ("shard_id", "long"),
        ("created_ms", "long"),
        ("partitions", "int"),
        ("parent_id", "long"),
        ("partition_index", "int"),
    ],
    ["id"],
)
PROCEDURES = spec(
    "meta_procedures",
    [
        ("id", "long"),
        ("kind", "string"),
        ("params", "string"),
        ("step", "int"),
        ("status", "string"),
        ("error", "string"),
        ("updated_ms", "long"),
    ],
    ["id"],
)
ALL_SPECS: tuple[TableSpec, ...] = (CLUSTER, NODES, SHARDS, TABLES, PROCEDURES)


def node_row(n: Node) -> Row:
    return {
        "name": n.name,
        "kind": n.kind.value,
        "online": int(n.online),
        "lease_id": n.lease_id,
        "registered_ms": n.registered_ms,
        "endpoints": json.dumps(dict(n.endpoints)),
    }


def node_of(r: Mapping[str, Any]) -> Node:
    return Node(
        r["name"],
        NodeKind(r["kind"]),
        bool(r["online"]),
        r["lease_id"],
        r["registered_ms"],
        tuple(sorted(json.loads(r.get("endpoints") or "{}").items())),
    )


def shard_row(s: Shard) -> Row:
    return {
        "id": s.id,
        "leader": s.leader,
        "followers": ",".join(s.followers),
        "epoch": s.epoch,
        "status": s.status.value,
        "procedure": s.procedure,
        "pinned": int(s.pinned),
    }


def shard_of(r: Mapping[str, Any]) -> Shard:
    followers = tuple(f for f in (r["followers"] or "").split(",") if f)
    return Shard(
        r["id"],
        r["leader"],
        followers,
        r["epoch"],
        ShardStatus(r["status"]),
        r["procedure"],
        bool(r["pinned"]),
    )


def table_row(t: Table) -> Row:
    return {
        "id": t.id,
        "name": t.name,
        "schema": t.schema,
        "shard_id": t.shard_id,
        "created_ms": t.created_ms,
        "partitions": t.partitions,
        "parent_id": t.parent_id,
        "partition_index": t.partition_index,
    }


def table_of(r: Mapping[str, Any]) -> Table:
    return Table(
        r["id"],
        r["name"],
        r["schema"] or b"",
        r["shard_id"],
        r["created_ms"],
        r["partitions"] or 0,
        r["parent_id"],
        r["partition_index"] or 0,
    )


def procedure_row(p: Procedure) -> Row:
    return {
        "id": p.id,
        "kind": p.kind,
        "params": json.dumps(p.params, separators=(",", ":")),
        "step": p.step,
        "status": p.status.value,
        "error": p.error,
        "updated_ms": p.updated_ms,
    }


def procedure_of(r: Mapping[str, Any]) -> Procedure:
    return Procedure(
        r["id"],
        r["kind"],
        json.loads(r["params"]),
        r["step"],
        ProcedureStatus(r["status"]),
        r["error"] or "",
        r["updated_ms"] or 0,
    )


@dataclass
class Batch:
    """Changes to commit together in one transaction, then apply to the in-memory state."""

    nodes: list[Node] = field(default_factory=list)
    shards: list[Shard] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    dropped_tables: list[int] = field(default_factory=list)
    dropped_shards: list[int] = field(default_factory=list)
    procedures: list[Procedure] = field(default_factory=list)
    counters: dict[str, int] = field(default_factory=dict)

    def size(self) -> int:
        """Keys written: what counts against the store's per-transaction limit."""
        return (
            len(self.nodes)
            + len(self.shards)
            + len(self.tables)
            + len(self.dropped_tables)
            + len(self.dropped_shards)
            + len(self.procedures)
            + len(self.counters)
        )
