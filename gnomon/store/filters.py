"""Scan filters of the StructuredTable SPI: equality, range, not, set membership, and/or.

Filters are plain data so that every backend can translate them (SQL WHERE clauses, or
evaluation in memory with :func:`matches`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Eq:
    field: str
    value: Any


@dataclass(frozen=True)
class Range:
    """``lower <(=) field <(=) upper``; a bound of None is open."""

    field: str
    lower: Any = None
    upper: Any = None
    lower_inclusive: bool = True
    upper_inclusive: bool = False


@dataclass(frozen=True)
class In:
    field: str
    values: frozenset[Any]


@dataclass(frozen=True)
class Not:
    filter: Filter


@dataclass(frozen=True)
class And:
    filters: tuple[Filter, ...]


@dataclass(frozen=True)
class Or:
    filters: tuple[Filter, ...]


Filter = Eq | Range | In | Not | And | Or


def eq(field: str, value: Any) -> Eq:
    return Eq(field, value)


def gt(field: str, value: Any) -> Range:
    return Range(field, lower=value, lower_inclusive=False)


def ge(field: str, value: Any) -> Range:
    return Range(field, lower=value, lower_inclusive=True)


def lt(field: str, value: Any) -> Range:
    return Range(field, upper=value, upper_inclusive=False)


def le(field: str, value: Any) -> Range:
    return Range(field, upper=value, upper_inclusive=True)


def in_(field: str, values: Iterable[Any]) -> In:
    return In(field, frozenset(values))


def not_(f: Filter) -> Not:
    return Not(f)


def and_(*fs: Filter) -> And:
    return And(tuple(fs))


def or_(*fs: Filter) -> Or:
    return Or(tuple(fs))


def fields_of(f: Filter) -> Iterator[str]:
    """Every field name a filter refers to (for schema checks)."""
    if isinstance(f, (Eq, Range, In)):
        yield f.field
    elif isinstance(f, Not):
        yield from fields_of(f.filter)
    else:
        for sub in f.filters:
            yield from fields_of(sub)


def matches(f: Filter, row: Mapping[str, Any]) -> bool:
    """Evaluate a filter on one row. Comparisons with null are false, as in SQL."""
    if isinstance(f, Eq):
        v = row.get(f.field)
        return v is not None and v == f.value
    if isinstance(f, In):
        v = row.get(f.field)
        return v is not None and v in f.values
    if isinstance(f, Range):
        v = row.get(f.field)
        if v is None:
            return False
        if f.lower is not None and (v < f.lower or (v == f.lower and not f.lower_inclusive)):
            return False
        return not (
            f.upper is not None and (v > f.upper or (v == f.upper and not f.upper_inclusive))
        )
    if isinstance(f, Not):
        return not matches(f.filter, row)
    if isinstance(f, And):
        return all(matches(s, row) for s in f.filters)
    return any(matches(s, row) for s in f.filters)
