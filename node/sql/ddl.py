"""Turning DDL statements into engine schemas, and engine schemas back into DDL and DESCRIBE
rows (SHOW CREATE TABLE output parses back into the same table)."""

from __future__ import annotations

import math
import re
from typing import Any

import pyarrow as pa

from gnomon.errors import InvalidArgument
from node.engine import defaults
from node.engine.catalog import TableInfo
from node.engine.options import TableOptions
from node.engine.schema import TSID, TSID_ZERO_UNTAGGED, Column, ColumnType, Schema
from node.sql.ast import ColumnDef, CreateTable

_FLOAT32_MAX = 3.4028234663852886e38


def unsafe_literal(typ: ColumnType, value: Any) -> str | None:
    """Why a literal number would not convert exactly to ``typ`` (pyarrow truncates a fraction
    into an integer column and overflows a float column to inf without complaint), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    integral = pa.types.is_integer(typ.arrow()) or typ is ColumnType.TIMESTAMP
    if integral and isinstance(value, float) and not value.is_integer():
        return f"{value!r} is not an integer"
    if typ is ColumnType.FLOAT and math.isfinite(value) and abs(value) > _FLOAT32_MAX:
        return f"{value!r} is out of range for float"
    return None


def _checked_default(d: ColumnDef) -> Any:
    """The DEFAULT of ``d``, rejected here when it does not fit the column type: otherwise
    every write omitting the column, and every read of rows older than the column, fails."""
    if d.default is None:
        return None
    problem = unsafe_literal(d.type, d.default)
    if problem is None:
        try:
            pa.scalar(d.default, d.type.arrow())
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, OverflowError):
            problem = f"{d.default!r} does not convert to {d.type.value}"
    if problem is not None:
        raise InvalidArgument(f"column {d.name!r} ({d.type.value}): invalid DEFAULT: {problem}")
    return d.default


def to_column(d: ColumnDef) -> Column:
    return Column(
        d.name,
        d.type,
        is_tag=d.is_tag,
        nullable=True if d.nullable is None else d.nullable,
        default=_checked_default(d),
        comment=d.comment,
        dictionary=d.dictionary,
        default_expr=d.default_expr,
    )


def schema_of(stmt: CreateTable) -> tuple[Schema, TableOptions]:
    """The schema and options of a new table, whose untagged rows have tsid 0 (HoraeDB's).
    Its columns are stored key first, as HoraeDB orders them: the primary key's columns in
    key order (the implicit ``tsid`` first), then the others as declared. ``SELECT *``,
    DESCRIBE, SHOW CREATE TABLE and ``INSERT INTO t VALUES (...)`` without a column list
    all follow that one order; tables made before keep the order they stored."""
    primary_key = _primary_key(stmt)
    key = primary_key or [stmt.timestamp_key]
    columns = [to_column(c) for c in stmt.columns if not _is_implicit_tsid(c, stmt)]
    for c in columns:
        if c.default_expr is not None and c.name in key:
            _check_key_default(c.name, c.default_expr, key[: key.index(c.name)])
    # A stable sort: the key's columns in key order, the others as declared.
    columns.sort(key=lambda c: key.index(c.name) if c.name in key else len(key))
    schema = Schema.build(
        columns,
        timestamp_key=stmt.timestamp_key,
        primary_key=primary_key,
        tsid_version=TSID_ZERO_UNTAGGED,
    )
    return schema, TableOptions.from_strings(stmt.options)


def _check_key_default(name: str, text: str, before: list[str]) -> None:
    """Refuse a key column's DEFAULT that reads anything but the key columns before it: key
    columns are stored, and their defaults computed, before the table's other columns."""
    read = sorted(defaults.parse(text).columns - set(before))
    if read:
        raise InvalidArgument(
            f"key column {name!r}: DEFAULT {text} reads {', '.join(map(repr, read))}; a key "
            "column's DEFAULT may read only the key columns before it (key columns come first)"
        )


def _is_implicit_tsid(c: ColumnDef, stmt: CreateTable) -> bool:
    """Whether ``c`` is the implicit series id written out, as SHOW CREATE TABLE (HoraeDB's
    and gnomon's) prints it: ``tsid uint64 NOT NULL`` in a PRIMARY KEY with the timestamp
    key, such as (tsid, t) or (tsid, t, c1)."""
    pk = stmt.primary_key or []
    return (
        c.name == TSID
        and c.type is ColumnType.UINT64
        and not c.is_tag
        and TSID in pk
        and stmt.timestamp_key in pk
    )


def _primary_key(stmt: CreateTable) -> list[str] | None:
    """The PRIMARY KEY of ``stmt``: None for the implicit (tsid, timestamp key), which
    HoraeDB writes out as PRIMARY KEY(tsid, t) or (t, tsid), with or without a tsid column;
    a key holding ``tsid`` and more columns (HoraeDB's PRIMARY KEY(tsid, t, c1)) with the
    implicit ``tsid`` first."""
    pk = stmt.primary_key
    own_tsid = any(c.name == TSID and not _is_implicit_tsid(c, stmt) for c in stmt.columns)
    if pk is None or TSID not in pk or own_tsid:
        return pk
    if stmt.timestamp_key not in pk:
        raise InvalidArgument(
            f"PRIMARY KEY({', '.join(pk)}) must contain the timestamp key {stmt.timestamp_key!r}"
        )
    # HoraeDB takes the key's columns in any order; gnomon keys such a table by the series
    # id first, which holds the same rows under the same keys, only stored in another order.
    if len(pk) == 2:
        return None
    return [TSID, *(k for k in pk if k != TSID)]


def quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


_PLAIN_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _key_name(name: str) -> str:
    """A name in a KEY clause as HoraeDB prints it, bare, unless it needs quoting to parse
    back (a name with other characters, or starting with a digit)."""
    return name if _PLAIN_NAME.match(name) else quote(name)


def _literal(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    return "'" + str(v).replace("'", "''") + "'"


#: Type names as HoraeDB writes them (DESCRIBE, SHOW CREATE TABLE); the others are alike.
_HORAEDB_TYPES = {
    ColumnType.INT8: "tinyint",
    ColumnType.INT16: "smallint",
    ColumnType.INT32: "int",
    ColumnType.INT64: "bigint",
}


def type_name(typ: ColumnType) -> str:
    return _HORAEDB_TYPES.get(typ, typ.value)


def _key_first(schema: Schema) -> list[Column]:
    """The columns as HoraeDB lists them: the primary key's, in key order, then the others
    as declared."""
    key = [schema.column(k) for k in schema.primary_key]
    return key + [c for c in schema.columns if c.name not in schema.primary_key]


def show_create(info: TableInfo, partition: str | None = None) -> str:
    """``info`` as CREATE TABLE, in HoraeDB's shape: key columns first (the implicit
    ``tsid`` too, which parses back as the implicit one), the PRIMARY KEY written out, the
    options by name;
    ``partition`` is a partition table's PARTITION BY clause."""
    schema = info.schema
    parts: list[str] = []
    for c in _key_first(schema):
        col = f"{quote(c.name)} {type_name(c.type)}"
        if c.is_tag:
            col += " TAG"
        if not c.nullable:
            col += " NOT NULL"
        if c.dictionary:
            col += " DICTIONARY"
        if c.default is not None:
            col += f" DEFAULT {_literal(c.default)}"
        elif c.default_expr is not None:
            col += f" DEFAULT {c.default_expr}"
        if c.comment:
            col += f" COMMENT {_literal(c.comment)}"
        parts.append(col)
    parts.append(f"PRIMARY KEY({','.join(_key_name(k) for k in schema.primary_key)})")
    parts.append(f"TIMESTAMP KEY({_key_name(schema.timestamp_key)})")
    opts = ", ".join(f"{k}='{v}'" for k, v in info.options.to_strings().items())
    clause = "" if partition is None else f" {partition}"
    return (
        f"CREATE TABLE {quote(info.name)} ({', '.join(parts)}){clause} ENGINE=Analytic WITH({opts})"
    )


def describe(info: TableInfo) -> pa.Table:
    """DESCRIBE's rows, as HoraeDB answers them: key columns first, its type names."""
    schema = info.schema
    cols = _key_first(schema)
    return pa.table(
        {
            "name": [c.name for c in cols],
            "type": [type_name(c.type) for c in cols],
            "is_primary": [c.name in schema.primary_key for c in cols],
            "is_nullable": [c.nullable for c in cols],
            "is_tag": [c.is_tag for c in cols],
            "is_dictionary": [c.dictionary for c in cols],
        }
    )
