"""Writes naming a partition table, split into writes of its sub-tables before they are
routed: the rows of each sub-table then take the existing paths to its owner (gRPC requests
split by owner and forwarded; decoded rows written here or sent to the owner's Flight
endpoint). A write may not add columns to a partition table: each sub-table would get them
alone."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from gnomon.errors import InvalidArgument
from gnomon.proto import storage_pb2
from node.cluster.ingest_forward import RowsWriter
from node.engine.schema import ColumnType
from node.ingest.rows import ColumnValues, TableRows
from node.partition.tables import Partitions, PartitionTable


def _check_columns(table: PartitionTable, names: Sequence[str]) -> None:
    schema = table.spec.schema
    unknown = [n for n in names if not schema.has_column(n)]
    if unknown:
        raise InvalidArgument(
            f"table {table.name!r} has no column {', '.join(map(repr, unknown))}: a write "
            "cannot add columns to a partition table"
        )


def _key_error(table: PartitionTable, column: str, what: str) -> InvalidArgument:
    return InvalidArgument(
        f"table {table.name!r}: partition key column {column!r} must be written as a string "
        f"tag, not {what}"
    )


def split_rows(table: PartitionTable, rows: TableRows) -> list[TableRows]:
    """``rows`` of ``table`` as the rows of each of its sub-tables they belong to."""
    _check_columns(table, list(rows.columns))
    n = rows.num_rows
    keys: dict[str, pa.Array[Any]] = {}
    for name in table.spec.rule.columns:
        col = rows.columns.get(name)
        if col is None:
            continue
        if not col.is_tag or col.type is not ColumnType.STRING:
            kind = "tag" if col.is_tag else "field"
            raise _key_error(table, name, f"a {kind} of {col.type.value}")
        keys[name] = col.array(n)
    arrays = {name: col.array(n) for name, col in rows.columns.items()}
    timestamps = np.asarray(rows.timestamps, dtype=np.int64)
    out = []
    for p, at in table.spec.rule.groups(table.partition_of(keys, n)).items():
        sub = TableRows(table.spec.sub_table(p))
        sub.timestamps = timestamps[at].tolist()
        taken = pa.array(at)
        for name, col in rows.columns.items():
            sub.columns[name] = ColumnValues(
                name, col.is_tag, col.type, built=arrays[name].take(taken)
            )
        out.append(sub)
    return out


class PartitionedRows:
    """``writer`` (a :class:`RowsWriter`), with the rows of partition tables split into
    their sub-tables' first."""

    def __init__(self, writer: RowsWriter, partitions: Partitions) -> None:
        self.writer = writer
        self.partitions = partitions

    def write_all(self, tables: Sequence[TableRows], *, forwarded: bool = False) -> int:
        split: list[TableRows] = []
        for rows in tables:
            found = self.partitions.find(rows.table)
            split.extend([rows] if found is None else split_rows(found, rows))
        return self.writer.write_all(split, forwarded=forwarded)


def split_request(
    req: storage_pb2.WriteRequest, partitions: Partitions
) -> storage_pb2.WriteRequest:
    """``req`` with each table request naming a partition table replaced by one per
    sub-table its series belong to (``req`` itself when it names none)."""
    found = {t.table: p for t in req.table_requests if (p := partitions.find(t.table)) is not None}
    if not found:
        return req
    out = storage_pb2.WriteRequest()
    out.context.CopyFrom(req.context)
    for t in req.table_requests:
        partitioned = found.get(t.table)
        if partitioned is None:
            out.table_requests.append(t)
        else:
            out.table_requests.extend(_split_table_request(partitioned, t))
    return out


def _split_table_request(
    table: PartitionTable, t: storage_pb2.WriteTableRequest
) -> list[storage_pb2.WriteTableRequest]:
    _check_columns(table, [*t.tag_names, *t.field_names])
    index = {name: i for i, name in enumerate(t.tag_names)}
    keys: dict[str, pa.Array[Any]] = {}
    for name in table.spec.rule.columns:
        position = index.get(name)
        if position is None:
            continue
        values: list[str | None] = []
        for entry in t.entries:
            value = next((tag.value for tag in entry.tags if tag.name_index == position), None)
            if value is None:
                values.append(None)
            elif value.WhichOneof("value") == "string_value":
                values.append(value.string_value)
            else:
                raise _key_error(table, name, f"a {value.WhichOneof('value')}")
        keys[name] = pa.array(values, pa.string())
    partition = table.partition_of(keys, len(t.entries))
    out = []
    for p, rows in sorted(table.spec.rule.groups(partition).items()):
        sub = storage_pb2.WriteTableRequest(
            table=table.spec.sub_table(p), tag_names=t.tag_names, field_names=t.field_names
        )
        sub.entries.extend(t.entries[int(i)] for i in rows)
        out.append(sub)
    return out
