"""HoraeDB ``WriteTableRequest`` messages to :class:`TableRows`.

Requests whose field groups are all alike (the usual SDK output) are decoded column-wise
from their wire bytes (:mod:`node.ingest.uniform`); any other goes value by value here.

Each ``FieldGroup`` is one row at ``FieldGroup.timestamp`` (milliseconds); the tags of its
``WriteSeriesEntry`` are copied into every row of the entry. A value's kind (the ``Value``
oneof member set) is its type, with no widening, as in HoraeDB.
"""

from __future__ import annotations

from gnomon.errors import InvalidArgument
from gnomon.proto import storage_pb2
from node.engine.schema import ColumnType
from node.ingest.rows import ColumnValues, TableRows
from node.ingest.uniform import decode_uniform

#: ``Value`` oneof member -> column type.
VALUE_KINDS: dict[str, ColumnType] = {
    "float64_value": ColumnType.DOUBLE,
    "string_value": ColumnType.STRING,
    "int64_value": ColumnType.INT64,
    "float32_value": ColumnType.FLOAT,
    "int32_value": ColumnType.INT32,
    "int16_value": ColumnType.INT16,
    "int8_value": ColumnType.INT8,
    "bool_value": ColumnType.BOOLEAN,
    "uint64_value": ColumnType.UINT64,
    "uint32_value": ColumnType.UINT32,
    "uint16_value": ColumnType.UINT16,
    "uint8_value": ColumnType.UINT8,
    "timestamp_value": ColumnType.TIMESTAMP,
    "varbinary_value": ColumnType.VARBINARY,
}


def _column(
    rows: TableRows,
    cache: list[ColumnValues | None],
    names: list[str],
    index: int,
    kind: str | None,
    *,
    is_tag: bool,
) -> ColumnValues:
    """The column that name ``index`` refers to, checking the value kind against it."""
    name = names[index]
    if kind is None:
        what = "tag" if is_tag else "field"
        raise InvalidArgument(
            f"table {rows.table!r}, {what} {name!r}: value type is not supported: the value is "
            "null (no member of Value is set)"
        )
    typ = VALUE_KINDS[kind]
    col = cache[index]
    if col is None:
        col = rows.column(name, is_tag=is_tag, type=typ)
        cache[index] = col
    elif col.type is not typ:
        raise InvalidArgument(
            f"table {rows.table!r}, column {name!r}: value type {typ.value} differs from "
            f"{col.type.value} given earlier in the same request"
        )
    return col


def _tags(
    rows: TableRows,
    entry: storage_pb2.WriteSeriesEntry,
    cache: list[ColumnValues | None],
    names: list[str],
    start: int,
    count: int,
) -> None:
    """Copy the tags of ``entry`` into its ``count`` rows from ``start``."""
    for tag in entry.tags:
        i = tag.name_index
        if i >= len(names):
            raise InvalidArgument(
                f"table {rows.table!r}: tag name index {i} is out of range (the request "
                f"names {len(names)} tags)"
            )
        value = tag.value
        kind = value.WhichOneof("value")
        col = _column(rows, cache, names, i, kind, is_tag=True)
        col.fill(start, count, getattr(value, kind))


def decode_table_request(req: storage_pb2.WriteTableRequest) -> TableRows:
    """The rows of one table of a Write. Raises InvalidArgument for a tag name index out of
    range, a null value or a name used with two types (or as both tag and field); a field
    name index out of range is skipped, as HoraeDB does."""
    if not req.table:
        raise InvalidArgument("write request names no table")
    rows = TableRows(req.table)
    tag_names = list(req.tag_names)
    field_names = list(req.field_names)
    both = sorted(set(tag_names) & set(field_names))
    if both:
        raise InvalidArgument(f"table {req.table!r}: {both} are used both as tags and as fields")
    tag_cols: list[ColumnValues | None] = [None] * len(tag_names)
    field_cols: list[ColumnValues | None] = [None] * len(field_names)
    field_kinds: list[str | None] = [None] * len(field_names)
    n_fields = len(field_names)
    timestamps = rows.timestamps
    uniform = decode_uniform(req)
    if uniform is not None:
        ts, values_by_index, per_entry = uniform
        timestamps.extend(ts)
        fields_made = False
        for entry, (start, count) in zip(req.entries, per_entry, strict=True):
            if count:
                _tags(rows, entry, tag_cols, tag_names, start, count)
                if not fields_made:
                    # Columns come in order of first use, as the row-by-row walk below
                    # makes them: the first series' tags, its fields, later series' tags.
                    for i, values in values_by_index.items():
                        column = _column(
                            rows, field_cols, field_names, i, "float64_value", is_tag=False
                        )
                        column.values = values
                    fields_made = True
        return rows
    for entry in req.entries:
        groups = entry.field_groups
        count = len(groups)
        if count == 0:
            continue
        start = len(timestamps)
        _tags(rows, entry, tag_cols, tag_names, start, count)
        for row, group in enumerate(groups, start):
            timestamps.append(group.timestamp)
            for f in group.fields:
                i = f.name_index
                if i >= n_fields:
                    continue
                value = f.value
                kind = value.WhichOneof("value")
                # The hot path: a known column whose kind matches, being filled in row order.
                field = field_cols[i]
                if field is None or kind != field_kinds[i]:
                    field = _column(rows, field_cols, field_names, i, kind, is_tag=False)
                    field_kinds[i] = kind
                values = field.values
                if len(values) == row:
                    values.append(getattr(value, kind))
                else:
                    field.put(row, getattr(value, kind))
    return rows
