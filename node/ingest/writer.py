"""Writing decoded rows into the engine, creating tables and adding columns on the way as
HoraeDB does with ``auto_create_table`` on.

A missing table is created with ``tsid uint64`` and ``timestamp timestamp`` (primary key
``(tsid, timestamp)``) followed by the request's tags and fields in alphabetical order, all
nullable, tags as TAG columns, each typed by its values. Names an existing table lacks are
added as nullable columns (ALTER TABLE ADD COLUMN, in alphabetical order) before the write.
Values must have exactly the type of their column: there is no widening, as in HoraeDB.
"""

from __future__ import annotations

import logging
import threading

from gnomon.errors import InvalidArgument, NotFound
from node.engine.engine import Engine
from node.engine.schema import TSID, Column, ColumnType, Schema
from node.ingest.rows import TableRows

log = logging.getLogger("gnomon.ingest")

#: Name of the timestamp column of auto-created tables (HoraeDB's default).
TIMESTAMP_COLUMN = "timestamp"


class Ingestor:
    """Writes :class:`TableRows` to an engine; thread-safe."""

    def __init__(self, engine: Engine, *, auto_create: bool = True) -> None:
        self.engine = engine
        self.auto_create = auto_create
        # Serialises the schema changes this node makes on behalf of writes, so concurrent
        # writers of a new table or column agree on one definition instead of racing.
        self._ddl_lock = threading.Lock()

    def write(self, rows: TableRows) -> int:
        """Write ``rows`` to their table; returns how many rows were written."""
        schema = self._prepare(rows)
        if rows.num_rows == 0:
            return 0
        return self.engine.write(rows.table, rows.arrow(schema.timestamp_key))

    def _prepare(self, rows: TableRows) -> Schema:
        """The table's schema once it exists and has every column of ``rows``."""
        try:
            schema = self.engine.describe(rows.table).schema
        except NotFound:
            if not self.auto_create:
                raise NotFound(f"Table not found, table:{rows.table}") from None
            schema = self._create(rows)
        missing = [name for name in rows.columns if not schema.has_column(name)]
        if missing:
            schema = self._add_columns(rows, missing)
        _check(rows, schema)
        return schema

    def _create(self, rows: TableRows) -> Schema:
        if rows.num_rows == 0:
            raise InvalidArgument(
                f"table {rows.table!r} does not exist and a write without rows cannot create it"
            )
        columns = [Column(TIMESTAMP_COLUMN, ColumnType.TIMESTAMP, nullable=False)]
        for name in sorted(rows.columns):
            col = rows.columns[name]
            if name in (TIMESTAMP_COLUMN, TSID):
                raise InvalidArgument(
                    f"table {rows.table!r}: {name!r} cannot be a tag or field name: it is a "
                    "column every auto-created table has"
                )
            columns.append(Column(name, col.type, is_tag=col.is_tag))
        schema = Schema.build(columns, timestamp_key=TIMESTAMP_COLUMN)
        with self._ddl_lock:
            info = self.engine.create_table(rows.table, schema, if_not_exists=True)
        if info.schema == schema:
            log.info("auto-created table", extra={"table": rows.table, "columns": schema.names})
        return info.schema

    def _add_columns(self, rows: TableRows, names: list[str]) -> Schema:
        with self._ddl_lock:
            schema = self.engine.describe(rows.table).schema
            new = [
                Column(name, rows.columns[name].type, is_tag=rows.columns[name].is_tag)
                for name in sorted(names)
                if not schema.has_column(name)
            ]
            if not new:
                return schema
            schema = self.engine.alter_table(rows.table, add_columns=new).schema
        log.info(
            "added columns on write",
            extra={"table": rows.table, "columns": [c.name for c in new]},
        )
        return schema


def _check(rows: TableRows, schema: Schema) -> None:
    """Every column of ``rows`` must match the table's column in kind (tag or field) and
    type, and must not be the timestamp or the computed tsid."""
    for name, col in rows.columns.items():
        if name == schema.timestamp_key or (name == TSID and schema.has_tsid):
            raise InvalidArgument(
                f"table {rows.table!r}: {name!r} is the table's "
                f"{'timestamp' if name == schema.timestamp_key else 'series id'} column and "
                "cannot be written as a tag or field"
            )
        target = schema.column(name)
        if target.is_tag != col.is_tag:
            raise InvalidArgument(
                f"table {rows.table!r}: column {name!r} is a "
                f"{'tag' if target.is_tag else 'field'} but was written as a "
                f"{'tag' if col.is_tag else 'field'}"
            )
        if target.type is not col.type:
            raise InvalidArgument(
                f"Value type is not same, table:{rows.table}, column:{name}, "
                f"expected:{target.type.value}, given:{col.type.value}"
            )
