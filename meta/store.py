"""Reading and writing the cluster state through the StructuredTable SPI, fenced by a term.

Each meta instance that becomes leader bumps the ``term`` counter and remembers its value; every
commit it makes reads the counter again and refuses to write if it changed. A deposed leader that
still believes it leads therefore cannot write: the store's optimistic transactions make its
commit conflict with (or see) the new leader's bump.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

from gnomon.errors import NotLeader
from gnomon.store.api import StructuredStore, TableContext, run_with_retries
from meta.model import Procedure, Shard, ShardStatus
from meta.state import ClusterState
from meta.tables import (
    ALL_SPECS,
    CLUSTER,
    NODES,
    PROCEDURES,
    SHARDS,
    TABLES,
    Batch,
    node_of,
    node_row,
    procedure_of,
    procedure_row,
    shard_of,
    shard_row,
    table_of,
    table_row,
)

log = logging.getLogger("gnomon.meta.store")

TERM = "term"
NEXT_SHARD_ID = "next_shard_id"
NEXT_TABLE_ID = "next_table_id"
NEXT_PROCEDURE_ID = "next_procedure_id"
#: Keys one commit may write: below etcd's default ``--max-txn-ops`` of 128 with room for the
#: procedure row and counters that ride along with a chunk of shards or tables.
MAX_BATCH = 120


def now_ms() -> int:
    return int(time.time() * 1000)


class ClusterStore:
    """The cluster tables of one store, written by the leader of ``term``."""

    def __init__(self, store: StructuredStore) -> None:
        self.store = store
        self.term = 0
        for spec in ALL_SPECS:
            store.create(spec, if_not_exists=True)

    def take_term(self) -> int:
        """Become the writer: bump the term, which fences every earlier leader's commits."""

        def bump(ctx: TableContext) -> int:
            row = ctx.table(CLUSTER.name).read({"name": TERM})
            term = (row["value"] if row else 0) + 1
            ctx.table(CLUSTER.name).write({"name": TERM, "value": term})
            return int(term)

        self.term = run_with_retries(self.store, bump)
        return self.term

    def load(self) -> ClusterState:
        """Read the whole state (procedures still running only)."""

        def read(ctx: TableContext) -> ClusterState:
            state = ClusterState()
            batch = Batch(
                nodes=[node_of(r) for r in ctx.table(NODES.name).scan()],
                shards=[shard_of(r) for r in ctx.table(SHARDS.name).scan()],
                tables=[table_of(r) for r in ctx.table(TABLES.name).scan()],
                procedures=[
                    procedure_of(r)
                    for r in ctx.table(PROCEDURES.name).scan()
                    if r["status"] == "running"
                ],
                counters={r["name"]: r["value"] for r in ctx.table(CLUSTER.name).scan()},
            )
            state.apply(batch)
            return state

        return self.store.transact(read)

    def procedure(self, proc_id: int) -> Procedure | None:
        """A procedure's row, finished ones included (memory keeps only running ones)."""

        def read(ctx: TableContext) -> Procedure | None:
            row = ctx.table(PROCEDURES.name).read({"id": proc_id})
            return None if row is None else procedure_of(row)

        return self.store.transact(read)

    def commit(self, batch: Batch) -> None:
        """Write ``batch`` atomically, if this instance still holds the term."""

        def write(ctx: TableContext) -> None:
            row = ctx.table(CLUSTER.name).read({"name": TERM})
            current = row["value"] if row else 0
            if current != self.term:
                raise NotLeader(
                    f"meta term moved from {self.term} to {current}: another instance leads"
                )
            _write(ctx, batch)

        self.store.transact(write)

    def ensure_shards(self, state: ClusterState, total: int) -> None:
        """Create unassigned shards until there are ``total`` (chunked; safe to repeat)."""
        created = 0
        for batch in _shard_batches(state.counter(NEXT_SHARD_ID), total):
            self.commit(batch)
            state.apply(batch)
            created += len(batch.shards)
        if created:
            log.info("shards created", extra={"new_shards": created, "shards": len(state.shards)})


def _shard_batches(first: int, total: int) -> Iterator[Batch]:
    for start in range(first, total, MAX_BATCH - 1):
        end = min(total, start + MAX_BATCH - 1)
        shards = [Shard(i, None, (), 0, ShardStatus.UNASSIGNED) for i in range(start, end)]
        yield Batch(shards=shards, counters={NEXT_SHARD_ID: end})


def _write(ctx: TableContext, batch: Batch) -> None:
    nodes, shards, tables = ctx.table(NODES.name), ctx.table(SHARDS.name), ctx.table(TABLES.name)
    procedures, cluster = ctx.table(PROCEDURES.name), ctx.table(CLUSTER.name)
    for n in batch.nodes:
        nodes.write(node_row(n))
    for s in batch.shards:
        shards.write(shard_row(s))
    for shard_id in batch.dropped_shards:
        shards.delete({"id": shard_id})
    for t in batch.tables:
        tables.write(table_row(t))
    for table_id in batch.dropped_tables:
        tables.delete({"id": table_id})
    for p in batch.procedures:
        procedures.write(procedure_row(p))
    for name, value in batch.counters.items():
        cluster.write({"name": name, "value": value})
