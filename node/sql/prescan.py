"""What a query over a single table tells the engine before DataFusion plans it: the columns
it may read and the bounds its WHERE clause puts on single columns.

Both are read from the query's tree (:mod:`node.sql.select`). Only the top-level AND terms
of the WHERE clause that compare a column with a literal are read (``col <op> literal``,
``literal <op> col``, ``col IN (...)``, ``col BETWEEN a AND b``); every other term is left
to DataFusion, which still evaluates the whole query. The bounds are therefore a necessary
condition of the WHERE clause: the engine may prune and pre-filter by them without changing
the answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa

from node.engine.bounds import FLOAT_TYPES, INTEGER_TYPES, Bounds, Range, intersect_all
from node.engine.scan import ScanRequest
from node.engine.schema import ColumnType, Schema
from node.sql import select
from node.sql.lexer import Kind, Token
from node.sql.select import Select


@dataclass(frozen=True)
class Prescan:
    """What a query tells the engine of its scan of its one table (``request``: the columns
    it may read, None for all, e.g. for ``*``; the bounds of its WHERE clause), and how it
    uses the rows."""

    request: ScanRequest
    #: A LIMIT without ORDER BY or GROUP BY: streamed, the scan stops after the first rows.
    stops_early: bool = False
    #: The bounds are the whole WHERE clause (every term became one, or there is none): the
    #: rows the scan returns are exactly those the clause keeps.
    exact: bool = False

    @property
    def bounds(self) -> Bounds:
        return self.request.bounds or {}

    def within(self, bounds: Bounds) -> Prescan:
        """This prescan with ``bounds`` instead of its own (narrower: see
        :meth:`node.sql.fastpath.FastPath.window`)."""
        return Prescan(replace(self.request, bounds=bounds), self.stops_early, self.exact)

    def reading(self, columns: list[str]) -> Prescan:
        """This prescan reading only ``columns`` (those a fast path's answer needs)."""
        return Prescan(replace(self.request, columns=columns), self.stops_early, self.exact)


@dataclass(frozen=True)
class Bound:
    """A WHERE term that bounds ``column`` by literals: ``column <op> literal`` (op one of
    the comparisons), ``column IN (literal, ...)`` or ``column BETWEEN literal AND literal``
    (op ``IN``, ``BETWEEN``), the literals being the tokens in the index ranges of
    ``literals``. Any query of the same shape (its tokens apart from the literals) has the
    same terms; only their values differ."""

    column: str
    op: str
    literals: tuple[tuple[int, int], ...]
    type: ColumnType

    def range(self, tokens: Sequence[Token]) -> Range | None:
        """The bound with the literals of ``tokens``, or None if one is no value of the
        column's type (an integer out of its range, say), which bounds nothing."""
        values = []
        for start, stop in self.literals:
            value = _literal(tokens[start:stop], self.type)
            if value is _NONE:
                return None
            values.append(value)
        if self.op == "IN":
            return Range(values=frozenset(values))
        if self.op == "BETWEEN":
            return Range(lo=values[0], hi=values[1])
        return Range.of(self.op, values[0])


@dataclass(frozen=True)
class Shape:
    """What :func:`analyse` finds in a query apart from its literals' values: the same for
    every query of the same shape, bound to one query's literals by :meth:`bind`."""

    table: str
    columns: list[str] | None
    bounds: tuple[Bound, ...]
    #: The WHERE clause's terms (0 without one): the bounds are exact when they are as many.
    terms: int
    #: Whether the query reads the table once in a single SELECT.
    single: bool
    stops_early: bool
    #: Whether the query needs only each series' newest row (:mod:`node.sql.latest_rows`):
    #: the scan asks for that alone.
    latest: bool = False

    def bind(self, tokens: Sequence[Token], *, dictionary_tags: bool = False) -> Prescan:
        """The analysis of ``tokens``, a query of this shape, its scan asking for string tags
        dictionary encoded with ``dictionary_tags``."""
        ranges = [(b.column, r) for b in self.bounds if (r := b.range(tokens)) is not None]
        exact = self.single and len(ranges) == self.terms
        request = ScanRequest(
            self.table,
            columns=self.columns,
            bounds=intersect_all(ranges),
            dictionary_tags=dictionary_tags,
            limit_per_series=1 if self.latest else None,
        )
        return Prescan(request, self.stops_early, exact)


def analyse(tokens: Sequence[Token], table: str, schema: Schema, *, mentions: int) -> Prescan:
    """What the engine may know of a query (``tokens``) that reads no table but ``table``,
    named ``mentions`` times: the columns it may read, and, when it reads the table once
    in a single SELECT, the bounds of its WHERE clause."""
    return shape(select.read(tokens), table, schema, mentions=mentions).bind(tokens)


def shape(query: Select, table: str, schema: Schema, *, mentions: int) -> Shape:
    """:func:`analyse`'s findings in a query's tree, before the literals' values are read."""
    columns: list[str] | None = None
    if not query.star:
        # A query naming no column (count(*)) still reads the rows: their timestamps.
        columns = [n for n in schema.names if n in query.names] or [schema.timestamp_key]
    read = query.from_alone(table) if mentions == 1 else None
    terms = query.where if read is not None else ()
    # Names that qualify the table's columns: its own, and its alias.
    qualifiers = {table} if read is None or read.alias is None else {table, read.alias}
    bounds = tuple(
        Bound(t.column.name, t.op, t.literals, schema.column(t.column.name).type)
        for term in terms
        if (t := term.test) is not None
        and schema.has_column(t.column.name)
        and (t.column.qualifier is None or t.column.qualifier in qualifiers)
    )
    stops_early = query.limited and not (
        query.nested or query.order_by or query.group_by or query.distinct
    )
    return Shape(table, columns, bounds, len(terms), read is not None, stops_early)


_NONE: Any = object()


def _literal(tokens: Sequence[Token], typ: ColumnType) -> Any:
    """The value of a literal of the column's kind, or _NONE: strings for string columns,
    numbers for numeric ones, integer milliseconds (bare, as gnomon's dialect allows, or in
    ``to_timestamp_millis(n)``) for timestamps."""
    if (
        typ is ColumnType.TIMESTAMP
        and len(tokens) == 4
        and tokens[0].is_word("TO_TIMESTAMP_MILLIS")
        and tokens[1].text == "("
        and tokens[3].text == ")"
    ):
        tokens = tokens[2:3]
    if typ is ColumnType.STRING:
        return tokens[0].text if len(tokens) == 1 and tokens[0].kind is Kind.STRING else _NONE
    sign = 1
    if len(tokens) == 2 and tokens[0].kind is Kind.SYMBOL and tokens[0].text == "-":
        sign, tokens = -1, tokens[1:]
    if len(tokens) != 1 or tokens[0].kind is not Kind.NUMBER:
        return _NONE
    text = tokens[0].text
    if text.isdigit():
        whole = sign * int(text)
        if typ in FLOAT_TYPES:
            return float(whole)
        if typ is ColumnType.TIMESTAMP or (typ in INTEGER_TYPES and _fits(whole, typ)):
            return whole
        return _NONE
    if typ in FLOAT_TYPES:
        try:
            return sign * float(text)
        except ValueError:
            return _NONE
    return _NONE


def _fits(value: int, typ: ColumnType) -> bool:
    arrow = typ.arrow()
    bits = int(arrow.bit_width)
    lo, hi = (
        (0, 2**bits)
        if pa.types.is_unsigned_integer(arrow)
        else (-(2 ** (bits - 1)), 2 ** (bits - 1))
    )
    return bool(lo <= value < hi)
