"""The tree of a SELECT statement, read once from its tokens, for the passes that answer or
prepare a query before DataFusion plans it: the prescan (:mod:`node.sql.prescan`, the scan's
columns and WHERE bounds), the fast paths (:mod:`node.sql.fastpath`), the split of a
partition table's query (:mod:`node.sql.pushdown`) and the names of unnamed items
(:func:`node.sql.rewrite.unnamed_items`). DataFusion still parses the statement's text
itself.

The tree models the top-level SELECT of the forms those passes take and holds everything
else as opaque or as a flag, so they decline what it does not model:

    SELECT [DISTINCT | ALL] <item>, ... [FROM <table> [[AS] <alias>], ...] [WHERE <terms>]
    [GROUP BY <key>, ...] [HAVING ...] [WINDOW ...] [QUALIFY ...] [ORDER BY <key>, ...]
    [LIMIT <n>] [OFFSET <n>]

An item is a column (``col``, ``q.col``), a call of a column or ``*`` (``max(v)``,
``count(*)``), a time bucket (``date_bin(INTERVAL '5 minutes', ts)``), each with an
optional ``AS <alias>``, or opaque; every item, GROUP BY key and ORDER BY key keeps where
its tokens are, for the passes that take an opaque expression's text. The items of the
outermost SELECT are read in any statement, nested or not. The WHERE clause is its
top-level AND terms (parentheses around terms opened), each a test of a column by literals
(``col <op> literal``, ``literal <op> col``, ``col IN (literal, ...)``, ``col BETWEEN
literal AND literal``) or opaque. A literal is a string, a number with an optional minus
sign, or ``to_timestamp_millis(<number>)``; the tree holds where its tokens are, so a query
of the same shape with other literals binds to it (their values are read by its users, by
the types of the columns they test). Names are the tokens' identifiers (unquoted ones
folded to lower case): in the analysis, a statement's tokens are those the catalog's
spellings have been applied to (:mod:`node.sql.analysis`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from node.sql.lexer import Kind, Token

#: [start, stop) indices among a statement's tokens.
Span = tuple[int, int]


@dataclass(frozen=True)
class Column:
    """``name``, or ``qualifier.name``."""

    name: str
    qualifier: str | None = None


@dataclass(frozen=True)
class Call:
    """``function(column)``, or ``function(*)`` (``column`` None)."""

    function: str
    column: Column | None


@dataclass(frozen=True)
class Bucket:
    """``date_bin(INTERVAL '<text>', column)``, the interval's string at token
    ``interval_at``."""

    interval_at: int
    column: Column


@dataclass(frozen=True)
class Item:
    """A SELECT item: its tokens, what it is (None: a form the tree does not model) and its
    ``AS`` alias."""

    span: Span
    expression: Column | Call | Bucket | None
    alias: str | None


@dataclass(frozen=True)
class Table:
    """A FROM item naming a table, ``name [[AS] alias]``, its name at token ``at``."""

    name: str
    alias: str | None
    at: int


@dataclass(frozen=True)
class ColumnTest:
    """A WHERE term testing ``column`` by literals: ``op`` is a comparison (=, <, <=, >, >=;
    mirrored when the literal came first), ``IN`` or ``BETWEEN``; ``literals`` are the
    literals' tokens, in order."""

    column: Column
    op: str
    literals: tuple[Span, ...]


@dataclass(frozen=True)
class Term:
    """A top-level AND term of the WHERE clause: a test, or None for any other."""

    span: Span
    test: ColumnTest | None


@dataclass(frozen=True)
class OrderKey:
    """An ORDER BY key: its expression's tokens (without ASC, DESC, NULLS ...) and what it
    is, a column or None for any other expression."""

    span: Span
    expression: Column | None
    descending: bool
    #: NULLS FIRST (True) or LAST (False); None when unstated.
    nulls_first: bool | None


@dataclass(frozen=True)
class Select:
    """A SELECT statement as far as the tree models it (see the module's docstring)."""

    #: The items of the outermost SELECT, read in every statement (one the tree holds
    #: nothing else of too): the list of ``WITH ... SELECT <items>`` or ``SELECT <items>
    #: UNION ...``; empty for ``SELECT DISTINCT ON (...)``.
    items: tuple[Item, ...]
    distinct: bool
    #: The FROM clause's tables (empty without one); None when it holds anything else: a
    #: join, a subquery, a function, a time-travel clause, a qualified name.
    tables: tuple[Table, ...] | None
    #: The WHERE clause's terms; empty without one.
    where: tuple[Term, ...]
    #: GROUP BY keys: columns, or None for any other expression; and their tokens.
    group_by: tuple[Column | None, ...]
    group_spans: tuple[Span, ...]
    order_by: tuple[OrderKey, ...]
    #: Whether a LIMIT clause is there, and where its number is (None when it is no whole
    #: number); where OFFSET's number is.
    limited: bool
    limit_at: int | None
    offset_at: int | None
    #: Another query in the statement: a subquery, WITH, a set operation (UNION, INTERSECT,
    #: EXCEPT), VALUES; or a statement that is no plain SELECT.
    nested: bool
    #: Anything else the tree holds nothing of: HAVING, WINDOW, QUALIFY, DISTINCT ON, a
    #: LIMIT or OFFSET of no number, clauses out of order, a second statement.
    other: bool
    #: Every identifier in the statement (subqueries too): what it may read of a table.
    names: frozenset[str | None]
    #: A ``*`` reading every column (not ``count(*)``) or a NATURAL JOIN, anywhere.
    star: bool

    def from_alone(self, table: str) -> Table | None:
        """The FROM item when the statement is this SELECT alone (nothing nested) and its
        FROM clause names ``table`` and nothing else."""
        if self.nested or self.tables is None or len(self.tables) != 1:
            return None
        found = self.tables[0]
        return found if found.name == table else None


#: Words starting a clause of a SELECT (at parenthesis depth 0), ranked in the order they
#: come; LIMIT and OFFSET come either way round.
_RANK = {
    "FROM": 1, "WHERE": 2, "GROUP": 3, "HAVING": 4, "WINDOW": 5, "QUALIFY": 6, "ORDER": 7,
    "LIMIT": 8, "OFFSET": 8,
}  # fmt: skip
#: Clauses the tree holds nothing of.
_UNMODELLED = frozenset(("HAVING", "WINDOW", "QUALIFY"))
#: Words that start or join another query (anywhere but at the start).
_NESTING = frozenset(("SELECT", "WITH", "VALUES", "UNION", "INTERSECT", "EXCEPT"))
_COMPARISONS = frozenset(("=", "<", "<=", ">", ">="))
#: Brackets: a comma or clause word between them is no SELECT's (calls, arrays, structs).
OPENING = frozenset("([{")
CLOSING = frozenset(")]}")
_MIRRORED = {"=": "=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


def read(tokens: Sequence[Token]) -> Select:
    """The tree of the statement of ``tokens`` (ending with the END token)."""
    end = len(tokens) - 1
    while end > 0 and tokens[end - 1].kind is Kind.SYMBOL and tokens[end - 1].text == ";":
        end -= 1  # trailing semicolons
    # One pass gathers what holds of the whole statement and where its top-level clauses
    # start.
    names: set[str | None] = set()
    star = nested = other = False
    clauses: list[tuple[str, int]] = []
    # The outermost SELECT, and what else ends its list: a set operation, another statement.
    select_at: int | None = None
    stops: list[int] = []
    depth = 0
    for i in range(end):
        t = tokens[i]
        kind = t.kind
        if kind is Kind.SYMBOL:
            text = t.text
            if text in OPENING:
                depth += 1
            elif text in CLOSING:
                depth -= 1
            elif text == "*":
                star = star or (i > 0 and tokens[i - 1].text != "(")
            elif text == ";":
                other = True
                stops.append(i)
            continue
        names.add(t.identifier)
        if kind is not Kind.WORD:
            continue
        upper = t.upper
        if upper in _NESTING:
            nested = nested or i > 0
            if depth == 0:
                if upper == "SELECT" and select_at is None:
                    select_at = i
                else:
                    stops.append(i)
        elif upper == "NATURAL":
            star = True
        elif depth == 0 and upper in _RANK:
            if upper == "FROM" and tokens[i - 1].is_word("DISTINCT"):
                continue  # IS [NOT] DISTINCT FROM
            if upper in ("GROUP", "ORDER") and not tokens[i + 1].is_word("BY"):
                continue  # WITHIN GROUP (...)
            clauses.append((upper, i))
    items: tuple[Item, ...] = ()
    distinct = False
    if select_at is not None:
        first = select_at + 1
        distinct = tokens[first].is_word("DISTINCT")
        if distinct or tokens[first].is_word("ALL"):
            first += 1
        if distinct and tokens[first].is_word("ON"):
            other = True
        else:
            stop = next((at for _, at in clauses if at > select_at), end)
            if stops:
                stop = min(stop, next((at for at in stops if at > select_at), end))
            items = tuple(_item(tokens, a, b) for a, b in _split(tokens, first, stop))
    if nested or select_at != 0:
        return _opaque(items, distinct, frozenset(names), star, nested=True, other=other)
    spans: dict[str, Span] = {}
    rank = 0
    for k, (word, at) in enumerate(clauses):
        stop = clauses[k + 1][1] if k + 1 < len(clauses) else end
        if word in spans or _RANK[word] < rank:
            other = True
            break
        rank = _RANK[word]
        spans[word] = (at + 2 if word in ("GROUP", "ORDER") else at + 1, stop)
    if other:
        return _opaque(items, distinct, frozenset(names), star, nested=False, other=True)
    tables: tuple[Table, ...] | None = ()
    if "FROM" in spans:
        found = [_table(tokens, a, b) for a, b in _split(tokens, *spans["FROM"])]
        tables = None if None in found else tuple(t for t in found if t is not None)
    where: tuple[Term, ...] = ()
    if "WHERE" in spans:
        where = tuple(Term(s, _test(tokens, *s)) for s in _conjuncts(tokens, *spans["WHERE"]))
    group_spans: tuple[Span, ...] = ()
    if "GROUP" in spans:
        group_spans = tuple(_split(tokens, *spans["GROUP"]))
    group_by = tuple(_column(tokens, a, b) for a, b in group_spans)
    order_by: tuple[OrderKey, ...] = ()
    if "ORDER" in spans:
        order_by = tuple(_order_key(tokens, a, b) for a, b in _split(tokens, *spans["ORDER"]))
    limit_at = _number(tokens, spans.get("LIMIT"))
    offset_at = _number(tokens, spans.get("OFFSET"))
    other = (
        not _UNMODELLED.isdisjoint(spans)
        or ("LIMIT" in spans and limit_at is None)
        or ("OFFSET" in spans and offset_at is None)
    )
    return Select(
        items,
        distinct,
        tables,
        where,
        group_by,
        group_spans,
        order_by,
        "LIMIT" in spans,
        limit_at,
        offset_at,
        nested,
        other,
        frozenset(names),
        star,
    )


def _opaque(
    items: tuple[Item, ...],
    distinct: bool,
    names: frozenset[str | None],
    star: bool,
    *,
    nested: bool,
    other: bool,
) -> Select:
    """A statement the tree holds nothing of but its outermost SELECT's items and what
    holds of the whole of it."""
    return Select(
        items, distinct, None, (), (), (), (), False, None, None, nested, other, names, star
    )


def _split(tokens: Sequence[Token], start: int, stop: int) -> list[Span]:
    """``tokens[start:stop]`` cut at its commas outside parentheses."""
    parts: list[Span] = []
    depth = 0
    first = start
    for i in range(start, stop):
        t = tokens[i]
        if t.kind is Kind.SYMBOL:
            text = t.text
            if text in OPENING:
                depth += 1
            elif text in CLOSING:
                depth -= 1
            elif text == "," and depth == 0:
                parts.append((first, i))
                first = i + 1
    parts.append((first, stop))
    return parts


def _symbol(t: Token, text: str) -> bool:
    return t.kind is Kind.SYMBOL and t.text == text


def _column(tokens: Sequence[Token], start: int, stop: int) -> Column | None:
    """The column ``tokens[start:stop]`` are, if they are one."""
    if stop - start == 1:
        name = tokens[start].identifier
        return None if name is None else Column(name)
    if stop - start == 3 and _symbol(tokens[start + 1], "."):
        qualifier, name = tokens[start].identifier, tokens[start + 2].identifier
        if qualifier is not None and name is not None:
            return Column(name, qualifier)
    return None


def _item(tokens: Sequence[Token], start: int, stop: int) -> Item:
    alias = None
    if stop - start >= 3 and tokens[stop - 2].is_word("AS"):
        alias = tokens[stop - 1].identifier
        if alias is not None:
            stop -= 2
    expression: Column | Call | Bucket | None = _column(tokens, start, stop)
    function = tokens[start].identifier
    if (
        expression is None
        and function is not None
        and stop - start >= 4
        and _symbol(tokens[start + 1], "(")
        and _symbol(tokens[stop - 1], ")")
    ):
        if stop - start == 4 and _symbol(tokens[start + 2], "*"):
            expression = Call(function, None)
        elif (column := _column(tokens, start + 2, stop - 1)) is not None:
            expression = Call(function, column)
        elif (
            function == "date_bin"
            and tokens[start + 2].is_word("INTERVAL")
            and tokens[start + 3].kind is Kind.STRING
            and _symbol(tokens[start + 4], ",")
            and (column := _column(tokens, start + 5, stop - 1)) is not None
        ):
            expression = Bucket(start + 3, column)
    return Item((start, stop), expression, alias)


def _table(tokens: Sequence[Token], start: int, stop: int) -> Table | None:
    name = tokens[start].identifier
    if name is None:
        return None
    if stop - start == 1:
        return Table(name, None, start)
    if stop - start == 3 and tokens[start + 1].is_word("AS"):
        alias = tokens[start + 2].identifier
    elif stop - start == 2:
        alias = tokens[start + 1].identifier
    else:
        return None
    return None if alias is None else Table(name, alias, start)


def _order_key(tokens: Sequence[Token], start: int, stop: int) -> OrderKey:
    """The key ``expression [ASC | DESC] [NULLS FIRST | NULLS LAST]``."""
    nulls_first = None
    if (
        stop - start >= 3
        and tokens[stop - 2].is_word("NULLS")
        and tokens[stop - 1].is_word("FIRST", "LAST")
    ):
        nulls_first = tokens[stop - 1].is_word("FIRST")
        stop -= 2
    descending = tokens[stop - 1].is_word("DESC")
    if descending or tokens[stop - 1].is_word("ASC"):
        stop -= 1
    return OrderKey((start, stop), _column(tokens, start, stop), descending, nulls_first)


def _number(tokens: Sequence[Token], span: Span | None) -> int | None:
    """Where the whole number ``span`` holds alone is (as LIMIT and OFFSET take it)."""
    if span is None or span[1] - span[0] != 1:
        return None
    t = tokens[span[0]]
    return span[0] if t.kind is Kind.NUMBER and t.text.isdigit() else None


def _conjuncts(tokens: Sequence[Token], start: int, stop: int) -> list[Span]:
    """The terms joined by AND outside parentheses in ``tokens[start:stop]`` (a term
    wrapped in parentheses is split again); the whole as one term when an OR joins any."""
    if wrapped(tokens, start, stop):
        return _conjuncts(tokens, start + 1, stop - 1)
    terms: list[Span] = []
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
                return [(start, stop)]
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
        for c in (_conjuncts(tokens, a, b) if wrapped(tokens, a, b) else [(a, b)])
    ]


def wrapped(tokens: Sequence[Token], start: int, stop: int) -> bool:
    """Whether one pair of parentheses encloses all of ``tokens[start:stop]``."""
    if stop - start < 2 or not _symbol(tokens[start], "(") or not _symbol(tokens[stop - 1], ")"):
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


def _test(tokens: Sequence[Token], start: int, stop: int) -> ColumnTest | None:
    """The test the term ``tokens[start:stop]`` is, if it is one."""
    depth = 0
    for k in range(start, stop):
        t = tokens[k]
        if t.kind is Kind.SYMBOL:
            if t.text == "(":
                depth += 1
            elif t.text == ")":
                depth -= 1
            elif depth == 0 and t.text in _COMPARISONS:
                return _comparison(tokens, start, k, stop)
        elif depth == 0 and t.kind is Kind.WORD and t.upper in ("IN", "BETWEEN"):
            column = _column(tokens, start, k)
            if column is None:
                return None
            if t.upper == "IN":
                items = _list(tokens, k + 1, stop)
                return None if items is None else ColumnTest(column, "IN", items)
            ands = [j for j in range(k + 1, stop) if tokens[j].is_word("AND")]
            if len(ands) != 1:
                return None
            low, high = (k + 1, ands[0]), (ands[0] + 1, stop)
            if not (_literal(tokens, *low) and _literal(tokens, *high)):
                return None
            return ColumnTest(column, "BETWEEN", (low, high))
    return None


def _comparison(tokens: Sequence[Token], start: int, at: int, stop: int) -> ColumnTest | None:
    """``column <op> literal`` or ``literal <op> column``, the operator at token ``at``."""
    op = tokens[at].text
    column = _column(tokens, start, at)
    if column is not None and _literal(tokens, at + 1, stop):
        return ColumnTest(column, op, ((at + 1, stop),))
    column = _column(tokens, at + 1, stop)
    if column is not None and _literal(tokens, start, at):
        return ColumnTest(column, _MIRRORED[op], ((start, at),))
    return None


def _list(tokens: Sequence[Token], start: int, stop: int) -> tuple[Span, ...] | None:
    """The literals of ``( literal, ... )`` in ``tokens[start:stop]``, if it is one."""
    if not wrapped(tokens, start, stop):
        return None
    items = _split(tokens, start + 1, stop - 1)
    return tuple(items) if all(_literal(tokens, a, b) for a, b in items) else None


def _literal(tokens: Sequence[Token], start: int, stop: int) -> bool:
    """Whether ``tokens[start:stop]`` are a literal: a string, a number with an optional
    minus sign, or ``to_timestamp_millis(<number>)``."""
    n = stop - start
    first = tokens[start] if n else None
    if n == 1 and first is not None:
        return first.kind is Kind.STRING or first.kind is Kind.NUMBER
    if n == 2 and first is not None:
        return _symbol(first, "-") and tokens[start + 1].kind is Kind.NUMBER
    return (
        n == 4
        and first is not None
        and first.is_word("TO_TIMESTAMP_MILLIS")
        and _symbol(tokens[start + 1], "(")
        and tokens[start + 2].kind is Kind.NUMBER
        and _symbol(tokens[start + 3], ")")
    )
