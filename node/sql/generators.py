"""Functions that make many values out of few (``range``, ``generate_series``,
``array_repeat``, ``repeat``, ``lpad``, ...), bounded before a query runs (setting
``max_generated_values``).

DataFusion makes their values outside the query's memory pool, in one piece per call and
batch, and folds a call of constant arguments while it optimizes the plan, before anything
runs: ``SELECT sum(x) FROM unnest(range(1, 1000000000)) AS t(x)`` took a node to 13.5 GB
that no limit noticed, and nothing that runs later can stop one such allocation. So the
values each call makes are counted from its arguments before DataFusion sees the statement:
they must be constants (a count read from a column's values could be anything), and all
calls together may make at most the limit. A call in a statement that reads rows (has a
FROM clause) is made for every row of a batch: it counts :data:`ROWS_PER_BATCH` times, but
for the rows a FROM item makes itself (a table function's, an ``unnest`` of constants'),
made once.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import datafusion
import pyarrow as pa

from gnomon.errors import TooLarge
from node.engine.scan import ScanRequest
from node.sql import cancel, functions
from node.sql.lexer import Kind, Token, tokenize

SETTING = "max_generated_values"

#: The most rows of one batch a query's functions are called on: the engine's scans hand
#: batches of up to this many rows on (DataFusion's own batches hold 8,192).
ROWS_PER_BATCH = ScanRequest("").batch_size

#: The functions bounded, by the names DataFusion knows them by.
_LISTS = frozenset(("range", "generate_series"))
_REPEATS = frozenset(("array_repeat", "list_repeat", "repeat"))
_PADS = frozenset(("lpad", "rpad"))
_RESIZES = frozenset(("array_resize", "list_resize"))
NAMES = _LISTS | _REPEATS | _PADS | _RESIZES

#: Cheap test of a statement's text before its tokens are looked at: nearly no query names
#: one of the functions.
_MENTIONS = re.compile(r"\b(?:" + "|".join(sorted(NAMES)) + r")\b", re.IGNORECASE)

#: Names in an argument that make it no constant: functions whose value differs call by
#: call, and the words of a subquery (which could run for as long as it likes).
_NOT_CONSTANT = frozenset(("random", "uuid", "select", "with", "from", "values"))
#: Words after which a name starts a FROM item (a table function, or ``unnest``).
_ITEM_STARTS = frozenset(("FROM", "JOIN", "LATERAL"))
#: Words that end a FROM clause at its parenthesis level.
_CLAUSES = frozenset((
    "SELECT", "WHERE", "GROUP", "HAVING", "ORDER", "LIMIT", "OFFSET", "WINDOW", "QUALIFY",
    "UNION", "INTERSECT", "EXCEPT",
))  # fmt: skip

_DAY_NS = 86_400 * 10**9
_UNIT_NS = {"s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}


@dataclass(frozen=True)
class _Call:
    """One call of a bounded function: its name, where its name and arguments are, and
    whether it is made once (a FROM item, or inside one's ``unnest``)."""

    name: str
    at: int
    args: tuple[tuple[int, int], ...]
    once: bool


def check(sql: str) -> None:
    """TooLarge, naming the setting, if the bounded functions ``sql`` calls would make more
    values than the running query's limit, or a count that is not a constant."""
    token = cancel.current()
    limit = None if token is None else token.limits.max_generated_values
    if token is None or limit is None or not _MENTIONS.search(sql):
        return
    tokens = tokenize(sql)
    calls, reads_rows = _calls(tokens)
    total = 0
    for call in calls:
        made = _count(call, calls, tokens, sql)
        if made is None:
            token.refusals.count("generated_values")
            raise TooLarge(
                f"{call.name}() takes a count that is not a constant: the values it makes "
                f"cannot be bounded before the query runs (setting {SETTING})"
            )
        rows = 1 if call.once or not reads_rows else ROWS_PER_BATCH
        total += made * rows
        if total > limit:
            token.refusals.count("generated_values")
            per_row = f" for each of up to {rows} rows a batch holds" if rows > 1 else ""
            raise TooLarge(
                f"query generates too many values: {call.name}() makes up to {made} values"
                f"{per_row}, past "
                f"the limit of {limit} values a query's range, generate_series, repeat, "
                f"array_repeat, lpad, rpad and array_resize calls may make together "
                f"(setting {SETTING})"
            )


def _calls(tokens: Sequence[Token]) -> tuple[list[_Call], bool]:
    """The calls of bounded functions in ``tokens``, and whether the statement has a FROM
    item (then a call not made once is made per row)."""
    calls: list[_Call] = []
    reads_rows = False
    # Per open parenthesis: whether the level is in a FROM clause, and whether the
    # parenthesis is a FROM item's ``unnest`` call (what it holds is made once).
    levels: list[tuple[bool, bool]] = [(False, False)]
    once_depth = 0
    for i, t in enumerate(tokens):
        if t.kind is Kind.SYMBOL:
            if t.text in ("(", "[", "{"):
                prev = tokens[i - 1] if i else None
                starts = prev is not None and _starts_item(tokens, i - 1, levels[-1][0])
                unnest = starts and prev is not None and prev.identifier == "unnest"
                levels.append((False, unnest))
                once_depth += unnest
            elif t.text in (")", "]", "}") and len(levels) > 1:
                once_depth -= levels.pop()[1]
            continue
        if t.kind is Kind.WORD and t.upper in _ITEM_STARTS:
            levels[-1] = (True, levels[-1][1])
            reads_rows = reads_rows or t.upper == "FROM"
            continue
        if t.kind is Kind.WORD and t.upper in _CLAUSES:
            levels[-1] = (False, levels[-1][1])
            continue
        if t.identifier in NAMES and tokens[i + 1].text == "(":
            once = once_depth > 0 or _starts_item(tokens, i, levels[-1][0])
            calls.append(_Call(t.identifier, i, _arguments(tokens, i + 1), once))
    return calls, reads_rows


def _starts_item(tokens: Sequence[Token], at: int, in_from: bool) -> bool:
    """Whether the token at ``at`` starts a FROM item."""
    if at == 0:
        return False
    prev = tokens[at - 1]
    return (prev.kind is Kind.WORD and prev.upper in _ITEM_STARTS) or (
        in_from and prev.kind is Kind.SYMBOL and prev.text == ","
    )


def _arguments(tokens: Sequence[Token], open_at: int) -> tuple[tuple[int, int], ...]:
    """The arguments of the call whose parenthesis opens at ``open_at``: each as the span
    [first, stop) of its tokens."""
    spans = []
    depth = 0
    start = open_at + 1
    for i in range(open_at, len(tokens)):
        t = tokens[i]
        if t.kind is Kind.END:
            break
        if t.kind is not Kind.SYMBOL:
            continue
        if t.text in ("(", "[", "{"):
            depth += 1
        elif t.text in (")", "]", "}"):
            depth -= 1
            if depth == 0:
                if i > start:
                    spans.append((start, i))
                break
        elif t.text == "," and depth == 1:
            spans.append((start, i))
            start = i + 1
    return tuple(spans)


def _count(call: _Call, calls: Sequence[_Call], tokens: Sequence[Token], sql: str) -> int | None:
    """The values ``call`` makes for one row (None: its count is no constant)."""
    args = call.args
    if call.name in _LISTS:
        values = _constants(args, tokens, sql)
        if values is None or not 1 <= len(values) <= 3:
            return None
        return _elements(values)
    if len(args) < 2:
        return None  # DataFusion refuses the call
    counted = _constants(args[1:2], tokens, sql)
    if counted is None:
        return None
    n = max(counted[0], 0)
    if call.name in _PADS:
        return n
    # A repeated or padding value is a list or string of its own: as long as what the
    # bounded calls inside it make, or a string literal's length.
    inner = args[0] if call.name in _REPEATS else args[2] if len(args) > 2 else None
    return n * (1 if inner is None else _size(inner, calls, tokens, sql))


def _size(span: tuple[int, int], calls: Sequence[_Call], tokens: Sequence[Token], sql: str) -> int:
    first, stop = span
    if stop - first == 1 and tokens[first].kind is Kind.STRING:
        return max(len(tokens[first].text), 1)
    nested = [c for c in calls if first <= c.at < stop]
    return max(sum(_count(c, calls, tokens, sql) or 0 for c in nested), 1)


def _constants(
    spans: Sequence[tuple[int, int]], tokens: Sequence[Token], sql: str
) -> list[int] | None:
    """The values of the arguments at ``spans`` as integers (points in time and spans in
    nanoseconds), when they are constants: whole numbers read from their tokens, others
    (timestamps, dates, intervals, arithmetic) evaluated by DataFusion alone, without the
    query's tables. None if one names a column, a table, a subquery, a function of changing
    value or a bounded function (its values would be made here), or is of another type."""
    values: list[int | None] = []
    texts = []
    for first, stop in spans:
        whole = _whole_number(tokens[first:stop])
        if whole is not None:
            values.append(whole)
            continue
        for t in tokens[first:stop]:
            if t.identifier in NAMES or t.identifier in _NOT_CONSTANT:
                return None
        values.append(None)
        texts.append(sql[tokens[first].pos : tokens[stop].pos])
    if texts:
        # gnomon's functions too: a client's catalog query bounds a series by them.
        ctx = datafusion.SessionContext()
        functions.register(ctx)
        try:
            row = ctx.sql(
                "SELECT " + ", ".join(f"{text} AS a{i}" for i, text in enumerate(texts))
            ).to_arrow_table()
        except Exception:  # DataFusion reports every failure as a plain Exception
            return None
        evaluated = iter(_integer(row.column(i)[0]) for i in range(row.num_columns))
        values = [next(evaluated) if v is None else v for v in values]
    if any(v is None for v in values):
        return None
    return [v for v in values if v is not None]


def _whole_number(tokens: Sequence[Token]) -> int | None:
    """The value of a whole number literal, signed or not, else None."""
    sign = 1
    if len(tokens) == 2 and tokens[0].kind is Kind.SYMBOL and tokens[0].text in ("-", "+"):
        sign = -1 if tokens[0].text == "-" else 1
        tokens = tokens[1:]
    if len(tokens) == 1 and tokens[0].kind is Kind.NUMBER and tokens[0].text.isdigit():
        return sign * int(tokens[0].text)
    return None


def _integer(value: pa.Scalar[Any]) -> int | None:
    """An evaluated count, point in time or span as an integer (times in nanoseconds, a
    calendar month as 28 days: at least as many steps as it makes); NULL (no values) as
    0; None for any other type."""
    if not value.is_valid:
        return 0
    kind = value.type
    if pa.types.is_integer(kind):
        return int(value.as_py())
    if pa.types.is_timestamp(kind) or pa.types.is_duration(kind):
        return int(value.cast(pa.int64()).as_py()) * _UNIT_NS[kind.unit]
    if pa.types.is_date32(kind):
        return int(value.cast(pa.int32()).as_py()) * _DAY_NS
    if kind == pa.month_day_nano_interval():
        months, days, nanoseconds = value.as_py()
        return int((months * 28 + days) * _DAY_NS + nanoseconds)
    return None


def _elements(values: Sequence[int]) -> int:
    """The elements ``range``/``generate_series`` make from ``values`` (stop; start, stop;
    or start, stop, step), at most: both ends counted."""
    if len(values) == 1:
        start, stop, step = 0, values[0], 1
    else:
        start, stop = values[0], values[1]
        step = values[2] if len(values) == 3 else 1
    if step == 0:
        return 0  # DataFusion refuses a zero step
    return abs(stop - start) // abs(step) + 1
