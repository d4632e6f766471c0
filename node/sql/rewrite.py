"""What gnomon changes in a query's text before DataFusion sees it, found from its tokens
without parsing it: long ORs of one column's values become IN lists (:func:`in_lists`),
unnamed SELECT items holding literals get their own text as a name (:func:`unnamed_items`,
from the items of the statement's tree, :mod:`node.sql.select`), and integer arithmetic on
literals alone is checked for overflow (:func:`constant_spans`, :func:`check_constants`),
which DataFusion wraps silently.

Every rewrite is judged on tokens alone, so each takes only what it can tell for sure and
leaves anything else as written.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator, Sequence

from gnomon.errors import InvalidArgument
from node.sql.lexer import Kind, Token
from node.sql.select import CLOSING, OPENING, Select

#: Tokens that end an expression's operand list at their parenthesis level: an OR chain,
#: an AND chain or an arithmetic expression between two of them is a whole subtree.
_CLAUSES = frozenset((
    "SELECT", "FROM", "WHERE", "GROUP", "HAVING", "ORDER", "LIMIT", "OFFSET", "ON", "USING",
    "JOIN", "UNION", "INTERSECT", "EXCEPT", "WHEN", "THEN", "ELSE", "END", "WINDOW",
    "QUALIFY", "BY", "AS", "ASC", "DESC",
))  # fmt: skip
_LIST_SYMBOLS = frozenset(("(", ")", ",", ";"))
_COMPARISONS = frozenset(("=", "<>", "!=", "<", ">", "<=", ">="))
_NOT_EQUAL = frozenset(("<>", "!="))
_HAS_JOINER = re.compile(r"\b(?:OR|AND)\b", re.IGNORECASE)


def raw(t: Token, sql: str) -> str:
    """The text of ``t`` as written in ``sql`` (quotes and their doubling included)."""
    if t.kind is Kind.STRING:
        return "'" + t.text.replace("'", "''") + "'"
    if t.kind is Kind.QUOTED:
        quote = sql[t.pos]
        return quote + t.text.replace(quote, quote * 2) + quote
    return t.text


def _ends_list(t: Token) -> bool:
    kind = t.kind
    if kind is Kind.SYMBOL:
        return t.text in _LIST_SYMBOLS
    return kind is Kind.END or (kind is Kind.WORD and t.upper in _CLAUSES)


# -- OR chains as IN lists ----------------------------------------------------------------------


def in_lists(sql: str, tokens: Sequence[Token]) -> str | None:
    """``sql`` with each run of two or more ``col = literal`` joined by OR written as
    ``col IN (literal, ...)``, and each run of ``col <> literal`` joined by AND as
    ``col NOT IN (...)`` (equivalent in SQL's three-valued logic, by definition of IN);
    None when there is no such run. DataFusion plans an IN list flat, where an OR chain is
    a tree as deep as it is long, and the prescan takes an IN list as the column's bound."""
    if not _HAS_JOINER.search(sql):
        return None
    runs = [*_runs(tokens, "OR"), *_runs(tokens, "AND")]
    if not runs:
        return None
    out: list[str] = []
    done = 0
    for terms, negated in sorted(runs, key=lambda r: r[0][0][0]):
        (start, op_at, _), (_, _, stop) = terms[0], terms[-1]
        column = " ".join(raw(t, sql) for t in tokens[start:op_at])
        values = ", ".join(
            "".join(raw(t, sql) for t in tokens[at + 1 : end]) for _, at, end in terms
        )
        out.append(sql[done : tokens[start].pos])
        out.append(f"{column} {'NOT IN' if negated else 'IN'} ({values})")
        done = tokens[stop - 1].pos + len(raw(tokens[stop - 1], sql))
    out.append(sql[done:])
    return "".join(out)


def _runs(
    tokens: Sequence[Token], joiner: str
) -> Iterator[tuple[list[tuple[int, int, int]], bool]]:
    """The runs of two or more simple terms (:func:`_term`) of one column and one literal
    kind, joined by ``joiner``: each term as (start, comparison, stop) token indices."""
    negated = joiner == "AND"
    run: list[tuple[int, int, int]] = []
    key: tuple[object, ...] | None = None
    for start, stop, joined in _segments(tokens, joiner):
        term = _term(tokens, start, stop, _NOT_EQUAL if negated else frozenset("="))
        term_key = None if term is None else (*term[1], tokens[stop - 1].kind)
        if term is not None and run and term_key == key:
            run.append((start, term[0], stop))
        else:
            if len(run) > 1:
                yield run, negated
            run = [] if term is None else [(start, term[0], stop)]
            key = term_key
        if not joined:
            if len(run) > 1:
                yield run, negated
            run, key = [], None
    if len(run) > 1:
        yield run, negated


def _segments(tokens: Sequence[Token], joiner: str) -> Iterator[tuple[int, int, bool]]:
    """The token runs between ``joiner`` words and list ends, each with whether ``joiner``
    follows it. Joined by AND, OR also ends a run (AND binds tighter) and BETWEEN's AND
    does not; joined by OR, AND is part of a term (so a term next to AND is no simple one)."""
    start = 0
    between = False
    for i, t in enumerate(tokens):
        word = t.upper if t.kind is Kind.WORD else ""
        if word == "BETWEEN":
            between = True
        if word == joiner and not (between and joiner == "AND"):
            yield start, i, True
            start = i + 1
        elif word == joiner:
            between = False
        elif _ends_list(t) or (joiner == "AND" and word == "OR"):
            yield start, i, False
            start = i + 1
            between = False


def _term(
    tokens: Sequence[Token], start: int, stop: int, ops: frozenset[str]
) -> tuple[int, tuple[str | None, ...]] | None:
    """For ``name[.name...] <op> [-]literal`` (op one of ``ops``) in ``tokens[start:stop]``:
    where the comparison is and the name's identifiers."""
    at = start
    names: list[str | None] = []
    while at < stop and tokens[at].identifier is not None:
        names.append(tokens[at].identifier)
        at += 1
        if at < stop and tokens[at].kind is Kind.SYMBOL and tokens[at].text == ".":
            at += 1
        else:
            break
    if not names or at >= stop or tokens[at].kind is not Kind.SYMBOL:
        return None
    if tokens[at].text not in ops:
        return None
    literal = tokens[at + 1 : stop]
    if len(literal) == 2 and literal[0].text == "-" and literal[1].kind is Kind.NUMBER:
        return at, tuple(names)
    if len(literal) == 1 and literal[0].kind in (Kind.NUMBER, Kind.STRING):
        return at, tuple(names)
    return None


# -- names of SELECT items ----------------------------------------------------------------------

#: Words that are operators inside an expression (never an operand or an alias).
_OPERATOR_WORDS = frozenset(("AND", "OR", "NOT", "IS", "IN", "LIKE", "ILIKE", "BETWEEN"))
_LITERAL_WORDS = frozenset(("TRUE", "FALSE", "NULL"))


def unnamed_items(tokens: Sequence[Token], query: Select) -> tuple[tuple[int, int], ...]:
    """The items of the outermost SELECT list (of ``query``, the tree of ``tokens``) that
    hold a literal and have no alias, as [first, last] token indices. DataFusion names such
    an item after its expression with each literal's type spelled out (``Int64(1)`` for
    ``SELECT 1``, ``Utf8("a")``), which is its internal notation; gnomon names it by its
    text as written, as MySQL does (PostgreSQL says ``?column?``). An item whose tokens
    could hold an alias without AS (two operands in a row: ``1 x``, ``INTERVAL '1' DAY``,
    ``CASE ... END``) keeps DataFusion's name."""
    return tuple(
        (item.span[0], item.span[1] - 1)
        for item in query.items
        if item.alias is None and _unnamed(tokens, *item.span)
    )


def _unnamed(tokens: Sequence[Token], first: int, stop: int) -> bool:
    """Whether the item ``tokens[first:stop]`` holds a literal and surely has no alias."""
    literal = False
    depth = 0
    operand = False  # whether the previous depth-0 token ends an operand
    for t in tokens[first:stop]:
        kind = t.kind
        if kind is Kind.STRING or kind is Kind.NUMBER or t.is_word(*_LITERAL_WORDS):
            literal = True
        if kind is Kind.SYMBOL:
            if t.text in OPENING:
                depth += 1
            elif t.text in CLOSING:
                depth -= 1
            operand = depth == 0 and t.text in CLOSING
            continue
        if depth:
            continue
        if kind is Kind.WORD and t.upper in _OPERATOR_WORDS:
            operand = False
            continue
        if operand or t.is_word("AS"):
            return False  # two operands in a row: the second may be an alias
        operand = True
    return literal


# -- integer overflow in constant arithmetic ----------------------------------------------------

_ARITHMETIC = frozenset(("+", "-", "*"))
_INT64 = (-(2**63), 2**63 - 1)


def constant_spans(tokens: Sequence[Token]) -> tuple[tuple[int, int], ...]:
    """Where integer arithmetic on literals alone is, as [start, stop) token indices: a run
    of whole numbers, ``+ - *`` and parentheses between tokens that bind more loosely
    (comparisons, AND, clause words, list ends), or the inside of parentheses holding only
    such tokens. DataFusion folds these with wrapping 64-bit arithmetic."""
    spans: list[tuple[int, int]] = []
    i = 0
    n = len(tokens)
    while i < n:
        if not _arithmetic_token(tokens[i]):
            i += 1
            continue
        start = i
        while i < n and _arithmetic_token(tokens[i]):
            i += 1
        spans.extend(_spans_in(tokens, start, i))
    return tuple(spans)


def _arithmetic_token(t: Token) -> bool:
    if t.kind is Kind.NUMBER:
        return t.text.isdigit()
    return t.kind is Kind.SYMBOL and (t.text in _ARITHMETIC or t.text in "()")


def _bounds_expression(t: Token) -> bool:
    if t.kind is Kind.SYMBOL:
        return t.text in _LIST_SYMBOLS or t.text in _COMPARISONS
    return _ends_list(t) or t.is_word("AND", "OR", "NOT", "IN", "BETWEEN", "IS")


def _spans_in(tokens: Sequence[Token], start: int, stop: int) -> list[tuple[int, int]]:
    """The spans of the run ``tokens[start:stop]``: all of it if it is a whole expression
    holding an operator, else the insides of its parenthesized groups."""
    # Parentheses at the run's ends belong to what encloses it unless they pair up in it.
    while start < stop and tokens[start].text == ")":
        start += 1
    while stop > start and tokens[stop - 1].text == "(":
        stop -= 1
    pairs = _pairs(tokens, start, stop)
    whole = (
        pairs is not None
        and (start == 0 or _bounds_expression(tokens[start - 1]))
        and _bounds_expression(tokens[stop])
        and any(tokens[k].text in _ARITHMETIC for k in range(start + 1, stop))
    )
    if whole:
        return [(start, stop)]
    return [
        (a + 1, b)
        for a, b in (pairs or _inner_pairs(tokens, start, stop))
        if any(tokens[k].text in _ARITHMETIC for k in range(a + 2, b))
    ]


def _pairs(tokens: Sequence[Token], start: int, stop: int) -> list[tuple[int, int]] | None:
    """The matching parentheses of ``tokens[start:stop]`` (as index pairs), or None if
    they do not pair up."""
    pairs: list[tuple[int, int]] = []
    open_: list[int] = []
    for k in range(start, stop):
        if tokens[k].text == "(":
            open_.append(k)
        elif tokens[k].text == ")":
            if not open_:
                return None
            pairs.append((open_.pop(), k))
    return None if open_ else pairs


def _inner_pairs(tokens: Sequence[Token], start: int, stop: int) -> list[tuple[int, int]]:
    """The parentheses that pair up within ``tokens[start:stop]``, unpaired ones aside."""
    pairs: list[tuple[int, int]] = []
    open_: list[int] = []
    for k in range(start, stop):
        if tokens[k].text == "(":
            open_.append(k)
        elif tokens[k].text == ")" and open_:
            pairs.append((open_.pop(), k))
    return pairs


def check_constants(tokens: Sequence[Token], spans: Sequence[tuple[int, int]]) -> None:
    """Raise InvalidArgument if the arithmetic of a span leaves 64-bit integers (as
    PostgreSQL's "bigint out of range"): DataFusion would wrap it around silently."""
    for start, stop in spans:
        # A span that is no well-formed expression is left to DataFusion to report.
        with contextlib.suppress(_NotArithmetic):
            _Evaluator(tokens, start, stop).check()


class _NotArithmetic(Exception):
    pass


class _Evaluator:
    """Integer arithmetic on a span's tokens with SQL's precedence, in Python's unbounded
    integers, every intermediate result checked against 64 bits."""

    def __init__(self, tokens: Sequence[Token], start: int, stop: int) -> None:
        self.tokens = tokens
        self.start = start
        self.i = start
        self.stop = stop

    def check(self) -> None:
        if any(int(t.text) > _INT64[1] for t in self._numbers()):
            return  # DataFusion types such a literal otherwise (unsigned, decimal)
        self.sum()
        if self.i != self.stop:
            raise _NotArithmetic

    def _numbers(self) -> Iterator[Token]:
        return (t for t in self.tokens[self.start : self.stop] if t.kind is Kind.NUMBER)

    def _at(self, *symbols: str) -> str | None:
        if self.i < self.stop and self.tokens[self.i].text in symbols:
            self.i += 1
            return self.tokens[self.i - 1].text
        return None

    def _checked(self, value: int) -> int:
        if not _INT64[0] <= value <= _INT64[1]:
            t = self.tokens
            text = " ".join(x.text for x in t[self.start : self.stop])
            raise InvalidArgument(
                f"bigint out of range: {text} overflows 64-bit integer arithmetic "
                f"(at position {t[self.start].pos}); cast an operand to double for a "
                f"wider range"
            )
        return value

    def sum(self) -> int:
        value = self.product()
        while (op := self._at("+", "-")) is not None:
            right = self.product()
            value = self._checked(value + right if op == "+" else value - right)
        return value

    def product(self) -> int:
        value = self.unary()
        while self._at("*") is not None:
            value = self._checked(value * self.unary())
        return value

    def unary(self) -> int:
        sign = 1
        while (op := self._at("-", "+")) is not None:
            sign = -sign if op == "-" else sign
        if self._at("(") is not None:
            value = self.sum()
            self._at(")")
        elif self.i < self.stop and self.tokens[self.i].kind is Kind.NUMBER:
            value = int(self.tokens[self.i].text)
            self.i += 1
        else:
            raise _NotArithmetic
        return self._checked(sign * value)
