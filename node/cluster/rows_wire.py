"""One table's part of a write (:class:`TableRows`) as Arrow, for the node that owns the table.

A node that took a line-protocol write for a table served elsewhere sends the table's rows to
the owner as they were decoded, not as the owner's table would store them: the owner writes
them through its own ingestor, which creates the table or adds columns as the rows need, and
checks them against the schema it holds. So the rows travel with what that takes: column 0
holds the timestamps (milliseconds), every other column is one tag or field, whose field
metadata says which (``gnomon.kind``) and its gnomon type (``gnomon.type``). Columns are
found by position, so a tag or field may have any name, even the timestamps' (the owner's
ingestor then refuses it as it would locally).

Both directions convert whole columns; no row passes through Python alone.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from gnomon.errors import InvalidArgument
from node.engine.schema import ColumnType
from node.ingest.rows import ColumnValues, TableRows

KIND = b"gnomon.kind"
TYPE = b"gnomon.type"
TIMESTAMPS = b"timestamps"
TAG = b"tag"
FIELD = b"field"
#: The name column 0 (the timestamps) travels under; only its position counts.
TIMESTAMPS_NAME = "__timestamps"
_TIMESTAMP_TYPE = pa.timestamp("ms")


def encode(rows: TableRows) -> pa.Table:
    """``rows`` as an Arrow table: the timestamps, then each tag and field column with its
    kind and type; InvalidArgument (naming the table and column) when values do not fit
    their column's type."""
    n = rows.num_rows
    fields: list[pa.Field[Any]] = [
        pa.field(TIMESTAMPS_NAME, _TIMESTAMP_TYPE, nullable=False, metadata={KIND: TIMESTAMPS})
    ]
    arrays: list[pa.Array[Any]] = [pa.array(rows.timestamps, type=_TIMESTAMP_TYPE)]
    for name, col in rows.columns.items():
        try:
            array = col.array(n)
        except InvalidArgument as e:
            raise InvalidArgument(f"table {rows.table!r}, {e.message}") from None
        wanted = col.type.arrow()
        if array.type != wanted:
            # A decoder may build a column in a form of its type (a dictionary of strings).
            array = array.cast(wanted)
        arrays.append(array)
        kind = TAG if col.is_tag else FIELD
        fields.append(pa.field(name, wanted, metadata={KIND: kind, TYPE: col.type.value.encode()}))
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def decode(table: str, data: pa.Table) -> TableRows:
    """The rows :func:`encode` made of a part of a write to ``table``; InvalidArgument naming
    the problem when ``data`` is not of that form."""
    schema = data.schema
    if not len(schema) or _meta(schema.field(0), KIND) != TIMESTAMPS:
        raise InvalidArgument(
            f"table {table!r}: rows to ingest must start with the timestamps column "
            f"(metadata gnomon.kind=timestamps)"
        )
    if schema.field(0).type != _TIMESTAMP_TYPE:
        raise InvalidArgument(
            f"table {table!r}: timestamps must be {_TIMESTAMP_TYPE}, got {schema.field(0).type}"
        )
    timestamps = data.column(0).combine_chunks()
    if timestamps.null_count:
        raise InvalidArgument(f"table {table!r}: {timestamps.null_count} rows have no timestamp")
    rows = TableRows(table)
    # One conversion of the whole column (the ingestor takes timestamps as a list).
    rows.timestamps = timestamps.cast(pa.int64()).to_numpy().tolist()
    for i in range(1, len(schema)):
        column = _column(table, schema.field(i), data.column(i).combine_chunks())
        if column.name in rows.columns:
            raise InvalidArgument(f"table {table!r}: column {column.name!r} is given twice")
        rows.columns[column.name] = column
    return rows


def _column(table: str, f: pa.Field[Any], array: pa.Array[Any]) -> ColumnValues:
    kind = _meta(f, KIND)
    if kind not in (TAG, FIELD):
        raise InvalidArgument(
            f"table {table!r}, column {f.name!r}: metadata gnomon.kind must be tag or field, "
            f"got {kind!r}"
        )
    try:
        type = ColumnType(_meta(f, TYPE).decode())
    except (ValueError, UnicodeDecodeError):
        raise InvalidArgument(
            f"table {table!r}, column {f.name!r}: metadata gnomon.type names no column type "
            f"(got {_meta(f, TYPE)!r})"
        ) from None
    if array.type != type.arrow():
        raise InvalidArgument(
            f"table {table!r}, column {f.name!r}: values are {array.type}, not the "
            f"{type.arrow()} of type {type.value}"
        )
    return ColumnValues(f.name, kind == TAG, type, built=array)


def _meta(f: pa.Field[Any], key: bytes) -> bytes:
    return (f.metadata or {}).get(key, b"")
