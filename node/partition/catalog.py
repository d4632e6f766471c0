"""Where partition tables are defined. A standalone server keeps their definitions in its
catalog store (:class:`LocalPartitionCatalog`); a cluster node asks the meta service, which
places the sub-tables (``node.partition.cluster.MetaPartitionCatalog``)."""

from __future__ import annotations

import threading
import time
from typing import Protocol

from gnomon.errors import AlreadyExists, NotFound
from gnomon.store.api import KeyRange, StructuredStore, TableContext, run_with_retries
from gnomon.store.spec import FieldSpec, FieldType, TableSpec
from node.partition.spec import PartitionSpec
from node.tables import TableCatalog


class PartitionCatalog(Protocol):
    def get(self, name: str) -> PartitionSpec | None:
        """The partition table ``name``, or None if there is none of that name."""

    def names(self) -> list[str]:
        """The partition tables this node knows of (in a cluster, those it met lately)."""

    def database_tables(self) -> list[tuple[str, int]] | None:
        """Every table of the database by name and id (a partition table, not its
        sub-tables), where this catalog knows more than the tables served here (a cluster's
        meta service does); None where those are all there are."""

    def create(self, spec: PartitionSpec, *, if_not_exists: bool = False) -> PartitionSpec:
        """Define a partition table and create its sub-tables; AlreadyExists when the name is
        taken (by any table) unless ``if_not_exists``."""

    def drop(self, name: str) -> bool:
        """Drop a partition table with every sub-table; False if there is none."""


_PARTITIONS = TableSpec(
    "partition_tables",
    (
        FieldSpec("name", FieldType.STRING),
        FieldSpec("definition", FieldType.STRING),
        FieldSpec("created_ms", FieldType.LONG),
    ),
    primary_key=("name",),
)


class LocalPartitionCatalog:
    """Definitions in ``store`` (the engine's catalog store), sub-tables in ``tables``: the one
    process serving the data directory owns both, so definitions are read once and kept."""

    def __init__(self, store: StructuredStore, tables: TableCatalog) -> None:
        self._store = store
        self._tables = tables
        self._lock = threading.Lock()
        store.create(_PARTITIONS, if_not_exists=True)
        rows = store.transact(lambda ctx: list(ctx.table(_PARTITIONS.name).scan(KeyRange())))
        self._specs = {
            r["name"]: PartitionSpec.from_json(
                r["name"], r["definition"].encode(), created_ms=int(r["created_ms"])
            )
            for r in rows
        }

    def get(self, name: str) -> PartitionSpec | None:
        return self._specs.get(name)

    def names(self) -> list[str]:
        return sorted(self._specs)

    def database_tables(self) -> list[tuple[str, int]] | None:
        return None

    def create(self, spec: PartitionSpec, *, if_not_exists: bool = False) -> PartitionSpec:
        with self._lock:
            existing = self._specs.get(spec.name)
            if existing is not None:
                if if_not_exists:
                    return existing
                raise AlreadyExists(f"table {spec.name!r} already exists")
            try:
                self._tables.describe(spec.name)
            except NotFound:
                pass
            else:
                raise AlreadyExists(f"table {spec.name!r} already exists")
            spec.rule.check(spec.name, spec.schema)
            # Sub-tables first: a definition is never without them (one left over from a
            # create cut short is taken as it is by the next).
            for sub in spec.sub_tables:
                self._tables.create_table(sub, spec.schema, spec.options, if_not_exists=True)
            created = int(time.time() * 1000)
            row = {
                "name": spec.name,
                "definition": spec.to_json().decode(),
                "created_ms": created,
            }

            def txn(ctx: TableContext) -> None:
                ctx.table(_PARTITIONS.name).write(row)

            run_with_retries(self._store, txn)
            made = PartitionSpec(spec.name, spec.schema, spec.options, spec.rule, 0, created)
            self._specs[spec.name] = made
            return made

    def drop(self, name: str) -> bool:
        with self._lock:
            spec = self._specs.get(name)
            if spec is None:
                return False
            # Sub-tables first: a drop cut short leaves the definition, and dropping again
            # finishes it, rather than sub-tables a new table of the name would take over.
            for sub in spec.sub_tables:
                self._tables.drop_table(sub, if_exists=True)

            def txn(ctx: TableContext) -> None:
                ctx.table(_PARTITIONS.name).delete({"name": name})

            run_with_retries(self._store, txn)
            del self._specs[name]
            return True
