"""What a query over a single table tells the engine before DataFusion plans it: the columns
it may read and the bounds its WHERE clause puts on single columns.

Only the top-level AND terms of the WHERE clause that compare a column with a literal are
read (``col <op> literal``, ``literal <op> col``, ``col IN (...)``, ``col BETWEEN a AND b``);
every other term is left to DataFusion, which still evaluates the whole query. The bounds
are therefore a necessary condition of the WHERE clause: the engine may prune and pre-filter
by them without changing the answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from node.engine.bounds import FLOAT_TYPES, INTEGER_TYPES, Bounds, Range, intersect_all
from node.engine.scan import ScanRequest
from node.engine.schema import ColumnType, Schema
from node.sql.lexer import Kind, Token

#: Words ending a WHERE clause (at parenthesis depth 0).
_AFTER_WHERE = ("GROUP", "ORDER", "LIMIT", "HAVING", "WINDOW", "QUALIFY", "OFFSET")
#: Words that make a query read its table more than once, or another relation.
_NOT_SINGLE = ("JOIN", "UNION", "INTERSECT", "EXCEPT", "WITH", "VALUES", "LATERAL")
_COMPARISONS = frozenset(("=", "<", "<=", ">", ">="))
_MIRRORED = {"=": "=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


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

    def reading(self, columns: list[str]) -> Prescan:
        """This prescan reading only ``columns`` (those a fast path's answer needs)."""
        r = self.request
        request = ScanRequest(
            r.table, columns=columns, bounds=r.bounds, dictionary_tags=r.dictionary_tags
        )
        return Prescan(request, self.stops_early, self.exact)


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
        )
        return Prescan(request, self.stops_early, exact)


def analyse(tokens: Sequence[Token], table: str, schema: Schema, *, mentions: int) -> Prescan:
    """What the engine may know of a query (``tokens``) that reads no table but ``table``,
    named ``mentions`` times: the columns it may read, and, when it reads the table once
    in a single SELECT, the bounds of its WHERE clause."""
    return shape(tokens, table, schema, mentions=mentions).bind(tokens)


def shape(tokens: Sequence[Token], table: str, schema: Schema, *, mentions: int) -> Shape:
    """:func:`analyse`'s findings, before the literals' values are read."""
    # What the tests below ask of every token, gathered in one pass: the keywords present,
    # the names mentioned, where SELECTs are, and whether a ``*`` reads every column (except
    # as the argument of count(*)), as NATURAL JOIN does.
    words: set[str] = set()
    mentioned: set[str | None] = set()
    selects: list[int] = []
    star = False
    previous = ""
    for i, t in enumerate(tokens):
        if t.kind is Kind.WORD:
            words.add(t.upper)
            if t.upper == "SELECT":
                selects.append(i)
        elif t.kind is Kind.SYMBOL and t.text == "*" and i > 0 and previous != "(":
            star = True
        mentioned.add(t.identifier)
        previous = t.text
    star = star or "NATURAL" in words
    columns: list[str] | None = None
    if not star:
        # A query naming no column (count(*)) still reads the rows: their timestamps.
        columns = [n for n in schema.names if n in mentioned] or [schema.timestamp_key]
    single = (
        mentions == 1
        and selects == [0]
        and words.isdisjoint(_NOT_SINGLE)
        and _from_only(tokens, table)
    )
    where = _where(tokens) if single else None
    aliases = _table_names(tokens, table)
    names = set(schema.names)
    conjuncts = _conjuncts(tokens, *where) if where is not None else []
    bounds = tuple(
        bound
        for start, stop in conjuncts
        if (bound := _bound(tokens, start, stop, schema, names, aliases)) is not None
    )
    stops_early = "LIMIT" in words and words.isdisjoint(("ORDER", "GROUP", "DISTINCT"))
    return Shape(table, columns, bounds, len(conjuncts), single, stops_early)


def _table_names(tokens: Sequence[Token], table: str) -> set[str]:
    """Names that qualify the table's columns: its own, and an alias after it."""
    names = {table}
    for i, t in enumerate(tokens[:-1]):
        if t.identifier == table:
            nxt = tokens[i + 1]
            if nxt.is_word("AS") and i + 2 < len(tokens):
                nxt = tokens[i + 2]
            alias = nxt.identifier
            if alias is not None and not nxt.is_word("WHERE", *_AFTER_WHERE):
                names.add(alias)
    return names


def _from_only(tokens: Sequence[Token], table: str) -> bool:
    """Whether the FROM clause names ``table`` alone (with an optional alias)."""
    start = next((i for i, t in enumerate(tokens) if t.is_word("FROM")), None)
    if start is None:
        return False
    clause: list[Token] = []
    for t in tokens[start + 1 :]:
        if t.kind is Kind.END or t.is_word("WHERE", *_AFTER_WHERE) or t.text == ";":
            break
        clause.append(t)
    if not clause or clause[0].identifier != table:
        return False
    rest = clause[1:]
    if rest and rest[0].is_word("AS"):
        rest = rest[1:]
    return len(rest) == 0 or (len(rest) == 1 and rest[0].identifier is not None)


def _where(tokens: Sequence[Token]) -> tuple[int, int] | None:
    """Where the top-level WHERE clause's tokens are: [start, stop)."""
    depth = 0
    start: int | None = None
    for i, t in enumerate(tokens):
        kind = t.kind
        if kind is Kind.SYMBOL:
            if t.text == "(":
                depth += 1
            elif t.text == ")":
                depth -= 1
        elif depth:
            continue
        elif kind is Kind.WORD and t.upper == "WHERE":
            start = i + 1
        elif start is not None and (
            kind is Kind.END or (kind is Kind.WORD and t.upper in _AFTER_WHERE)
        ):
            return start, i
    return None


def _conjuncts(tokens: Sequence[Token], start: int, stop: int) -> list[tuple[int, int]]:
    """Where the terms joined by AND at depth 0 are among ``tokens[start:stop]`` (a term
    wrapped in parentheses is split again)."""
    if _wrapped(tokens, start, stop):
        return _conjuncts(tokens, start + 1, stop - 1)
    terms: list[tuple[int, int]] = []
    depth = 0
    first = start
    between = False
    for i in range(start, stop):
        t = tokens[i]
        if t.kind is Kind.SYMBOL:
            if t.text == "(":
                depth += 1
            elif t.text == ")":
                depth -= 1
        elif depth == 0 and t.kind is Kind.WORD:
            if t.upper == "OR":
                return [(start, stop)]  # a disjunction bounds nothing here
            if t.upper == "BETWEEN":
                between = True
            elif t.upper == "AND":
                if between:
                    between = False
                else:
                    terms.append((first, i))
                    first = i + 1
    terms.append((first, stop))
    return [
        c
        for a, b in terms
        for c in (_conjuncts(tokens, a, b) if _wrapped(tokens, a, b) else [(a, b)])
    ]


def _wrapped(tokens: Sequence[Token], start: int, stop: int) -> bool:
    """Whether one pair of parentheses encloses all of ``tokens[start:stop]``."""
    if stop - start < 2 or tokens[start].text != "(" or tokens[stop - 1].text != ")":
        return False
    depth = 0
    for i in range(start, stop):
        t = tokens[i]
        if t.kind is Kind.SYMBOL and t.text == "(":
            depth += 1
        elif t.kind is Kind.SYMBOL and t.text == ")":
            depth -= 1
            if depth == 0 and i < stop - 1:
                return False
    return True


def _bound(
    tokens: Sequence[Token],
    start: int,
    stop: int,
    schema: Schema,
    names: set[str],
    tables: set[str],
) -> Bound | None:
    column, after = _column(tokens, start, stop, names, tables)
    if column is not None:
        return _bound_on(column, tokens, after, stop, schema)
    # literal <op> column
    for k in range(start, stop):
        t = tokens[k]
        if t.kind is Kind.SYMBOL and t.text in _COMPARISONS:
            column, after = _column(tokens, k + 1, stop, names, tables)
            if column is None or after != stop:
                return None
            return _bound_by(column, _MIRRORED[t.text], ((start, k),), schema)
    return None


def _column(
    tokens: Sequence[Token], start: int, stop: int, names: set[str], tables: set[str]
) -> tuple[str | None, int]:
    """The column ``tokens[start:stop]`` starts with (``col`` or ``table.col``) and where
    the tokens after it start."""
    if (
        stop - start >= 3
        and tokens[start + 1].kind is Kind.SYMBOL
        and tokens[start + 1].text == "."
    ):
        if tokens[start].identifier not in tables:
            return None, start
        name, after = tokens[start + 2].identifier, start + 3
    elif stop > start:
        name, after = tokens[start].identifier, start + 1
    else:
        return None, start
    if name is None or name not in names or tokens[start].is_word("NOT"):
        return None, start
    return name, after


def _bound_on(
    column: str, tokens: Sequence[Token], start: int, stop: int, schema: Schema
) -> Bound | None:
    """The bound of ``column`` followed by ``tokens[start:stop]``."""
    if start == stop:
        return None
    first = tokens[start]
    if first.kind is Kind.SYMBOL and first.text in _COMPARISONS:
        return _bound_by(column, first.text, ((start + 1, stop),), schema)
    if first.is_word("IN"):
        items = _list_items(tokens, start + 1, stop)
        return None if items is None else _bound_by(column, "IN", items, schema)
    if first.is_word("BETWEEN"):
        ands = [k for k in range(start + 1, stop) if tokens[k].is_word("AND")]
        if len(ands) != 1:
            return None
        literals = ((start + 1, ands[0]), (ands[0] + 1, stop))
        return _bound_by(column, "BETWEEN", literals, schema)
    return None


def _bound_by(column: str, op: str, literals: tuple[tuple[int, int], ...], schema: Schema) -> Bound:
    return Bound(column, op, literals, schema.column(column).type)


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


def _list_items(
    tokens: Sequence[Token], start: int, stop: int
) -> tuple[tuple[int, int], ...] | None:
    """Where the items of ``( item, ... )`` in ``tokens[start:stop]`` are."""
    if not _wrapped(tokens, start, stop):
        return None
    items: list[tuple[int, int]] = []
    first = start + 1
    for i in range(start + 1, stop - 1):
        t = tokens[i]
        if t.kind is Kind.SYMBOL and t.text == ",":
            items.append((first, i))
            first = i + 1
    items.append((first, stop - 1))
    return tuple(items)
