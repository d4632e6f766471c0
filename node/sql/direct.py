"""Queries over one table's rows read up front answered with Arrow kernels instead of a
DataFusion session, plan and run (about 1.5 ms of a point query; DataFusion's sort of tens of
thousands of rows takes two to three times pyarrow's): the fast paths of
:mod:`node.sql.fastpath`. Only two shapes are taken, everything else goes to DataFusion.
Time-bucketed aggregations:

    SELECT date_bin(INTERVAL '<n> <unit>', <timestamp key>) AS <b>, <agg>(<col>) AS <name>, ...
    FROM <table> [[AS] <alias>] [WHERE <terms>] GROUP BY <b> [ORDER BY <b> [ASC|DESC]]
    [LIMIT <n>]

with units second/minute/hour/day/week, aggregates max, min, sum, avg and count over int64
and double columns (and count(*)), and a WHERE clause whose every term became a scan bound
(:mod:`node.sql.prescan`), so the rows read are exactly the rows it keeps. Answers follow
DataFusion's: ``date_bin`` floors to multiples of the interval since the epoch, nulls are
skipped, an all-null group gives null (count 0), and max and min pass over NaN unless a
group holds nothing else. And sorted rows:

    SELECT <col>, ... FROM <table> [[AS] <alias>] [WHERE <terms>]
    ORDER BY <key> [ASC|DESC], ... [LIMIT <n>]

with plain columns (no expressions, aliases or repeats) and keys that are string, integer or
timestamp columns, each ASC or DESC and NULLS FIRST or LAST (by default nulls last ascending
and first descending, as DataFusion orders them). Both are checked against DataFusion in
tests/sql/test_direct.py. An aggregation over a located read takes its rows as the numpy
arrays the read slices (:func:`aggregate`), never built into a table.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from node.engine.bounds import INTEGER_TYPES, Bounds, Range
from node.engine.schema import ColumnType, Schema
from node.engine.sst.reader import LocatedArrays
from node.sql.lexer import Token
from node.sql.select import Bucket, Call, Column, Select

_INTERVAL = re.compile(r"^\s*(\d+)\s*(second|minute|hour|day|week)s?\s*$", re.IGNORECASE)
_UNIT_MS = {"second": 1000, "minute": 60_000, "hour": 3_600_000, "day": 86_400_000}
_UNIT_MS["week"] = 7 * _UNIT_MS["day"]
_FUNCTIONS = frozenset({"max", "min", "sum", "avg", "count"})
_TYPES = {ColumnType.INT64, ColumnType.DOUBLE}
_BUCKET = "__bucket"


@dataclass(frozen=True)
class Aggregate:
    function: str  # one of _FUNCTIONS
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
    #: Where the interval's and the limit's literals are among the query's tokens.
    interval_at: int = field(default=0, compare=False)
    limit_at: int | None = field(default=None, compare=False)

    @functools.cached_property
    def reads(self) -> list[str]:
        """The columns the answer reads."""
        return list(dict.fromkeys([self.timestamp, *self.aggregated]))

    located = True

    @property
    def route(self) -> str:
        functions = ", ".join(
            f"{o.function}({o.column or '*'})" for o in self.outputs if isinstance(o, Aggregate)
        )
        return (
            f"fast path: bucketed aggregation of {functions} over {self.stride_ms} ms buckets "
            f"of {self.timestamp}, by numpy (from a located read's arrays where it is one)"
        )

    def bind(self, tokens: Sequence[Token]) -> BucketedAggregation | None:
        """This aggregation with the interval and limit of ``tokens``, a query of its shape
        (None for an interval of no unit taken)."""
        stride = _stride(tokens[self.interval_at])
        if stride <= 0:
            return None
        limit = _count(tokens, self.limit_at)
        if (stride, limit) == (self.stride_ms, self.limit):
            return self
        return replace(self, stride_ms=stride, limit=limit)

    def answer(self, rows: pa.Table | LocatedArrays) -> pa.Table:
        if isinstance(rows, LocatedArrays):
            return aggregate(self, rows)
        return run(self, rows)

    def window(self, bounds: Bounds) -> tuple[Bounds, int] | None:
        """``ORDER BY bucket DESC LIMIT n`` under an upper time bound: the n buckets up to
        that bound. When each holds a row they are the answer's n buckets (none later holds
        one), and a bucket's rows all lie in it, so its aggregates are whole."""
        bound = bounds.get(self.timestamp)
        if not self.descending or not self.limit or bound is None or bound.hi is None:
            return None
        if bound.values is not None:
            return None
        last = bound.hi if bound.hi_inclusive else bound.hi - 1
        start = (last // self.stride_ms - (self.limit - 1)) * self.stride_ms
        return {**bounds, self.timestamp: bound.intersect(Range(lo=start))}, self.limit

    @functools.cached_property
    def aggregated(self) -> list[str]:
        """The columns aggregated."""
        return list(
            dict.fromkeys(o.column for o in self.outputs if isinstance(o, Aggregate) and o.column)
        )


@dataclass(frozen=True)
class SortKey:
    column: str
    descending: bool = False
    #: Where nulls go (DataFusion's default: last ascending, first descending).
    nulls_first: bool = False


@dataclass(frozen=True)
class SortedRows:
    columns: tuple[str, ...]
    keys: tuple[SortKey, ...]
    limit: int | None
    #: Where the limit's literal is among the query's tokens.
    limit_at: int | None = field(default=None, compare=False)

    @functools.cached_property
    def reads(self) -> list[str]:
        """The columns the answer reads."""
        return list(dict.fromkeys([*self.columns, *(k.column for k in self.keys)]))

    located = False

    @property
    def route(self) -> str:
        keys = ", ".join(f"{k.column} {'desc' if k.descending else 'asc'}" for k in self.keys)
        limit = "" if self.limit is None else f" limit {self.limit}"
        return f"fast path: sorted rows by {keys or 'nothing'}{limit}, sorted by Arrow"

    def bind(self, tokens: Sequence[Token]) -> SortedRows:
        limit = _count(tokens, self.limit_at)
        return self if limit == self.limit else replace(self, limit=limit)

    def answer(self, rows: pa.Table | LocatedArrays) -> pa.Table | None:
        """The sorted rows; a located read's arrays are declined (they come in run order,
        each series apart: a table of them is sorted as cheaply)."""
        if isinstance(rows, LocatedArrays):
            return None
        return run(self, rows)

    def window(self, bounds: Bounds) -> None:
        return None


Direct = BucketedAggregation | SortedRows

#: Sort keys taken: their order is the same in pyarrow and DataFusion (floats are left out:
#: where NaN and nulls go differs between their descending sorts).
_SORTABLE = INTEGER_TYPES | {ColumnType.STRING, ColumnType.TIMESTAMP}


def plan(query: Select, tokens: Sequence[Token], table: str, schema: Schema) -> Direct | None:
    """What a query (its tree, and ``tokens``, where its literals are) whose WHERE clause
    became the scan's bounds asks for, or None when it is not of a shape taken here."""
    if (
        query.from_alone(table) is None
        or query.other
        or query.distinct
        or query.offset_at is not None
    ):
        return None
    if query.group_by:
        return _aggregation(query, tokens, table, schema)
    return _sorted_rows(query, tokens, table, schema)


def _of(column: Column, table: str) -> str | None:
    """The name of ``column`` when it is unqualified or qualified by ``table`` (columns
    qualified by an alias are not taken)."""
    return column.name if column.qualifier in (None, table) else None


def _sorted_rows(
    query: Select, tokens: Sequence[Token], table: str, schema: Schema
) -> SortedRows | None:
    columns: list[str] = []
    for item in query.items:
        e = item.expression
        column = _of(e, table) if isinstance(e, Column) and item.alias is None else None
        if column is None or not schema.has_column(column):
            return None
        columns.append(column)
    if len(set(columns)) != len(columns):
        return None
    keys: list[SortKey] = []
    for key in query.order_by:
        column = None if key.expression is None else _of(key.expression, table)
        if column is None or not schema.has_column(column):
            return None
        if schema.column(column).type not in _SORTABLE:
            return None
        nulls_first = key.descending if key.nulls_first is None else key.nulls_first
        keys.append(SortKey(column, key.descending, nulls_first))
    limit = _count(tokens, query.limit_at)
    return SortedRows(tuple(columns), tuple(keys), limit, query.limit_at)


def _aggregation(
    query: Select, tokens: Sequence[Token], table: str, schema: Schema
) -> BucketedAggregation | None:
    (group,) = query.group_by if len(query.group_by) == 1 else (None,)
    if group is None or group.qualifier is not None:
        return None
    descending: bool | None = None
    if query.order_by:
        (key,) = query.order_by if len(query.order_by) == 1 else (None,)
        if key is None or key.expression != group or key.nulls_first is not None:
            return None
        descending = key.descending
    interval_at: int | None = None
    outputs: list[str | Aggregate] = []
    for item in query.items:
        e = item.expression
        if isinstance(e, Bucket):
            if interval_at is not None or item.alias != group.name:
                return None
            if _of(e.column, table) != schema.timestamp_key:
                return None
            interval_at = e.interval_at
            outputs.append(_BUCKET)
        elif not isinstance(e, Call) or e.function not in _FUNCTIONS:
            return None
        elif item.alias is None:
            return None  # DataFusion names unaliased aggregates its own way
        elif e.column is None:
            if e.function != "count":
                return None
            outputs.append(Aggregate(e.function, None, item.alias))
        else:
            column = _of(e.column, table)
            if column is None or not schema.has_column(column):
                return None
            if schema.column(column).type not in _TYPES:
                return None
            outputs.append(Aggregate(e.function, column, item.alias))
    if interval_at is None:
        return None
    stride = _stride(tokens[interval_at])
    names = [group.name, *(o.name for o in outputs if isinstance(o, Aggregate))]
    if len(set(names)) != len(names) or stride <= 0:
        return None
    if schema.has_column(group.name):
        return None  # DataFusion would group by that column, not by the bucket
    return BucketedAggregation(
        schema.timestamp_key,
        stride,
        group.name,
        tuple(outputs),
        descending,
        _count(tokens, query.limit_at),
        interval_at,
        query.limit_at,
    )


def _stride(interval: Token) -> int:
    """The milliseconds of an ``INTERVAL '<n> <unit>'`` literal, 0 for one not taken."""
    m = _INTERVAL.match(interval.text)
    return 0 if m is None else int(m.group(1)) * _UNIT_MS[m.group(2).lower()]


def _count(tokens: Sequence[Token], at: int | None) -> int | None:
    """The whole number at token ``at`` (a LIMIT), None if there is none."""
    return None if at is None else int(tokens[at].text)


def run(query: Direct, rows: pa.Table) -> pa.Table:
    """The answer over ``rows`` (the table's rows the WHERE clause keeps); string tags may
    come dictionary encoded, as they were read."""
    if isinstance(query, SortedRows):
        return _sort(query, rows)
    # The timestamp key is never null; its datetime64 values viewed as integers spare a cast.
    ts = rows.column(query.timestamp).to_numpy().view(np.int64)
    return _aggregate(query, ts, {c: _values(rows.column(c)) for c in query.aggregated})


def aggregate(agg: BucketedAggregation, rows: LocatedArrays) -> pa.Table:
    """The answer over the rows the WHERE clause keeps, given as null-free numpy arrays by
    column (the timestamp key's as integers of milliseconds), as a located read gives
    them (:meth:`node.engine.scan.Scan.located_arrays`)."""
    arrays = rows.columns
    values = {c: _Values(arrays[c], None, _ARROW_TYPES[arrays[c].dtype]) for c in agg.aggregated}
    return _aggregate(agg, arrays[agg.timestamp], values, in_time_order=rows.in_run_order)


class _Values(NamedTuple):
    """An aggregated column's values in numpy, nulls (where ``valid`` is False) as 0."""

    data: np.ndarray[Any, Any]
    valid: np.ndarray[Any, Any] | None  # None: no nulls
    type: pa.DataType


def _values(column: pa.ChunkedArray[Any]) -> _Values:
    if not column.null_count:
        return _Values(column.to_numpy(), None, column.type)
    valid = column.is_valid().to_numpy(zero_copy_only=False)
    return _Values(column.fill_null(pa.scalar(0, column.type)).to_numpy(), valid, column.type)


def _sort(query: SortedRows, rows: pa.Table) -> pa.Table:
    out = rows.select(list(query.columns))
    if not query.keys:
        return out if query.limit is None else out.slice(0, query.limit)
    names = [f"k{i}" for i in range(len(query.keys))]  # a column may be a key twice
    pairs = list(zip(names, query.keys, strict=True))
    keys = pa.table({n: sort_key(rows.column(k.column)) for n, k in pairs})
    # Per-key null placement: pyarrow 25 and later (its type stubs know only pairs).
    sort_keys: list[Any] = [
        (
            n,
            "descending" if k.descending else "ascending",
            "at_start" if k.nulls_first else "at_end",
        )
        for n, k in pairs
    ]
    options = pc.SortOptions(sort_keys=sort_keys)
    order = pc.sort_indices(keys, options=options)
    if query.limit is not None:
        order = order.slice(0, query.limit)
    return out.take(order)


def sort_key(values: pa.ChunkedArray[Any]) -> pa.ChunkedArray[Any]:
    """A column that sorts as ``values`` does, nulls included. A dictionary column becomes
    the rank of each row's value among the dictionary's: sorting those integers instead of
    the strings took a TSBS high-cpu-all sort (65,000 rows by host and time) from 14 to 6 ms."""
    t = values.type
    if not pa.types.is_dictionary(t):
        return values
    chunks: list[Any] = values.chunks
    if not chunks or any(c.dictionary.null_count for c in chunks):
        return values.cast(t.value_type)  # pyarrow cannot unify dictionaries holding nulls
    unified: list[Any] = values.unify_dictionaries().chunks
    ranks = pc.rank(unified[0].dictionary, sort_keys="ascending", tiebreaker="dense")
    return pa.chunked_array([ranks.take(c.indices) for c in unified], ranks.type)


def _aggregate(
    agg: BucketedAggregation,
    ts: np.ndarray[Any, Any],
    columns: Mapping[str, _Values],
    *,
    in_time_order: bool = False,
) -> pa.Table:
    """``agg`` over rows whose timestamps (integers of milliseconds) are ``ts`` (known to be
    sorted when ``in_time_order``) and whose aggregated columns are ``columns``."""
    # Grouped with numpy over the rows sorted by bucket: Acero's hash aggregation took a
    # point query's few hundred rows 0.4 ms, this 0.1.
    # Buckets by number (floored, as date_bin floors); their starts are made only for the
    # buckets found (numpy calls, not their size, are what a point query pays for).
    ordered = ts // agg.stride_ms
    order: np.ndarray[Any, Any] | None = None  # None: the rows come in bucket order
    if not in_time_order and (ordered[1:] < ordered[:-1]).any():
        order = np.argsort(ordered, kind="stable")  # rows of a bucket keep their order
        ordered = ordered[order]
    first = np.empty(len(ordered), dtype=bool)  # the first row of each bucket
    first[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    starts = first.nonzero()[0]
    ends = np.concatenate((starts[1:], [len(ordered)]))
    sizes = ends - starts
    arrays: list[pa.Array[Any]] = []
    for o in agg.outputs:
        if isinstance(o, Aggregate):
            column = None if o.column is None else columns[o.column]
            arrays.append(_reduced(o.function, column, order, starts, sizes))
        else:
            arrays.append(_as_arrow(ordered[starts] * agg.stride_ms, _MS))
    types = tuple(columns[c].type for c in agg.aggregated)
    grouped = pa.Table.from_arrays(arrays, schema=_answer_schema(agg, types))
    if agg.descending:
        grouped = grouped.take(np.arange(grouped.num_rows - 1, -1, -1))
    return grouped if agg.limit is None else grouped.slice(0, agg.limit)


def _reduced(
    function: str,
    column: _Values | None,
    order: np.ndarray[Any, Any] | None,
    starts: np.ndarray[Any, Any],
    sizes: np.ndarray[Any, Any],
) -> pa.Array[Any]:
    """``function`` over the groups of ``column`` (count(*) when None) whose rows, taken in
    ``order`` (as they come when None), begin at ``starts`` and number ``sizes``, with
    Arrow's semantics: nulls skipped, an all-null group null (count 0), NaN passed over by
    max and min unless a group holds nothing else and carried through sums."""
    if column is None:
        return _as_arrow(sizes, pa.int64())
    counts = sizes
    if column.valid is not None and len(starts):
        valid = _ordered(column.valid, order)
        counts = np.add.reduceat(valid.astype(np.int64), starts)
    if function == "count":
        return _as_arrow(counts, pa.int64())
    typ = column.type
    floating = column.data.dtype.kind == "f"
    data = column.data
    if column.valid is not None:
        # A null must change nothing: NaN under fmax/fmin (which pass over it), 0 in a sum.
        neutral = np.nan if floating and function in _EXTREME else _EXTREME.get(function, 0)
        data = np.where(column.valid, data, neutral)
    values = _ordered(data, order)
    if not len(starts):
        reduced = values[:0].astype(np.float64 if function == "avg" else values.dtype)
    elif function == "avg":
        reduced = np.add.reduceat(values.astype(np.float64), starts) / np.maximum(counts, 1)
    else:
        ufunc = {
            "max": np.fmax if floating else np.maximum,
            "min": np.fmin if floating else np.minimum,
            "sum": np.add,
        }[function]
        reduced = ufunc.reduceat(values, starts)
    if column.valid is not None:
        # Only a group of nulls alone (count 0) answers null.
        return pa.array(reduced, _result_type(function, typ), mask=counts == 0)
    return _as_arrow(reduced, _result_type(function, typ))


def _result_type(function: str, typ: pa.DataType) -> pa.DataType:
    """The type of ``function`` over a column of ``typ`` (not count, always int64)."""
    return pa.float64() if function == "avg" else typ


@functools.lru_cache(maxsize=256)
def _answer_schema(agg: BucketedAggregation, types: tuple[pa.DataType, ...]) -> pa.Schema:
    """The answer's schema when the aggregated columns are of ``types`` (in the order of
    :attr:`BucketedAggregation.aggregated`): made once per query shape, as its fields and
    schema cost a point query several pyarrow calls each."""
    of = dict(zip(agg.aggregated, types, strict=True))
    fields: list[pa.Field[Any]] = []
    for o in agg.outputs:
        if not isinstance(o, Aggregate):
            fields.append(pa.field(agg.bucket, _MS))
        elif o.function == "count":
            fields.append(pa.field(o.name, pa.int64(), nullable=False))
        else:
            assert o.column is not None  # only count takes *
            fields.append(pa.field(o.name, _result_type(o.function, of[o.column])))
    return pa.schema(fields)


def _as_arrow(values: np.ndarray[Any, Any], typ: pa.DataType) -> pa.Array[Any]:
    """Null-free, contiguous ``values`` as an Arrow array of ``typ``: numpy's buffer taken
    as it is where it holds ``typ``'s values as Arrow does (numbers of the same type,
    timestamps as int64), else converted. pa.array checks and converts even then, and a
    timestamp type sends it through a cast kernel."""
    same = _ARROW_TYPES.get(values.dtype)
    if same is not None and (same.id == typ.id or (same.id == _INT64_ID and typ.id == _MS.id)):
        return pa.Array.from_buffers(typ, len(values), [None, pa.py_buffer(values.data)])
    return pa.array(values, typ)


_MS = pa.timestamp("ms")
_INT64_ID = pa.int64().id
#: Arrow's types of numpy's numeric dtypes, whose buffers hold values as Arrow's do.
_ARROW_TYPES: dict[np.dtype[Any], pa.DataType] = {
    np.dtype(t.to_pandas_dtype()): t
    for t in (
        *(pa.int8(), pa.int16(), pa.int32(), pa.int64()),
        *(pa.uint8(), pa.uint16(), pa.uint32(), pa.uint64()),
        *(pa.float32(), pa.float64()),
    )
}

#: What a null becomes in an integer max or min: a value every other one beats.
_EXTREME = {"max": int(np.iinfo(np.int64).min), "min": int(np.iinfo(np.int64).max)}


def _ordered(
    values: np.ndarray[Any, Any], order: np.ndarray[Any, Any] | None
) -> np.ndarray[Any, Any]:
    return values if order is None else values[order]
