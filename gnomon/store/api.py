"""The StructuredTable SPI: the contract every metadata backend (SQLite, etcd, PostgreSQL)
implements. Callers only ever see these protocols; the backend is chosen at runtime.

All data operations run inside :meth:`StructuredStore.transact`: the function given receives a
:class:`TableContext`, its writes commit together when it returns and roll back when it raises.
Two transactions that touch the same rows concurrently cannot both commit: the loser raises
:class:`gnomon.errors.Conflict` (``retryable``), and ``transact`` never retries on its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from gnomon.store.filters import Filter
from gnomon.store.spec import TableSpec

T = TypeVar("T")

Row = dict[str, Any]


@dataclass(frozen=True)
class KeyRange:
    """A range over (partial) primary keys.

    ``lower`` and ``upper`` map leftmost key fields to values (a prefix of the primary key,
    possibly of different lengths); None means unbounded. Comparison is on the key prefix: with
    ``lower={"a": 1}`` inclusive, every row whose ``a >= 1`` matches; exclusive means ``a > 1``.
    """

    lower: Mapping[str, Any] | None = None
    upper: Mapping[str, Any] | None = None
    lower_inclusive: bool = True
    upper_inclusive: bool = False

    @staticmethod
    def prefix(key: Mapping[str, Any]) -> KeyRange:
        """Every row whose key starts with ``key``."""
        return KeyRange(lower=key, upper=key, lower_inclusive=True, upper_inclusive=True)


class StructuredTable(Protocol):
    """One table, as seen inside a transaction."""

    @property
    def spec(self) -> TableSpec: ...

    def write(self, row: Mapping[str, Any]) -> None:
        """Insert or replace the row addressed by its full primary key. Fields not given are
        null (a write replaces the whole row)."""

    def read(self, key: Mapping[str, Any], columns: Sequence[str] | None = None) -> Row | None:
        """The row with this full key (only ``columns`` if given), or None."""

    def scan(
        self,
        key_range: KeyRange | None = None,
        *,
        limit: int | None = None,
        filter: Filter | None = None,
        columns: Sequence[str] | None = None,
    ) -> Iterator[Row]:
        """Rows in ascending key order within ``key_range`` that match ``filter``."""

    def scan_index(
        self,
        field: str,
        value: Any,
        *,
        limit: int | None = None,
        filter: Filter | None = None,
        columns: Sequence[str] | None = None,
    ) -> Iterator[Row]:
        """Rows whose indexed ``field`` equals ``value``, in ascending key order."""

    def delete(self, key: Mapping[str, Any]) -> bool:
        """Delete the row with this full key; True if it existed."""

    def delete_all(self, prefix: Mapping[str, Any]) -> int:
        """Delete every row whose key starts with ``prefix``; the number deleted."""


class TableContext(Protocol):
    def table(self, name: str) -> StructuredTable:
        """The named table; NotFound if it was never created."""


class StoreAdmin(Protocol):
    def create(self, spec: TableSpec, *, if_not_exists: bool = False) -> None:
        """Create a table. AlreadyExists unless ``if_not_exists``; with it, an existing table
        of a different spec is a SchemaMismatch."""

    def exists(self, name: str) -> bool: ...

    def get_spec(self, name: str) -> TableSpec:
        """The spec a table was created with; NotFound otherwise."""

    def drop(self, name: str) -> None:
        """Drop a table and all its rows; NotFound if absent."""


class StructuredStore(StoreAdmin, Protocol):
    """A backend: admin plus transactions."""

    def transact(self, fn: Callable[[TableContext], T]) -> T:
        """Run ``fn`` in one transaction and return its result."""

    def close(self) -> None: ...


def run_with_retries(
    store: StructuredStore, fn: Callable[[TableContext], T], *, attempts: int = 16
) -> T:
    """Run ``fn`` in a transaction, repeating it on retryable conflicts (bounded)."""
    from gnomon.errors import Conflict

    last: Conflict | None = None
    for _ in range(attempts):
        try:
            return store.transact(fn)
        except Conflict as e:
            last = e
    assert last is not None
    raise last
