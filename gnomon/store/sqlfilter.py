"""SQL text shared by the SQL backends of the StructuredTable SPI (SQLite, PostgreSQL).

Filters and key ranges become WHERE terms with exactly the semantics of
:func:`gnomon.store.filters.matches` and :class:`gnomon.store.api.KeyRange`; what differs between
the databases (identifier quoting, placeholders, how a value is bound) comes in a
:class:`Dialect`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gnomon.errors import InvalidArgument, SchemaMismatch
from gnomon.store.api import KeyRange
from gnomon.store.filters import And, Eq, Filter, In, Not, Or, Range
from gnomon.store.spec import FieldType, TableSpec

TRUE = "TRUE"
FALSE = "FALSE"


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def normalise_value(spec: TableSpec, name: str, value: Any) -> Any:
    """A value already checked against field ``name``, as the databases bind it.

    Rejects (SchemaMismatch) what TableSpec accepts but no backend stores faithfully: NaN (SQLite
    stores it as NULL, and it has no order for ranges), ints beyond 64 bits in float fields (no
    driver binds them, and rounding would change how they compare) and strings with lone
    surrogates (no database text type holds them). Bytes-like values become ``bytes``.
    """
    if isinstance(value, float) and math.isnan(value):
        raise SchemaMismatch(f"table {spec.name!r}: field {name!r} cannot hold NaN")
    if isinstance(value, int) and not _INT64_MIN <= value <= _INT64_MAX:
        raise SchemaMismatch(
            f"table {spec.name!r}: field {name!r} cannot hold {value}: out of 64-bit range"
        )
    if isinstance(value, str) and not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise SchemaMismatch(
                f"table {spec.name!r}: field {name!r} cannot hold {value!r}: not valid Unicode"
            ) from None
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    return value


def quote_identifier(name: str) -> str:
    """A double-quoted SQL identifier (standard SQL, understood by SQLite and PostgreSQL)."""
    return '"' + name.replace('"', '""') + '"'


@dataclass(frozen=True)
class Dialect:
    """What one SQL backend binds and quotes its own way.

    ``quote`` turns a field name into SQL; ``placeholder`` is the bind marker for a value of a
    field type; ``to_param`` converts a value already checked against field ``name`` of ``spec``
    into what the driver binds (raising SchemaMismatch for values the database cannot hold).
    """

    quote: Callable[[str], str]
    placeholder: Callable[[FieldType], str]
    to_param: Callable[[TableSpec, str, Any], Any]

    def bind(self, spec: TableSpec, name: str, value: Any, params: list[Any]) -> str:
        """Append ``value`` of field ``name`` to ``params``; its placeholder."""
        params.append(self.to_param(spec, name, value))
        return self.placeholder(spec.field(name).type)

    def bind_filter_value(self, spec: TableSpec, name: str, value: Any, params: list[Any]) -> str:
        spec.check_value(name, value)
        return self.bind(spec, name, value, params)


def filter_sql(dialect: Dialect, spec: TableSpec, f: Filter, params: list[Any]) -> str:
    """Translate ``f`` into a WHERE expression with the semantics of :func:`filters.matches`.

    ``matches`` is two-valued: a comparison with null is false and ``Not`` negates it (so it is
    true). Every leaf is therefore guarded with ``IS NOT NULL`` so it evaluates to false instead
    of NULL, which makes SQL's NOT/AND/OR agree with Python's.
    """
    if isinstance(f, Eq):
        spec.field(f.field)
        if f.value is None:
            return FALSE
        col = dialect.quote(f.field)
        mark = dialect.bind_filter_value(spec, f.field, f.value, params)
        return f"({col} IS NOT NULL AND {col} = {mark})"
    if isinstance(f, In):
        spec.field(f.field)
        values = [v for v in f.values if v is not None]
        if not values:
            return FALSE
        col = dialect.quote(f.field)
        marks = ", ".join(dialect.bind_filter_value(spec, f.field, v, params) for v in values)
        return f"({col} IS NOT NULL AND {col} IN ({marks}))"
    if isinstance(f, Range):
        spec.field(f.field)
        col = dialect.quote(f.field)
        terms = [f"{col} IS NOT NULL"]
        if f.lower is not None:
            mark = dialect.bind_filter_value(spec, f.field, f.lower, params)
            terms.append(f"{col} {'>=' if f.lower_inclusive else '>'} {mark}")
        if f.upper is not None:
            mark = dialect.bind_filter_value(spec, f.field, f.upper, params)
            terms.append(f"{col} {'<=' if f.upper_inclusive else '<'} {mark}")
        return "(" + " AND ".join(terms) + ")"
    if isinstance(f, Not):
        return f"(NOT {filter_sql(dialect, spec, f.filter, params)})"
    if isinstance(f, (And, Or)):
        is_and = isinstance(f, And)
        if not f.filters:
            return TRUE if is_and else FALSE  # as all([]) and any([])
        parts = [filter_sql(dialect, spec, s, params) for s in f.filters]
        return "(" + (" AND " if is_and else " OR ").join(parts) + ")"
    raise InvalidArgument(f"table {spec.name!r}: not a filter: {f!r}")


def key_eq_sql(
    dialect: Dialect, spec: TableSpec, values: tuple[Any, ...], params: list[Any]
) -> str:
    """Equality on the leftmost ``len(values)`` key fields (all rows for an empty prefix)."""
    names = spec.primary_key[: len(values)]
    terms = [
        f"{dialect.quote(n)} = {dialect.bind(spec, n, v, params)}"
        for n, v in zip(names, values, strict=True)
    ]
    return " AND ".join(terms) or TRUE


def key_range_sql(
    dialect: Dialect, spec: TableSpec, key_range: KeyRange, params: list[Any]
) -> list[str]:
    """WHERE terms (to be ANDed) selecting the keys inside ``key_range``."""
    terms: list[str] = []
    bounds = (
        (key_range.lower, key_range.lower_inclusive, ">=", ">"),
        (key_range.upper, key_range.upper_inclusive, "<=", "<"),
    )
    for bound, inclusive, op_incl, op_excl in bounds:
        if bound is None:
            continue
        values = spec.check_key(bound, full=False)
        if not values:
            # The empty prefix compares equal to every key: inclusive keeps all, exclusive none.
            if not inclusive:
                terms.append(FALSE)
            continue
        # Row values compare lexicographically over the prefix columns only, which is exactly
        # KeyRange's prefix comparison, and both databases serve them from the primary key.
        names = spec.primary_key[: len(values)]
        cols = ", ".join(dialect.quote(n) for n in names)
        marks = ", ".join(
            dialect.bind(spec, n, v, params) for n, v in zip(names, values, strict=True)
        )
        terms.append(f"({cols}) {op_incl if inclusive else op_excl} ({marks})")
    return terms


def select_list(dialect: Dialect, cols: tuple[str, ...]) -> str:
    # An empty projection is legal (it answers "does the row exist"); SQL needs some column.
    return ", ".join(dialect.quote(c) for c in cols) or "1"
