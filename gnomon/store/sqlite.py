"""SQLite backend of the StructuredTable SPI (:mod:`gnomon.store.api`).

One database file holds a catalog of table specs and one real table per spec. Every thread gets
its own connection; every transaction starts with ``BEGIN IMMEDIATE``, so writers are serialised
by SQLite's database lock (across threads and processes alike) and a transaction that cannot get
the lock within the busy timeout fails with :class:`~gnomon.errors.Conflict`.
"""

from __future__ import annotations

import sqlite3
import string
from pathlib import Path

from gnomon.errors import (
    Closed,
    Conflict,
    Corrupted,
    GnomonError,
    InvalidArgument,
    NotFound,
    Unavailable,
)
from gnomon.store.spec import FieldType, TableSpec
from gnomon.store.sqlfilter import normalise_value, quote_identifier
from gnomon.store.sqlstore import Session, SqlStore
from gnomon.store.sqltable import TableDialect

_SQL_TYPES = {
    FieldType.STRING: "TEXT",
    FieldType.INT: "INTEGER",
    FieldType.LONG: "INTEGER",
    FieldType.FLOAT: "REAL",
    FieldType.DOUBLE: "REAL",
    FieldType.BYTES: "BLOB",
}

# SQLite identifiers are case-insensitive for ASCII letters only.
_ASCII_FOLD = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)

_CONFLICT_CODES = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})
_CORRUPT_CODES = frozenset({sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB})
_UNAVAILABLE_CODES = frozenset(
    {
        sqlite3.SQLITE_IOERR,
        sqlite3.SQLITE_FULL,
        sqlite3.SQLITE_CANTOPEN,
        sqlite3.SQLITE_READONLY,
        sqlite3.SQLITE_PERM,
    }
)


def _check_sqlite_names(spec: TableSpec) -> None:
    """Reject specs that TableSpec accepts but SQLite cannot represent faithfully."""
    seen: dict[str, str] = {}
    for name in (spec.name, *spec.field_names):
        if "\x00" in name:
            raise InvalidArgument(f"table {spec.name!r}: name {name!r} contains a NUL character")
    for name in spec.field_names:
        folded = name.translate(_ASCII_FOLD)
        if folded in seen:
            raise InvalidArgument(
                f"table {spec.name!r}: fields {seen[folded]!r} and {name!r} differ only in case, "
                "which SQLite column names cannot tell apart"
            )
        seen[folded] = name


_SQLITE = TableDialect(
    quote=quote_identifier,
    placeholder=lambda _type: "?",
    to_param=normalise_value,
    marker="?",
    upsert=lambda table, _spec, cols, marks: (
        f"INSERT OR REPLACE INTO {table} ({cols}) VALUES ({marks})"
    ),
    from_sql=lambda _spec, cols, values: dict(zip(cols, values, strict=False)),
)


class SqliteStore(SqlStore[sqlite3.Connection]):
    """A :class:`~gnomon.store.api.StructuredStore` in one SQLite file.

    ``busy_timeout_s`` bounds how long a transaction waits for another writer before it fails
    with :class:`~gnomon.errors.Conflict`.

    Several stores (in this or other processes) may open the same file. Admin operations called
    outside a transaction are each their own transaction; called from inside ``transact`` on the
    same thread they join that transaction and commit or roll back with it. A store must not be
    carried across ``fork``: open a new one in the child.
    """

    driver_error = sqlite3.Error
    # Takes the write lock up front: writers are serialised instead of failing at commit.
    begin = "BEGIN IMMEDIATE"

    def __init__(self, path: str, *, busy_timeout_s: float = 5.0) -> None:
        if path in ("", ":memory:") or path.startswith("file:"):
            raise InvalidArgument(f"SqliteStore needs a plain file path, got {path!r}")
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        super().__init__(_SQLITE, prefix="", types=_SQL_TYPES, table_options=" WITHOUT ROWID")
        self._path = path
        self._busy_timeout_s = busy_timeout_s
        self._admin(
            lambda conn: conn.execute(
                f"CREATE TABLE IF NOT EXISTS {self._catalog} (id INTEGER PRIMARY KEY "
                "AUTOINCREMENT, name TEXT NOT NULL UNIQUE, spec TEXT NOT NULL)",
                [],
            )
        )

    def __repr__(self) -> str:
        return f"SqliteStore({self._path!r})"

    def _check_names(self, spec: TableSpec) -> None:
        _check_sqlite_names(spec)

    def _connect(self) -> sqlite3.Connection:
        with self._errors(None):
            # isolation_level=None: transactions are begun and ended explicitly, never implicitly
            # by the sqlite3 module. check_same_thread=False only because close() may run on
            # another thread; otherwise each connection stays with the thread that opened it.
            conn = sqlite3.connect(
                self._path,
                timeout=self._busy_timeout_s,
                isolation_level=None,
                check_same_thread=False,
            )
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=FULL")
            except BaseException:
                conn.close()
                raise
        return conn

    def _in_transaction(self, conn: sqlite3.Connection) -> bool:
        return conn.in_transaction

    def _insert_catalog(self, conn: sqlite3.Connection, name: str, spec_json: str) -> int:
        cur = conn.execute(
            f"INSERT INTO {self._catalog} (name, spec) VALUES (?, ?)", (name, spec_json)
        )
        # AUTOINCREMENT: ids are never reused.
        assert cur.lastrowid is not None
        return cur.lastrowid

    def _read_catalog(self, name: str) -> tuple[int, TableSpec] | None:
        # A single autocommit SELECT is atomic on its own; no write lock needed.
        session = self._session()
        with self._errors(session):
            return self._lookup(session.conn, name)

    def _map_error(
        self, e: Exception, session: Session[sqlite3.Connection] | None, table: str | None
    ) -> GnomonError | None:
        if self._closed and isinstance(e, sqlite3.ProgrammingError):
            return Closed(f"{self!r} is closed")
        code = getattr(e, "sqlite_errorcode", None)
        primary = None if code is None else code & 0xFF  # strip the extended-code bits
        if primary in _CONFLICT_CODES:
            return Conflict(f"{self!r}: {e}")
        if primary in _CORRUPT_CODES:
            return Corrupted(f"{self!r}: {e}")
        if primary in _UNAVAILABLE_CODES:
            return Unavailable(f"{self!r}: {e}")
        if table is not None and str(e).startswith("no such table"):
            return NotFound(f"table {table!r} was dropped")
        return None
