"""How a query's tables reach DataFusion (:class:`Mode`), decided from the query and the
types it reads before it runs, where DataFusion lacks a kernel or a conversion:

- **Dictionary-encoded tags.** String tags reach DataFusion dictionary encoded (grouping
  and comparing a few distinct hosts is cheaper so), but some functions have no
  implementation for a dictionary: ``approx_distinct`` fails on one where it takes plain
  strings, and the numeric ones (``sum``, ``avg``, ``median``...) given a tag fail either
  way, naming the type ``Dictionary(Int32, Utf8)`` the user never declared. A query that
  calls one of :data:`NO_DICTIONARY_KERNEL` with a string tag among its arguments
  (:func:`plain_tags`, found once per query shape) reads its tags plain.
- **Literal filters.** DataFusion simplifies an expression compared for equality with two
  different literals in one conjunction (``host = 'a' AND host = 'b'``, a one-item IN
  list counts as ``=``) to ``false``, then fails to hand that filter to a pyarrow dataset
  (its pyarrow form is a ``BooleanScalar``, no ``Expression``). A query that equates
  something with literals twice (:func:`equates_twice`, found once per query shape) has its
  optimized plan looked at before it runs (:func:`literal_scan_filter`); if a scan's filter
  is such a literal, its tables are registered as views with a LIMIT over their datasets,
  which keeps DataFusion from pushing filters into the scans.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from node.engine.schema import ColumnType, Schema
from node.sql.lexer import Kind, Token

#: Functions DataFusion 55 has no dictionary implementation of: given a dictionary-encoded
#: string they fail (``approx_distinct`` only then; the rest on a plain string too, but then
#: their error names the type the column was declared with).
NO_DICTIONARY_KERNEL = frozenset(
    {
        "approx_distinct", "approx_median", "median", "sum", "avg", "mean", "var", "var_pop",
        "var_samp", "stddev", "stddev_pop", "stddev_samp", "bit_and", "bit_or", "bit_xor",
        "corr", "covar", "covar_pop", "covar_samp", "regr_slope", "regr_intercept",
        "regr_count", "regr_r2", "regr_avgx", "regr_avgy", "regr_sxx", "regr_syy", "regr_sxy",
        "to_timestamp", "to_timestamp_millis", "to_timestamp_micros", "to_timestamp_nanos",
        "to_timestamp_seconds",
    }
)  # fmt: skip
_LITERALS = (Kind.STRING, Kind.NUMBER)


@dataclass(frozen=True)
class Mode:
    """How a query's tables reach DataFusion. Without ``pushdown`` each table is a view with
    a LIMIT over its dataset (see the module's literal filters); ``in_memory`` lets small
    scans be read up front; ``dictionary_tags`` hands string tags over dictionary encoded."""

    pushdown: bool = True
    in_memory: bool = True
    dictionary_tags: bool = True


def plain_tags(tokens: Sequence[Token], schemas: Iterable[tuple[str, Schema]]) -> bool:
    """Whether the query (``tokens``, reading tables of ``schemas``) calls a function of
    :data:`NO_DICTIONARY_KERNEL` with a string tag of one of them among its arguments."""
    tags = {
        t.lower()
        for _, schema in schemas
        for t in schema.tags
        if schema.column(t).type is ColumnType.STRING
    }
    if not tags:
        return False
    return any(
        t.kind is Kind.WORD
        and t.text.lower() in NO_DICTIONARY_KERNEL
        and _opens(tokens, i + 1)
        and any(
            (name := a.identifier) is not None and name.lower() in tags
            for a in _arguments(tokens, i + 1)
        )
        for i, t in enumerate(tokens[:-1])
    )


def equates_twice(tokens: Sequence[Token]) -> bool:
    """Whether one expression is compared for equality with literals at two places (``=``
    with a literal on one side, or an IN list of one literal), keyed by the token next to
    the literal: a superset of the queries DataFusion may simplify to a literal filter."""
    seen: set[str] = set()
    for i, t in enumerate(tokens):
        key = None
        if t.kind is Kind.SYMBOL and t.text == "=" and 0 < i < len(tokens) - 1:
            left, right = tokens[i - 1], tokens[i + 1]
            if right.kind in _LITERALS:
                key = left.text.lower()
            elif left.kind in _LITERALS:
                key = right.text.lower()
        elif (
            t.is_word("IN")
            and i + 3 < len(tokens)
            and tokens[i + 1].text == "("
            and tokens[i + 2].kind in _LITERALS
            and tokens[i + 3].text == ")"
            and i > 0
        ):
            key = tokens[i - 1].text.lower()
        if key is not None:
            if key in seen:
                return True
            seen.add(key)
    return False


def literal_scan_filter(plan: Any) -> bool:
    """Whether an optimized logical ``plan`` (DataFusion's) hands a scan a filter that is a
    literal: what a pyarrow dataset cannot take."""
    stack = [plan]
    while stack:
        node = stack.pop()
        variant = node.to_variant()
        if type(variant).__name__ == "TableScan" and any(
            type(f.to_variant()).__name__ == "Literal" for f in variant.filters()
        ):
            return True
        stack.extend(node.inputs())
    return False


def _opens(tokens: Sequence[Token], i: int) -> bool:
    return tokens[i].kind is Kind.SYMBOL and tokens[i].text == "("


def _arguments(tokens: Sequence[Token], start: int) -> list[Token]:
    """The tokens between the parenthesis at ``start`` and the one closing it."""
    depth = 0
    for j in range(start, len(tokens)):
        t = tokens[j]
        if t.kind is Kind.SYMBOL and t.text == "(":
            depth += 1
        elif t.kind is Kind.SYMBOL and t.text == ")":
            depth -= 1
            if depth == 0:
                return list(tokens[start + 1 : j])
    return list(tokens[start + 1 :])
