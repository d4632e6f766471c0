"""Tables let go of while the meta service moves them to another shard (split, merge).

A table's unflushed rows live in the WAL region of the shard it is served in, and a shard's
owner replays only the tables of that shard. So before the meta service re-homes a table, its
owner flushes it and stops serving it (:meth:`Engine.release_tables`); from then until the
move is over the table must not be opened in its old shard again, or rows written there would
stay in a region nobody replays for it. The release is a row in the catalog store, not only a
note in memory: an owner restarting in that window finds it and keeps the table closed.

A row goes when the table opens in another shard (it arrived), or when the old shard is no
longer held by a procedure (the move failed and the table stays: it opens where it was).
"""

from __future__ import annotations

from collections.abc import Collection

from gnomon.store.api import StructuredStore, TableContext, run_with_retries
from gnomon.store.spec import FieldSpec, FieldType, TableSpec

RELEASED_TABLES = TableSpec(
    "released_tables",
    (FieldSpec("table_id", FieldType.LONG), FieldSpec("shard_id", FieldType.LONG)),
    primary_key=("table_id",),
)


class ReleasedTables:
    def __init__(self, store: StructuredStore) -> None:
        store.create(RELEASED_TABLES, if_not_exists=True)
        self._store = store

    def add(self, shard_id: int, table_ids: Collection[int]) -> None:
        def txn(ctx: TableContext) -> None:
            rows = ctx.table(RELEASED_TABLES.name)
            for table_id in table_ids:
                rows.write({"table_id": table_id, "shard_id": shard_id})

        run_with_retries(self._store, txn)

    def of(self, shard_id: int) -> set[int]:
        """The tables released from ``shard_id``."""
        return {t for t, s in self.all().items() if s == shard_id}

    def shards(self) -> set[int]:
        """The shards some table was released from."""
        return set(self.all().values())

    def all(self) -> dict[int, int]:
        """Every release: table id -> the shard it was released from."""
        rows = run_with_retries(
            self._store, lambda ctx: list(ctx.table(RELEASED_TABLES.name).scan())
        )
        return {int(r["table_id"]): int(r["shard_id"]) for r in rows}

    def remove(self, *, table_ids: Collection[int] = (), shard_id: int | None = None) -> None:
        """Forget the releases of ``table_ids`` (they arrived elsewhere) and, with
        ``shard_id``, every release from that shard."""
        gone = set(table_ids)
        if shard_id is not None:
            gone |= self.of(shard_id)
        if not gone:
            return

        def txn(ctx: TableContext) -> None:
            rows = ctx.table(RELEASED_TABLES.name)
            for table_id in gone:
                rows.delete({"table_id": table_id})

        run_with_retries(self._store, txn)
