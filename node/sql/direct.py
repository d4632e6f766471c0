"""Time-bucketed aggregations over one table's rows read up front, computed with Arrow
kernels instead of a DataFusion session, plan and run (about 1.5 ms of a point query).

Only this shape is taken, everything else goes to DataFusion:

    SELECT date_bin(INTERVAL '<n> <unit>', <timestamp key>) AS <b>, <agg>(<col>) AS <name>, ...
    FROM <table> [[AS] <alias>] [WHERE <terms>] GROUP BY <b> [ORDER BY <b> [ASC|DESC]]
    [LIMIT <n>]

with units second/minute/hour/day/week, aggregates max, min, sum, avg and count over int64
and double columns (and count(*)), and a WHERE clause whose every term became a scan bound
(:mod:`node.sql.prescan`), so the rows read are exactly the rows it keeps. Answers follow
DataFusion's: ``date_bin`` floors to multiples of the interval since the epoch, nulls are
skipped, an all-null group gives null (count 0), and max and min pass over NaN unless a
group holds nothing else (checked against DataFusion in tests/sql/test_direct.py).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from node.engine.schema import ColumnType, Schema
from node.sql.lexer import Kind, Token

_INTERVAL = re.compile(r"^\s*(\d+)\s*(second|minute|hour|day|week)s?\s*$", re.IGNORECASE)
_UNIT_MS = {"second": 1000, "minute": 60_000, "hour": 3_600_000, "day": 86_400_000}
_UNIT_MS["week"] = 7 * _UNIT_MS["day"]
_FUNCTIONS = {"max": "max", "min": "min", "sum": "sum", "avg": "mean", "count": "count"}
_TYPES = {ColumnType.INT64, ColumnType.DOUBLE}
_BUCKET = "__bucket"


@dataclass(frozen=True)
class Aggregate:
    function: str  # a key of _FUNCTIONS
    column: str | None  # None: count(*)
    name: str


@dataclass(frozen=True)
class BucketedAggregation:
    timestamp: str
    stride_ms: int
    bucket: str
    #: Output columns in SELECT order: the bucket's name, or an aggregate.
    outputs: tuple[str | Aggregate, ...]
    descending: bool | None  # None: no ORDER BY
    limit: int | None


class _Cursor:
    def __init__(self, tokens: Sequence[Token]) -> None:
        self.tokens = [t for t in tokens if not (t.kind is Kind.SYMBOL and t.text == ";")]
        self.i = 0

    @property
    def tok(self) -> Token:
        return self.tokens[min(self.i, len(self.tokens) - 1)]

    def take(self) -> Token:
        t = self.tok
        self.i += 1
        return t

    def word(self, *words: str) -> bool:
        if self.tok.is_word(*words):
            self.i += 1
            return True
        return False

    def symbol(self, text: str) -> bool:
        if self.tok.kind is Kind.SYMBOL and self.tok.text == text:
            self.i += 1
            return True
        return False

    def name(self) -> str | None:
        n = self.tok.identifier()
        if n is not None:
            self.i += 1
        return n

    def column(self, tables: set[str]) -> str | None:
        """``col`` or ``qualifier.col`` with a qualifier of this table."""
        first = self.name()
        if first is not None and self.symbol("."):
            return self.name() if first in tables else None
        return first


def plan(
    tokens: Sequence[Token], table: str, schema: Schema, *, exact_where: bool
) -> BucketedAggregation | None:
    """The aggregation a query asks for, or None when it is not of the shape taken here."""
    if not exact_where:
        return None
    c = _Cursor(tokens)
    if not c.word("SELECT"):
        return None
    tables = {table}
    raw: list[tuple[str, str | None, str | None]] = []  # (function, column, alias)
    while True:
        item = _item(c, schema, tables)
        if item is None:
            return None
        raw.append(item)
        if not c.symbol(","):
            break
    if not c.word("FROM") or c.name() != table:
        return None
    # An alias may follow (columns qualified by it were not taken above).
    if (c.word("AS") or not c.tok.is_word("WHERE", "GROUP")) and c.name() is None:
        return None
    if c.word("WHERE"):
        while c.tok.kind is not Kind.END and not c.tok.is_word("GROUP"):
            c.take()
    if not (c.word("GROUP") and c.word("BY")):
        return None
    group = c.name()
    descending: bool | None = None
    if c.word("ORDER"):
        if not c.word("BY") or c.name() != group:
            return None
        descending = c.word("DESC")
        if not descending:
            c.word("ASC")
    limit: int | None = None
    if c.word("LIMIT"):
        t = c.take()
        if t.kind is not Kind.NUMBER or not t.text.isdigit():
            return None
        limit = int(t.text)
    if c.tok.kind is not Kind.END:
        return None
    buckets = [(col, alias) for fn, col, alias in raw if fn == "date_bin"]
    if len(buckets) != 1 or buckets[0][1] != group:
        return None
    outputs: list[str | Aggregate] = []
    stride = 0
    for fn, col, alias in raw:
        if fn == "date_bin":
            stride = int(col or 0)
            outputs.append(_BUCKET)
        elif alias is None:
            return None  # DataFusion names unaliased aggregates its own way
        else:
            outputs.append(Aggregate(fn, col, alias))
    names = [group, *(o.name for o in outputs if isinstance(o, Aggregate))]
    if len(set(names)) != len(names) or stride <= 0 or group is None:
        return None
    if schema.has_column(group):
        return None  # DataFusion would group by that column, not by the bucket
    return BucketedAggregation(
        schema.timestamp_key, stride, group, tuple(outputs), descending, limit
    )


def _item(
    c: _Cursor, schema: Schema, tables: set[str]
) -> tuple[str, str | None, str | None] | None:
    """One SELECT item: ("date_bin", stride ms, alias) or (function, column, alias)."""
    fn = c.name()
    if fn is None or not c.symbol("("):
        return None
    if fn == "date_bin":
        if not c.word("INTERVAL"):
            return None
        text = c.take()
        m = _INTERVAL.match(text.text) if text.kind is Kind.STRING else None
        if m is None or not c.symbol(","):
            return None
        if c.column(tables) != schema.timestamp_key or not c.symbol(")"):
            return None
        stride = int(m.group(1)) * _UNIT_MS[m.group(2).lower()]
        return ("date_bin", str(stride), _alias(c))
    if fn not in _FUNCTIONS:
        return None
    if fn == "count" and c.symbol("*"):
        column = None
    else:
        column = c.column(tables)
        if column is None or not schema.has_column(column):
            return None
        if schema.column(column).type not in _TYPES:
            return None
    if not c.symbol(")"):
        return None
    return (fn, column, _alias(c))


def _alias(c: _Cursor) -> str | None:
    return c.name() if c.word("AS") else None


def run(agg: BucketedAggregation, rows: pa.Table) -> pa.Table:
    """The answer over ``rows`` (the table's rows the WHERE clause keeps)."""
    ts = rows.column(agg.timestamp).cast(pa.int64()).to_numpy()
    buckets = np.floor_divide(ts, agg.stride_ms) * agg.stride_ms
    columns: dict[str, Any] = {_BUCKET: pa.array(buckets, pa.int64())}
    specs: list[Any] = []
    for o in agg.outputs:
        if isinstance(o, Aggregate):
            source = _BUCKET if o.column is None else o.column
            if source not in columns:
                columns[source] = rows.column(source)
            specs.append((source, _FUNCTIONS[o.function]))
    grouped = pa.table(columns).group_by(_BUCKET, use_threads=False).aggregate(specs)
    if agg.descending is not None:
        grouped = grouped.sort_by([(_BUCKET, "descending" if agg.descending else "ascending")])
    if agg.limit is not None:
        grouped = grouped.slice(0, agg.limit)
    fields: list[pa.Field[Any]] = []
    arrays: list[pa.ChunkedArray[Any]] = []
    # The aggregates come in the order asked, around the key (pyarrow has moved it).
    key = grouped.column_names.index(_BUCKET)
    results = iter(i for i in range(grouped.num_columns) if i != key)
    for o in agg.outputs:
        if isinstance(o, Aggregate):
            values = grouped.column(next(results))
            count = o.function == "count"
            if count:
                values = values.cast(pa.int64())
            fields.append(pa.field(o.name, values.type, nullable=not count))
            arrays.append(values)
        else:
            fields.append(pa.field(agg.bucket, pa.timestamp("ms")))
            arrays.append(grouped.column(_BUCKET).cast(pa.timestamp("ms")))
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))
