"""Row operations shared by the SQL backends of the StructuredTable SPI (SQLite, PostgreSQL).

Each table spec is one real table in the database, with a primary key over the key fields.
:class:`SqlTable` turns the SPI's row operations into statements on it, built from the WHERE
terms of :mod:`gnomon.store.sqlfilter`. What the databases spell differently (the upsert, the
LIMIT's bind marker, how a fetched row reads back) comes in a :class:`TableDialect`; how a
statement runs (on the transaction's connection, with the driver's errors mapped) comes from
the backend's :class:`Statements`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from gnomon.errors import InvalidArgument, SchemaMismatch
from gnomon.store.api import KeyRange, Row
from gnomon.store.filters import Eq, Filter
from gnomon.store.spec import TableSpec
from gnomon.store.sqlfilter import (
    TRUE,
    Dialect,
    filter_sql,
    key_eq_sql,
    key_range_sql,
    select_list,
)


@dataclass(frozen=True)
class TableDialect(Dialect):
    """A :class:`Dialect` plus what whole statements on a table need.

    ``marker`` is the bind marker of an untyped parameter (the LIMIT). ``upsert(table, spec,
    cols, marks)`` is the statement inserting a row, or replacing the row with the same key,
    given the quoted table, its spec, the quoted column list and the bind markers of the values.
    ``from_sql(spec, cols, values)`` is a fetched row as the SPI returns it.
    """

    marker: str
    upsert: Callable[[str, TableSpec, str, str], str]
    from_sql: Callable[[TableSpec, tuple[str, ...], Sequence[Any]], Row]


class Statements(Protocol):
    """How a table's statements run: on the connection of its transaction, which must still be
    open, with the driver's errors mapped onto the gnomon error tree (naming ``table``)."""

    def fetch(self, sql: str, params: Sequence[Any], table: str) -> list[Any]:
        """Run a query; all its rows."""
        ...

    def change(self, sql: str, params: Sequence[Any], table: str) -> int:
        """Run a statement that changes rows; how many it changed."""
        ...


class SqlTable:
    """A :class:`~gnomon.store.api.StructuredTable` on the real table ``table`` (quoted)."""

    def __init__(
        self, statements: Statements, dialect: TableDialect, table: str, spec: TableSpec
    ) -> None:
        self._statements = statements
        self._dialect = dialect
        self._table = table
        self._spec = spec

    @property
    def spec(self) -> TableSpec:
        return self._spec

    def write(self, row: Mapping[str, Any]) -> None:
        spec, dialect = self._spec, self._dialect
        spec.check_row(row)
        names = spec.field_names
        params: list[Any] = []
        marks = ", ".join(dialect.bind(spec, n, row.get(n), params) for n in names)
        cols = ", ".join(dialect.quote(n) for n in names)
        self._change(dialect.upsert(self._table, spec, cols, marks), params)

    def read(self, key: Mapping[str, Any], columns: Sequence[str] | None = None) -> Row | None:
        values = self._spec.check_key(key, full=True)
        cols = self._spec.check_columns(columns)
        params: list[Any] = []
        where = key_eq_sql(self._dialect, self._spec, values, params)
        rows = self._fetch(
            f"SELECT {select_list(self._dialect, cols)} FROM {self._table} WHERE {where}", params
        )
        return self._dialect.from_sql(self._spec, cols, rows[0]) if rows else None

    def scan(
        self,
        key_range: KeyRange | None = None,
        *,
        limit: int | None = None,
        filter: Filter | None = None,
        columns: Sequence[str] | None = None,
    ) -> Iterator[Row]:
        params: list[Any] = []
        terms = (
            [] if key_range is None else key_range_sql(self._dialect, self._spec, key_range, params)
        )
        return self._select(terms, params, limit, filter, columns)

    def scan_index(
        self,
        field: str,
        value: Any,
        *,
        limit: int | None = None,
        filter: Filter | None = None,
        columns: Sequence[str] | None = None,
    ) -> Iterator[Row]:
        self._spec.field(field)
        if field not in self._spec.indexes:
            raise SchemaMismatch(f"table {self._spec.name!r}: field {field!r} has no index")
        params: list[Any] = []
        terms = [filter_sql(self._dialect, self._spec, Eq(field, value), params)]
        return self._select(terms, params, limit, filter, columns)

    def delete(self, key: Mapping[str, Any]) -> bool:
        return self._delete(self._spec.check_key(key, full=True)) > 0

    def delete_all(self, prefix: Mapping[str, Any]) -> int:
        return self._delete(self._spec.check_key(prefix, full=False))

    def _delete(self, key: tuple[Any, ...]) -> int:
        params: list[Any] = []
        where = key_eq_sql(self._dialect, self._spec, key, params)
        return self._change(f"DELETE FROM {self._table} WHERE {where}", params)

    def _select(
        self,
        terms: list[str],
        params: list[Any],
        limit: int | None,
        filter: Filter | None,
        columns: Sequence[str] | None,
    ) -> Iterator[Row]:
        spec, dialect = self._spec, self._dialect
        cols = spec.check_columns(columns)
        if filter is not None:
            terms.append(filter_sql(dialect, spec, filter, params))
        if limit is not None:
            if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
                raise InvalidArgument(f"table {spec.name!r}: bad scan limit {limit!r}")
            params.append(limit)
        order = ", ".join(dialect.quote(k) for k in spec.primary_key)
        where = " AND ".join(terms) or TRUE
        sql = (
            f"SELECT {select_list(dialect, cols)} FROM {self._table} WHERE {where} "
            f"ORDER BY {order}" + (f" LIMIT {dialect.marker}" if limit is not None else "")
        )
        # Fetched eagerly: a lazy cursor would observe the caller's own writes made while
        # iterating, and would outlive the transaction if the iterator escaped it.
        return iter([dialect.from_sql(spec, cols, r) for r in self._fetch(sql, params)])

    def _fetch(self, sql: str, params: Sequence[Any]) -> list[Any]:
        return self._statements.fetch(sql, params, self._spec.name)

    def _change(self, sql: str, params: Sequence[Any]) -> int:
        return self._statements.change(sql, params, self._spec.name)
