"""The table catalog, kept through the StructuredTable SPI: table name -> id, schema, options.

Table ids come from a counter row bumped in the same transaction that inserts the table, so
ids are unique even when several processes create tables against one shared store.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from gnomon.errors import AlreadyExists, Conflict, NotFound
from gnomon.names import check_table_name
from gnomon.store.api import KeyRange, StructuredStore, TableContext, run_with_retries
from gnomon.store.spec import FieldSpec, FieldType, TableSpec
from node.engine.options import TableOptions
from node.engine.schema import Schema

_TABLES = TableSpec(
    "catalog_tables",
    (
        FieldSpec("name", FieldType.STRING),
        FieldSpec("table_id", FieldType.LONG),
        FieldSpec("schema", FieldType.STRING),
        FieldSpec("options", FieldType.STRING),
        FieldSpec("created_ms", FieldType.LONG),
    ),
    primary_key=("name",),
    indexes=("table_id",),
)
#: Every (schema, options) version of every table, written with the change that made it.
_SCHEMAS = TableSpec(
    "catalog_schemas",
    (
        FieldSpec("table_id", FieldType.LONG),
        FieldSpec("version", FieldType.LONG),
        FieldSpec("schema", FieldType.STRING),
        FieldSpec("options", FieldType.STRING),
        FieldSpec("created_ms", FieldType.LONG),
    ),
    primary_key=("table_id", "version"),
)
_COUNTERS = TableSpec(
    "catalog_counters",
    (FieldSpec("name", FieldType.STRING), FieldSpec("value", FieldType.LONG)),
    primary_key=("name",),
)

@dataclass(frozen=True)
class TableInfo:
    table_id: int
    name: str
    schema: Schema
    options: TableOptions
    created_ms: int

    def row(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "table_id": self.table_id,
            "schema": json.dumps(self.schema.to_json()),
            "options": json.dumps(self.options.to_json()),
            "created_ms": self.created_ms,
        }

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> TableInfo:
        return cls(
            table_id=int(row["table_id"]),
            name=row["name"],
            schema=Schema.from_json(json.loads(row["schema"])),
            options=TableOptions.from_json(json.loads(row["options"])),
            created_ms=int(row["created_ms"]),
        )


def _history_row(info: TableInfo) -> dict[str, Any]:
    row = info.row()
    return {
        "table_id": info.table_id,
        "version": info.schema.version,
        "schema": row["schema"],
        "options": row["options"],
        "created_ms": int(time.time() * 1000),
    }


class Catalog:
    def __init__(self, store: StructuredStore) -> None:
        self._store = store
        store.create(_TABLES, if_not_exists=True)
        store.create(_COUNTERS, if_not_exists=True)
        store.create(_SCHEMAS, if_not_exists=True)

    @property
    def store(self) -> StructuredStore:
        """The store the catalog is kept in (definitions kept beside it use it too)."""
        return self._store

    def create(
        self, name: str, schema: Schema, options: TableOptions, *, table_id: int | None = None
    ) -> TableInfo:
        """Record a new table; its id is ``table_id`` when given (a cluster's meta service
        allocates ids), else the next of the catalog's own counter."""
        check_table_name(name)

        def txn(ctx: TableContext) -> TableInfo:
            tables = ctx.table(_TABLES.name)
            if tables.read({"name": name}) is not None:
                raise AlreadyExists(f"table {name!r} already exists")
            new_id = table_id
            if new_id is None:
                counters = ctx.table(_COUNTERS.name)
                row = counters.read({"name": "table_id"})
                new_id = (row["value"] if row else 0) + 1
                counters.write({"name": "table_id", "value": new_id})
            info = TableInfo(new_id, name, schema, options, int(time.time() * 1000))
            tables.write(info.row())
            ctx.table(_SCHEMAS.name).write(_history_row(info))
            return info

        return run_with_retries(self._store, txn)

    def get(self, name: str) -> TableInfo:
        row = self._store.transact(lambda ctx: ctx.table(_TABLES.name).read({"name": name}))
        if row is None:
            raise NotFound(f"table {name!r} does not exist")
        return TableInfo.from_row(row)

    def update(self, info: TableInfo) -> None:
        """Replace a table's schema and options (ALTER TABLE) with the next version, which is
        recorded in the table's history too."""

        def txn(ctx: TableContext) -> None:
            tables = ctx.table(_TABLES.name)
            row = tables.read({"name": info.name})
            if row is None or row["table_id"] != info.table_id:
                raise NotFound(f"table {info.name!r} does not exist")
            current = TableInfo.from_row(row).schema.version
            if info.schema.version != current + 1:
                raise Conflict(
                    f"table {info.name!r} changed meanwhile (schema version {current}); "
                    "retry the ALTER"
                )
            tables.write(info.row())
            ctx.table(_SCHEMAS.name).write(_history_row(info))

        run_with_retries(self._store, txn)

    def history(self, table_id: int) -> list[tuple[int, Schema, TableOptions]]:
        """Every (version, schema, options) of a table, oldest first."""
        rows = self._store.transact(
            lambda ctx: list(ctx.table(_SCHEMAS.name).scan(KeyRange.prefix({"table_id": table_id})))
        )
        return [
            (
                int(r["version"]),
                Schema.from_json(json.loads(r["schema"])),
                TableOptions.from_json(json.loads(r["options"])),
            )
            for r in rows
        ]

    def drop(self, name: str) -> TableInfo:
        def txn(ctx: TableContext) -> TableInfo:
            tables = ctx.table(_TABLES.name)
            row = tables.read({"name": name})
            if row is None:
                raise NotFound(f"table {name!r} does not exist")
            tables.delete({"name": name})
            ctx.table(_SCHEMAS.name).delete_all({"table_id": row["table_id"]})
            return TableInfo.from_row(row)

        return run_with_retries(self._store, txn)

    def list(self) -> list[TableInfo]:
        rows = self._store.transact(lambda ctx: list(ctx.table(_TABLES.name).scan(KeyRange())))
        return [TableInfo.from_row(r) for r in rows]
