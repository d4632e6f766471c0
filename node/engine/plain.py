"""Small writes held as Python values, from the request to the memtable.

A write of a few rows spends most of its time in Arrow calls, each costing microseconds
whatever the rows: building the request's arrays, conforming them to the table, the IPC
record, the memtable's batch. :class:`PlainRows` carries such a write as the Python lists a
decoder filled instead: :func:`conform_values` checks it against the table and lays its
values out in the table's column order (series id computed), the WAL record is the columns
as JSON (:meth:`PlainRows.encode`), and the memtable keeps the values until a reader needs
them, then converts everything written meanwhile at once (``Memtable.append_values``).

A write this path cannot take exactly as the Arrow path would (a value of another type, a
column the table lacks or types otherwise, a default to fill, a NOT NULL column left out)
goes the Arrow way, which either refuses it with the error it has always given or converts
it: the two never disagree on what is accepted.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from gnomon.errors import Corrupted
from node.engine.schema import TSID, ColumnType, Schema
from node.engine.tsid import tsid_values

#: What a WAL record of plain rows starts with (an Arrow IPC stream, the other kind of put
#: record, starts with its continuation marker, 0xFFFFFFFF).
MAGIC = b"GNROWS1\n"

#: Built once: ``json.dumps`` with any option builds an encoder per call, a third of the cost.
_ENCODER = json.JSONEncoder(separators=(",", ":"), check_circular=False)
_I64 = (-(2**63), 2**63 - 1)
_U64 = (0, 2**64 - 1)


def _int_in(bounds: tuple[int, int]) -> Callable[[Any], bool]:
    lo, hi = bounds
    # bool is an int to Python, never to a column.
    return lambda v: type(v) is int and lo <= v <= hi


#: The column types a plain write may carry, each with what a non-null value must be: what
#: ``pa.array`` converts to that type exactly (so a later conversion cannot fail).
_FITS: dict[ColumnType, Callable[[Any], bool]] = {
    ColumnType.TIMESTAMP: _int_in(_I64),
    ColumnType.INT64: _int_in(_I64),
    ColumnType.UINT64: _int_in(_U64),
    ColumnType.DOUBLE: lambda v: type(v) is float,
    ColumnType.STRING: lambda v: type(v) is str,
    ColumnType.BOOLEAN: lambda v: type(v) is bool,
}


@dataclass(frozen=True)
class PlainRows:
    """The columns of a write as Python lists (None for null), each of ``num_rows`` values,
    every value fitting its column's type (see :meth:`of`)."""

    names: tuple[str, ...]
    types: tuple[ColumnType, ...]
    columns: tuple[list[Any], ...]
    num_rows: int

    @classmethod
    def of(cls, columns: Sequence[tuple[str, ColumnType, list[Any]]]) -> PlainRows | None:
        """``(name, type, values)`` per column, all as long; None if a type is not one plain
        writes carry or a value does not fit its type (the write then goes as Arrow, whose
        conversion gives the error)."""
        num_rows = len(columns[0][2]) if columns else 0
        for _, typ, values in columns:
            fits = _FITS.get(typ)
            if fits is None or len(values) != num_rows:
                return None
            for v in values:
                if v is not None and not fits(v):
                    return None
        return cls(
            tuple(c[0] for c in columns),
            tuple(c[1] for c in columns),
            tuple(c[2] for c in columns),
            num_rows,
        )

    @classmethod
    def join(cls, parts: list[PlainRows]) -> PlainRows | None:
        """The rows of ``parts`` as one write, each column null in the rows of the parts
        without it; None if a column has two types."""
        types: dict[str, ColumnType] = {}
        for part in parts:
            for name, typ in zip(part.names, part.types, strict=True):
                if types.setdefault(name, typ) is not typ:
                    return None
        columns: dict[str, list[Any]] = {name: [] for name in types}
        for part in parts:
            given = dict(zip(part.names, part.columns, strict=True))
            for name, values in columns.items():
                values += given.get(name) or [None] * part.num_rows
        return cls(
            tuple(types),
            tuple(types.values()),
            tuple(columns.values()),
            sum(p.num_rows for p in parts),
        )

    def arrow(self) -> pa.RecordBatch:
        """The rows as an Arrow batch of the columns written."""
        return pa.RecordBatch.from_arrays(
            [pa.array(v, type=t.arrow()) for v, t in zip(self.columns, self.types, strict=True)],
            names=list(self.names),
        )

    def encode(self) -> bytes:
        """The WAL record of these rows (floats keep every bit through ``repr``; column types
        are strings, written as their values)."""
        return MAGIC + _ENCODER.encode([self.names, self.types, self.columns]).encode()


def is_plain(payload: bytes) -> bool:
    return payload.startswith(MAGIC)


def decode(payload: bytes) -> pa.RecordBatch:
    """The Arrow batch of a record :meth:`PlainRows.encode` made."""
    try:
        names, types, columns = json.loads(payload[len(MAGIC) :])
        rows = PlainRows(
            tuple(names), tuple(ColumnType(t) for t in types), tuple(columns), len(columns[0])
        )
        return rows.arrow()
    except (ValueError, TypeError, IndexError, pa.ArrowException) as e:
        raise Corrupted(f"WAL record of plain rows cannot be decoded: {e}") from None


@dataclass(frozen=True)
class _Layout:
    """How writes of one set of columns become a table's columns: per table column, the
    written column it takes (None: all null); the written columns that must hold no null;
    where the series id goes and the written columns of the tags it hashes."""

    sources: tuple[int | None, ...]
    not_null: tuple[int, ...]
    tsid: int | None
    tags: tuple[tuple[str, int | None], ...]


#: Layouts by (id of the schema, names, types), with the schema kept so that its id stays its
#: own; cleared when full (writes come in few shapes).
_LAYOUTS: dict[
    tuple[int, tuple[str, ...], tuple[ColumnType, ...]], tuple[Schema, _Layout | None]
] = {}
_LAYOUTS_MAX = 1024


def _layout(
    schema: Schema, names: tuple[str, ...], types: tuple[ColumnType, ...]
) -> _Layout | None:
    """The layout of writes of ``names`` typed ``types`` into ``schema``; None if such writes
    must go as Arrow (see the module docstring)."""
    key = (id(schema), names, types)
    held = _LAYOUTS.get(key)
    if held is not None and held[0] is schema:
        return held[1]
    layout = _plan_layout(schema, names, types)
    if len(_LAYOUTS) >= _LAYOUTS_MAX:
        _LAYOUTS.clear()
    _LAYOUTS[key] = (schema, layout)
    return layout


def _plan_layout(
    schema: Schema, names: tuple[str, ...], types: tuple[ColumnType, ...]
) -> _Layout | None:
    position = {name: i for i, name in enumerate(names)}
    if len(position) != len(names):
        return None
    for name, typ in zip(names, types, strict=True):
        if not schema.has_column(name) or schema.column(name).type is not typ:
            return None
    has_tsid = schema.has_tsid
    if has_tsid and TSID in position:
        return None
    sources: list[int | None] = []
    not_null: list[int] = []
    tsid = None
    for index, col in enumerate(schema.columns):
        if has_tsid and col.name == TSID:
            tsid = index
            sources.append(None)
            continue
        i = position.get(col.name)
        if i is None and (col.default is not None or col.default_expr is not None):
            return None
        if not col.nullable:
            if i is None:
                return None
            not_null.append(i)
        sources.append(i)
    tags = tuple((name, position.get(name)) for name in schema.tags)
    return _Layout(tuple(sources), tuple(not_null), tsid, tags)


def conform_values(schema: Schema, rows: PlainRows) -> list[list[Any]] | None:
    """The values of ``rows`` as the table's columns, in its order, series ids computed;
    None if the write must go as Arrow (see the module docstring)."""
    layout = _layout(schema, rows.names, rows.types)
    if layout is None:
        return None
    columns = rows.columns
    for i in layout.not_null:
        if None in columns[i]:
            return None
    nulls: list[Any] = [None] * rows.num_rows
    values = [nulls if i is None else columns[i] for i in layout.sources]
    if layout.tsid is not None:
        tags = {name: nulls if i is None else columns[i] for name, i in layout.tags}
        values[layout.tsid] = tsid_values(
            tags, list(tags), rows.num_rows, untagged_zero=schema.untagged_tsid_zero
        )
    return values
