"""Column defaults computed from the row (HoraeDB's ``c3 uint32 DEFAULT c1 + 1``).

A default expression is arithmetic (``+ - * /``, parentheses, a leading minus) on numbers,
strings, NULL, TRUE/FALSE and the columns declared before its own; a write leaving the
column out gets its value per row, from the values written (or computed) for those columns.
It is kept in the schema as its text, written as SHOW CREATE TABLE prints it (``c3 * 2 + 1``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from gnomon.errors import InvalidArgument

_TOKEN = re.compile(
    r"\s*(?:(?P<num>\d+\.\d*|\.\d+|\d+(?:[eE][-+]?\d+)?(?![\w]))"
    r"|'(?P<s1>(?:[^']|'')*)'|\"(?P<s2>(?:[^\"]|\"\")*)\""
    r"|`(?P<q>(?:[^`]|``)+)`|(?P<word>\w+)|(?P<op>[-+*/()]))"
)
_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "+": pc.add_checked,
    "-": pc.subtract_checked,
    "*": pc.multiply_checked,
    "/": pc.divide_checked,
}

#: A value per row: an array of the batch's length or a scalar for all of them.
Evaluator = Callable[[Mapping[str, "pa.Array[Any]"]], Any]


@dataclass(frozen=True)
class DefaultExpression:
    """A parsed default: the columns it reads and how to compute it."""

    text: str
    columns: frozenset[str]
    evaluate: Evaluator


def parse(text: str) -> DefaultExpression:
    """The default expression ``text``; InvalidArgument names what it cannot read."""
    tokens: list[tuple[str, Any]] = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise InvalidArgument(f"DEFAULT {text}: cannot read {text[pos:].strip()!r}")
        pos = m.end()
        kind = m.lastgroup
        if kind == "num":
            num = m.group("num")
            tokens.append(("lit", int(num) if num.isdigit() else float(num)))
        elif kind in ("s1", "s2"):
            quote = "'" if kind == "s1" else '"'
            tokens.append(("lit", m.group(kind).replace(quote * 2, quote)))
        elif kind == "q":
            tokens.append(("col", m.group("q").replace("``", "`")))
        elif kind == "word":
            word = m.group("word")
            upper = word.upper()
            if upper in ("NULL", "TRUE", "FALSE"):
                tokens.append(("lit", {"NULL": None, "TRUE": True, "FALSE": False}[upper]))
            else:
                tokens.append(("col", word))
        elif kind == "op":
            tokens.append(("op", m.group("op")))
    reader = _Reader(text, tokens)
    evaluate = reader.sum()
    if reader.i != len(tokens):
        raise InvalidArgument(f"DEFAULT {text}: unexpected {tokens[reader.i][1]!r}")
    return DefaultExpression(text, frozenset(reader.columns), evaluate)


class _Reader:
    def __init__(self, text: str, tokens: list[tuple[str, Any]]) -> None:
        self.text = text
        self.tokens = tokens
        self.i = 0
        self.columns: set[str] = set()

    def _op(self, ops: str) -> str | None:
        if self.i < len(self.tokens) and self.tokens[self.i][0] == "op":
            op = str(self.tokens[self.i][1])
            if op in ops:
                self.i += 1
                return op
        return None

    def sum(self) -> Evaluator:
        return self._chain("+-", self.product)

    def product(self) -> Evaluator:
        return self._chain("*/", self.unary)

    def _chain(self, ops: str, operand: Callable[[], Evaluator]) -> Evaluator:
        left = operand()
        while (op := self._op(ops)) is not None:
            left = _binary(_OPS[op], left, operand())
        return left

    def unary(self) -> Evaluator:
        if self._op("-"):
            inner = self.unary()
            return lambda row: pc.negate_checked(inner(row))
        self._op("+")
        return self.operand()

    def operand(self) -> Evaluator:
        if self.i >= len(self.tokens):
            raise InvalidArgument(f"DEFAULT {self.text}: the expression ends too early")
        kind, value = self.tokens[self.i]
        self.i += 1
        if kind == "lit":
            return lambda row: value
        if kind == "col":
            self.columns.add(value)
            return lambda row: row[value]
        if value == "(":
            inner = self.sum()
            if self._op(")") is None:
                raise InvalidArgument(f"DEFAULT {self.text}: a '(' is not closed")
            return inner
        raise InvalidArgument(f"DEFAULT {self.text}: unexpected {value!r}")


def _binary(fn: Callable[[Any, Any], Any], left: Evaluator, right: Evaluator) -> Evaluator:
    return lambda row: fn(left(row), right(row))


def check(text: str, column: str, before: Collection[str]) -> None:
    """Refuse a default of ``column`` that reads anything but the columns declared
    ``before`` it (those a write has, or has computed, by the time it is computed)."""
    unknown = sorted(parse(text).columns - set(before))
    if unknown:
        raise InvalidArgument(
            f"column {column!r}: DEFAULT {text} reads {', '.join(map(repr, unknown))}, not a "
            "column declared before it"
        )


def evaluate(
    text: str, row: Mapping[str, pa.Array[Any]], n: int, typ: pa.DataType
) -> pa.Array[Any]:
    """The default ``text`` for ``n`` rows whose other columns are ``row``, as ``typ``."""
    value = parse(text).evaluate(row)
    if isinstance(value, pa.ChunkedArray):
        value = value.combine_chunks()
    if isinstance(value, pa.Array):
        array: pa.Array[Any] = value
    else:
        scalar: Any = value if isinstance(value, pa.Scalar) else pa.scalar(value)
        array = pa.repeat(scalar, n)
    return array.cast(typ, safe=True)
