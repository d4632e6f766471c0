"""A :class:`ScanRequest` on the wire: the scan form of an Arrow Flight ticket
(:class:`gnomon.flight.ticket.ScanSpec`, JSON). :func:`encode` makes one, :func:`decode`
reads one; nothing else turns one form into the other.

Field by field:

- ``columns``, ``time_range``, ``version``, ``timestamp_ms``: as they are.
- ``bounds``: as the ticket's ``filters`` (``[column, op, value]``; a range's ends as ``>``,
  ``>=``, ``<``, ``<=``, a value set as ``in``), the form the Spark data source writes its
  filters in. :func:`decode` reads filters back as bounds wherever bounds can hold them, so
  the owner of a table prunes files, row groups and series by a remote scan's bounds, and a
  Spark scan's filters, as it prunes a local scan; comparisons of the timestamp key narrow
  the time range instead, and the rest (``!=``, ``is_null``, ``is_not_null``, dates and
  booleans, a null among ``in`` values) become the engine predicate.
- ``predicate``: a Substrait ExtendedExpression, base64 (``pyarrow.substrait``): a
  standard, protobuf-checked form that survives malformed input (Arrow's own expression
  serialization, the pickle form, aborts the process on some). Substrait binds column
  references to positions in a schema sent along (the columns the predicate names), so the
  owner evaluates it on batches whose first columns are those (:class:`RowPredicate`) and
  cannot hand it to its engine, which finds columns by name. A predicate that cannot travel
  (a function Substrait has no mapping for, or too long) stays with the sender, who applies
  it to what arrives.
- ``pinned``: a held snapshot travels as its lease key (``pin``), which :func:`decode`'s
  caller resolves; a request holding the snapshot object itself is refused.
- ``batch_size`` and ``dictionary_tags`` stay behind (the owner answers in batches of its
  own size, tags plain); ``order`` and ``limit_per_series`` are refused, no owner serves
  them yet.
"""

from __future__ import annotations

import base64
import math
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.substrait as substrait

from gnomon.errors import InvalidArgument
from gnomon.flight.ticket import MAX_PREDICATE_CHARS, Filter, ScanSpec
from node.engine.bounds import BOUNDED_TYPES, Bounds, Range, intersect_all
from node.engine.scan.request import ScanRequest, TimeRange, referenced_columns
from node.engine.schema import Column, ColumnType, Schema
from node.engine.table import Pinned

#: The name the predicate has inside its Substrait message.
_PREDICATE = "predicate"
_FIELD_PATH = re.compile(r"FieldPath\((\d+)\)")
_COMPARE: dict[str, Callable[..., pc.Expression]] = {
    "=": pc.equal,
    "!=": pc.not_equal,
    "<": pc.less,
    "<=": pc.less_equal,
    ">": pc.greater,
    ">=": pc.greater_equal,
}


# -- the request -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Outgoing:
    """A request as sent: the ticket, and the part of its predicate that could not travel
    (applied by the sender to what arrives, on ``spec.columns``, then cut to ``wanted``)."""

    spec: ScanSpec
    wanted: list[str]
    local: pc.Expression | None

    def answer(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        if self.local is None:
            yield from batches
            return
        for b in batches:
            yield b.filter(self.local).select(self.wanted)


def encode(request: ScanRequest, schema: Schema, *, scan_id: str | None = None) -> Outgoing:
    """``request`` of a table of ``schema`` as a ticket (``scan_id`` names it for the
    owner's ``scan_stats``)."""
    if request.order is not None or request.limit_per_series is not None:
        raise InvalidArgument(
            f"scan of {request.table!r}: an ordered or per-series limited scan does not travel"
        )
    if request.pinned is not None:
        raise InvalidArgument(
            f"scan of {request.table!r}: a held snapshot travels as its lease key, not itself"
        )
    wanted = list(schema.names) if request.columns is None else list(request.columns)
    encoded = None if request.predicate is None else encode_predicate(request.predicate, schema)
    local = request.predicate if encoded is None else None
    # Each column once: a ticket naming one twice is refused.
    read = list(
        dict.fromkeys(wanted if local is None else [*wanted, *referenced_columns(local, schema)])
    )
    spec = ScanSpec(
        request.table,
        columns=read,
        filters=bounds_filters(request.bounds or {}),
        predicate=encoded,
        time_range=request.time_range or (None, None),
        version=request.version,
        timestamp_ms=request.timestamp_ms,
        scan_id=scan_id,
    )
    return Outgoing(spec, wanted, local)


@dataclass(frozen=True)
class Incoming:
    """A ticket as received: the owner's engine scan (``request``, which reads the columns
    the row predicate needs too) and the row predicate that came along, applied by
    :meth:`answer` to give the ``wanted`` columns of the rows it keeps."""

    request: ScanRequest
    wanted: list[str]
    rows: RowPredicate | None

    def answer(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        if self.rows is None:
            yield from batches
            return
        for b in batches:
            yield self.rows.apply(b, self.wanted)


def decode(spec: ScanSpec, schema: Schema, *, pinned: Pinned | None = None) -> Incoming:
    """The scan ``spec`` asks of its table (of ``schema``), over ``pinned`` (the snapshot
    its ``pin`` names) if given; InvalidArgument naming what does not fit the table."""
    wanted = list(schema.names) if spec.columns is None else list(spec.columns)
    for c in wanted:
        if not schema.has_column(c):
            raise InvalidArgument(f"table {spec.table!r} has no column {c!r}")
    predicate, bounds, time_range = read_filters(spec.table, spec.filters, spec.time_range, schema)
    rows = None if spec.predicate is None else decode_predicate(spec.predicate, spec.table, schema)
    request = ScanRequest(
        spec.table,
        columns=spec.columns if rows is None else rows.read_columns(wanted),
        time_range=time_range,
        predicate=predicate,
        bounds=bounds or None,
        version=spec.version,
        timestamp_ms=spec.timestamp_ms,
        pinned=pinned,
    )
    return Incoming(request, wanted, rows)


# -- bounds as filters -------------------------------------------------------------------------


def bounds_filters(bounds: Bounds) -> list[Filter]:
    """``bounds`` as ticket filters (their AND admits exactly what the bounds admit)."""
    out: list[Filter] = []
    for column, r in bounds.items():
        if r.lo is not None:
            out.append((column, ">=" if r.lo_inclusive else ">", r.lo))
        if r.hi is not None:
            out.append((column, "<=" if r.hi_inclusive else "<", r.hi))
        if r.values is not None:
            out.append((column, "in", sorted(r.values, key=lambda v: (type(v).__name__, v))))
    return out


def read_filters(
    table: str, filters: Sequence[Filter], time_range: TimeRange, schema: Schema
) -> tuple[pc.Expression | None, dict[str, Range], TimeRange]:
    """``filters`` of a scan of ``table``, as the engine takes them: a predicate, bounds, and
    ``time_range`` narrowed by the comparisons of the timestamp key."""
    lo, hi = time_range
    parts: list[pc.Expression] = []
    ranges: list[tuple[str, Range]] = []
    for name, op, value in filters:
        if not schema.has_column(name):
            raise InvalidArgument(f"table {table!r} has no column {name!r}")
        column = schema.column(name)
        if name == schema.timestamp_key and op in ("=", "<", "<=", ">", ">="):
            v = int(_literal(column, value).cast(pa.int64()).as_py())
            if op in ("=", ">="):
                lo = v if lo is None else max(lo, v)
            if op == ">":
                lo = v + 1 if lo is None else max(lo, v + 1)
            if op in ("=", "<="):
                hi = v + 1 if hi is None else min(hi, v + 1)
            if op == "<":
                hi = v if hi is None else min(hi, v)
            continue
        bound = _bound(column, op, value)
        if bound is not None:
            ranges.append((name, bound))
            continue
        f = pc.field(name)
        if op == "is_null":
            parts.append(f.is_null())
        elif op == "is_not_null":
            parts.append(pc.is_valid(f))
        elif op == "in":
            values = pa.array([_literal(column, v).as_py() for v in value], column.type.arrow())
            parts.append(f.isin(values))
        else:
            parts.append(_COMPARE[op](f, _literal(column, value)))
    predicate: pc.Expression | None = None
    for p in parts:
        predicate = p if predicate is None else predicate & p
    return predicate, intersect_all(ranges), (lo, hi)


def _bound(column: Column, op: str, value: Any) -> Range | None:
    """The filter ``column op value`` as a bound, or None where a bound would not admit the
    same rows as the filter (a null among ``in`` values matches nulls; NaN compares unlike
    a bound) or cannot hold the column's values."""
    if column.type not in BOUNDED_TYPES or op not in ("=", "<", "<=", ">", ">=", "in"):
        return None
    given = value if op == "in" else [value]
    if any(v is None or (isinstance(v, float) and math.isnan(v)) for v in given):
        return None
    values = [_bound_value(column, v) for v in given]
    if op == "in":
        return Range(values=frozenset(values))
    return Range.of(op, values[0])


def _bound_value(column: Column, value: Any) -> Any:
    scalar = _literal(column, value)
    if column.type is ColumnType.TIMESTAMP:
        return int(scalar.cast(pa.int64()).as_py())
    return scalar.as_py()


def _literal(column: Column, value: Any) -> pa.Scalar[Any]:
    try:
        if column.type is ColumnType.TIMESTAMP:
            lit: pa.Scalar[Any] = pa.scalar(int(value), pa.timestamp("ms"))
        else:
            lit = pa.scalar(value).cast(column.type.arrow())
        return lit
    except (
        pa.ArrowInvalid,
        pa.ArrowNotImplementedError,
        TypeError,
        ValueError,
        OverflowError,
    ) as e:
        raise InvalidArgument(
            f"filter value {value!r} does not fit column {column.name!r} ({column.type}): {e}"
        ) from None


# -- the predicate -----------------------------------------------------------------------------


def encode_predicate(expr: pc.Expression, schema: Schema) -> str | None:
    """``expr`` (over columns of ``schema``) as a ticket's ``predicate``, or None when it
    cannot travel (a function Substrait has no mapping for, or too long)."""
    names = referenced_columns(expr, schema)
    if not names:
        return None
    bound = pa.schema([schema.arrow().field(n) for n in names])
    try:
        raw = substrait.serialize_expressions([expr], [_PREDICATE], bound)
    except (pa.ArrowException, TypeError, ValueError):
        return None
    text = base64.b64encode(bytes(raw)).decode("ascii")
    return text if len(text) <= MAX_PREDICATE_CHARS else None


@dataclass(frozen=True)
class RowPredicate:
    """A decoded predicate: ``expression`` refers to the columns of ``schema`` by position."""

    expression: pc.Expression
    schema: pa.Schema

    def read_columns(self, wanted: Sequence[str]) -> list[str]:
        """The columns a scan reads to return ``wanted`` filtered: the predicate's first, in
        its order, so its positions hold."""
        return list(dict.fromkeys([*self.schema.names, *wanted]))

    def apply(self, batch: pa.RecordBatch, wanted: Sequence[str]) -> pa.RecordBatch:
        """The rows of ``batch`` (of :meth:`read_columns`) that match, as ``wanted``."""
        return batch.filter(self.expression).select(list(wanted))


def decode_predicate(text: str, table: str, schema: Schema) -> RowPredicate:
    """The predicate a ticket of ``table`` (of ``schema``) carries; InvalidArgument when it
    is no Substrait expression over columns the table has, of their types."""
    try:
        bound = substrait.deserialize_expressions(base64.b64decode(text, validate=True))
    except (ValueError, pa.ArrowException) as e:
        raise InvalidArgument(f"scan request: predicate is no Substrait expression: {e}") from None
    exprs = list(bound.expressions.values())
    if len(exprs) != 1:
        raise InvalidArgument(
            f"scan request: predicate holds {len(exprs)} expressions, expected one"
        )
    arrow = schema.arrow()
    for f in bound.schema:
        if f.name not in arrow.names or arrow.field(f.name).type != f.type:
            raise InvalidArgument(
                f"scan request: predicate column {f.name!r} ({f.type}) is not a column of "
                f"table {table!r} of that type"
            )
    expr = exprs[0]
    if any(int(i) >= len(bound.schema) for i in _FIELD_PATH.findall(str(expr))):
        raise InvalidArgument("scan request: predicate refers to a column it does not declare")
    try:
        pa.Table.from_batches([], bound.schema).filter(expr)
    except (pa.ArrowException, TypeError) as e:
        raise InvalidArgument(f"scan request: invalid predicate {expr}: {e}") from None
    return RowPredicate(expr, bound.schema)
