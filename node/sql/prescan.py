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

from node.engine.bounds import Range, intersect_all
from node.engine.schema import ColumnType, Schema
from node.sql.lexer import Kind, Token

#: Words ending a WHERE clause (at parenthesis depth 0).
_AFTER_WHERE = ("GROUP", "ORDER", "LIMIT", "HAVING", "WINDOW", "QUALIFY", "OFFSET")
#: Words that make a query read its table more than once, or another relation.
_NOT_SINGLE = ("JOIN", "UNION", "INTERSECT", "EXCEPT", "WITH", "VALUES", "LATERAL")
_COMPARISONS = frozenset(("=", "<", "<=", ">", ">="))
_MIRRORED = {"=": "=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
_INTEGERS = {
    ColumnType.INT8, ColumnType.INT16, ColumnType.INT32, ColumnType.INT64,
    ColumnType.UINT8, ColumnType.UINT16, ColumnType.UINT32, ColumnType.UINT64,
}  # fmt: skip
_FLOATS = {ColumnType.DOUBLE, ColumnType.FLOAT}


@dataclass(frozen=True)
class Prescan:
    table: str
    #: Columns of the table the query may read (None: all of them, e.g. for ``*``).
    columns: list[str] | None
    bounds: dict[str, Range]
    #: A LIMIT without ORDER BY or GROUP BY: streamed, the scan stops after the first rows.
    stops_early: bool = False
    #: The bounds are the whole WHERE clause (every term became one, or there is none): the
    #: rows the scan returns are exactly those the clause keeps.
    exact: bool = False


def analyse(tokens: Sequence[Token], table: str, schema: Schema, *, mentions: int) -> Prescan:
    """What the engine may know of a query (``tokens``) that reads no table but ``table``,
    named ``mentions`` times: the columns it may read, and, when it reads the table once
    in a single SELECT, the bounds of its WHERE clause."""
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
    terms: list[tuple[str, Range]] = []
    conjuncts = _conjuncts(where) if where is not None else []
    for term in conjuncts:
        bound = _bound(term, schema, names, aliases)
        if bound is not None:
            terms.append(bound)
    exact = single and len(terms) == len(conjuncts)
    stops_early = "LIMIT" in words and words.isdisjoint(("ORDER", "GROUP", "DISTINCT"))
    return Prescan(table, columns, intersect_all(terms), stops_early, exact)


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


def _where(tokens: Sequence[Token]) -> list[Token] | None:
    """The tokens of the top-level WHERE clause."""
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
            return list(tokens[start:i])
    return None


def _conjuncts(tokens: list[Token]) -> list[list[Token]]:
    """The terms joined by AND at depth 0 (a term wrapped in parentheses is split again)."""
    if _wrapped(tokens):
        return _conjuncts(tokens[1:-1])
    terms: list[list[Token]] = []
    depth = 0
    current: list[Token] = []
    between = False
    for t in tokens:
        if t.kind is Kind.SYMBOL:
            if t.text == "(":
                depth += 1
            elif t.text == ")":
                depth -= 1
        elif depth == 0 and t.kind is Kind.WORD:
            if t.upper == "OR":
                return [tokens]  # a disjunction bounds nothing here
            if t.upper == "BETWEEN":
                between = True
            elif t.upper == "AND":
                if between:
                    between = False
                else:
                    terms.append(current)
                    current = []
                    continue
        current.append(t)
    terms.append(current)
    return [c for term in terms for c in (_conjuncts(term) if _wrapped(term) else [term])]


def _wrapped(tokens: list[Token]) -> bool:
    """Whether one pair of parentheses encloses all of ``tokens``."""
    if len(tokens) < 2 or tokens[0].text != "(" or tokens[-1].text != ")":
        return False
    depth = 0
    for i, t in enumerate(tokens):
        if t.kind is Kind.SYMBOL and t.text == "(":
            depth += 1
        elif t.kind is Kind.SYMBOL and t.text == ")":
            depth -= 1
            if depth == 0 and i < len(tokens) - 1:
                return False
    return True


def _bound(
    term: list[Token], schema: Schema, names: set[str], tables: set[str]
) -> tuple[str, Range] | None:
    column, rest = _column(term, names, tables)
    if column is not None:
        return _bound_on(column, rest, schema)
    # literal <op> column
    for k, t in enumerate(term):
        if t.kind is Kind.SYMBOL and t.text in _COMPARISONS:
            column, after = _column(term[k + 1 :], names, tables)
            if column is None or after:
                return None
            value = _literal(term[:k], schema.column(column).type)
            if value is _NONE:
                return None
            return column, Range.of(_MIRRORED[t.text], value)
    return None


def _column(term: list[Token], names: set[str], tables: set[str]) -> tuple[str | None, list[Token]]:
    """The column a term starts with (``col`` or ``table.col``) and the tokens after it."""
    if len(term) >= 3 and term[1].kind is Kind.SYMBOL and term[1].text == ".":
        if term[0].identifier not in tables:
            return None, term
        name, rest = term[2].identifier, term[3:]
    elif term:
        name, rest = term[0].identifier, term[1:]
    else:
        return None, term
    if name is None or name not in names or term[0].is_word("NOT"):
        return None, term
    return name, rest


def _bound_on(column: str, rest: list[Token], schema: Schema) -> tuple[str, Range] | None:
    typ = schema.column(column).type
    if rest and rest[0].kind is Kind.SYMBOL and rest[0].text in _COMPARISONS:
        value = _literal(rest[1:], typ)
        return None if value is _NONE else (column, Range.of(rest[0].text, value))
    if rest and rest[0].is_word("IN"):
        values = _literal_list(rest[1:], typ)
        return None if values is None else (column, Range(values=frozenset(values)))
    if rest and rest[0].is_word("BETWEEN"):
        ands = [k for k, t in enumerate(rest) if t.is_word("AND")]
        if len(ands) != 1:
            return None
        lo, hi = _literal(rest[1 : ands[0]], typ), _literal(rest[ands[0] + 1 :], typ)
        if lo is _NONE or hi is _NONE:
            return None
        return column, Range(lo=lo, hi=hi)
    return None


_NONE: Any = object()


def _literal(tokens: list[Token], typ: ColumnType) -> Any:
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
        if typ in _FLOATS:
            return float(whole)
        if typ is ColumnType.TIMESTAMP or (typ in _INTEGERS and _fits(whole, typ)):
            return whole
        return _NONE
    if typ in _FLOATS:
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


def _literal_list(tokens: list[Token], typ: ColumnType) -> list[Any] | None:
    """The values of ``( literal, ... )``."""
    if not _wrapped(tokens):
        return None
    values: list[Any] = []
    item: list[Token] = []
    for t in [*tokens[1:-1], Token(Kind.SYMBOL, ",", -1)]:
        if t.kind is Kind.SYMBOL and t.text == ",":
            value = _literal(item, typ)
            if value is _NONE:
                return None
            values.append(value)
            item = []
        else:
            item.append(t)
    return values
