"""SQLite backend of the StructuredTable SPI (:mod:`gnomon.store.api`).

One database file holds a catalog of table specs and one real table per spec. Every thread gets
its own connection; every transaction starts with ``BEGIN IMMEDIATE``, so writers are serialised
by SQLite's database lock (across threads and processes alike) and a transaction that cannot get
the lock within the busy timeout fails with :class:`~gnomon.errors.Conflict`.
"""

from __future__ import annotations

import json
import sqlite3
import string
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, TypeVar

from gnomon.errors import (
    AlreadyExists,
    Closed,
    Conflict,
    Corrupted,
    GnomonError,
    InvalidArgument,
    NotFound,
    SchemaMismatch,
    Unavailable,
)
from gnomon.store.api import KeyRange, Row, TableContext
from gnomon.store.filters import Eq, Filter
from gnomon.store.spec import FieldType, TableSpec
from gnomon.store.sqlfilter import (
    TRUE,
    Dialect,
    filter_sql,
    key_eq_sql,
    key_range_sql,
    normalise_value,
    quote_identifier,
    select_list,
)

T = TypeVar("T")

_CATALOG = "gnomon_catalog"

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


def _physical(table_id: int) -> str:
    # Real tables are named by catalog id, not by spec name: spec names may differ only in case
    # (SQLite would see one table) or collide with SQLite's reserved names. Ids are never reused
    # (AUTOINCREMENT), so a stale id cannot address a newer table.
    return quote_identifier(f"t{table_id}")


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


_SQLITE = Dialect(quote=quote_identifier, placeholder=lambda _type: "?", to_param=normalise_value)


def _lookup(conn: sqlite3.Connection, name: str) -> tuple[int, TableSpec] | None:
    row = conn.execute(f"SELECT id, spec FROM {_CATALOG} WHERE name = ?", (name,)).fetchone()
    if row is None:
        return None
    return int(row[0]), TableSpec.from_json(json.loads(row[1]))


class _Session:
    """One thread's connection. The thread-local owns it (a finished thread's connection is
    freed, which closes it); the store only holds it weakly, to close it on ``close()``."""

    __slots__ = ("__weakref__", "conn", "in_txn")

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.in_txn = False


class SqliteStore:
    """A :class:`~gnomon.store.api.StructuredStore` in one SQLite file.

    ``busy_timeout_s`` bounds how long a transaction waits for another writer before it fails
    with :class:`~gnomon.errors.Conflict`.

    Several stores (in this or other processes) may open the same file. Admin operations called
    outside a transaction are each their own transaction; called from inside ``transact`` on the
    same thread they join that transaction and commit or roll back with it. A store must not be
    carried across ``fork``: open a new one in the child.
    """

    def __init__(self, path: str, *, busy_timeout_s: float = 5.0) -> None:
        if path in ("", ":memory:") or path.startswith("file:"):
            raise InvalidArgument(f"SqliteStore needs a plain file path, got {path!r}")
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        self._path = path
        self._busy_timeout_s = busy_timeout_s
        self._local = threading.local()
        self._sessions: weakref.WeakSet[_Session] = weakref.WeakSet()
        self._lock = threading.Lock()
        self._closed = False
        self._admin(
            lambda conn: conn.execute(
                f"CREATE TABLE IF NOT EXISTS {_CATALOG} (id INTEGER PRIMARY KEY AUTOINCREMENT, "
                "name TEXT NOT NULL UNIQUE, spec TEXT NOT NULL)"
            )
        )

    def __repr__(self) -> str:
        return f"SqliteStore({self._path!r})"

    # -- admin ---------------------------------------------------------------------------------

    def create(self, spec: TableSpec, *, if_not_exists: bool = False) -> None:
        _check_sqlite_names(spec)

        def op(conn: sqlite3.Connection) -> None:
            found = _lookup(conn, spec.name)
            if found is not None:
                if not if_not_exists:
                    raise AlreadyExists(f"table {spec.name!r} already exists")
                if found[1] != spec:
                    raise SchemaMismatch(
                        f"table {spec.name!r} exists with spec {found[1].to_json()}, "
                        f"not {spec.to_json()}"
                    )
                return
            cur = conn.execute(
                f"INSERT INTO {_CATALOG} (name, spec) VALUES (?, ?)",
                (spec.name, json.dumps(spec.to_json())),
            )
            table_id = cur.lastrowid
            assert table_id is not None
            table = _physical(table_id)
            cols = ", ".join(
                f"{quote_identifier(f.name)} {_SQL_TYPES[f.type]}"
                + (" NOT NULL" if f.name in spec.primary_key else "")
                for f in spec.fields
            )
            pk = ", ".join(quote_identifier(k) for k in spec.primary_key)
            conn.execute(f"CREATE TABLE {table} ({cols}, PRIMARY KEY ({pk})) WITHOUT ROWID")
            for i, field in enumerate(spec.indexes):
                index = quote_identifier(f"t{table_id}_i{i}")
                conn.execute(f"CREATE INDEX {index} ON {table} ({quote_identifier(field)})")

        self._admin(op)

    def exists(self, name: str) -> bool:
        return self._read_catalog(name) is not None

    def get_spec(self, name: str) -> TableSpec:
        found = self._read_catalog(name)
        if found is None:
            raise NotFound(f"table {name!r} does not exist")
        return found[1]

    def drop(self, name: str) -> None:
        def op(conn: sqlite3.Connection) -> None:
            found = _lookup(conn, name)
            if found is None:
                raise NotFound(f"table {name!r} does not exist")
            conn.execute(f"DROP TABLE {_physical(found[0])}")
            conn.execute(f"DELETE FROM {_CATALOG} WHERE id = ?", (found[0],))

        self._admin(op)

    # -- transactions --------------------------------------------------------------------------

    def transact(self, fn: Callable[[TableContext], T]) -> T:
        session = self._session()
        if session.in_txn:
            raise InvalidArgument(f"{self!r}: transact called inside a transaction of this thread")
        ctx = _Context(self, session)
        try:
            with self._transaction(session):
                return fn(ctx)
        finally:
            ctx.open = False

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            sessions = list(self._sessions)
        for session in sessions:
            session.conn.close()

    # -- internals -----------------------------------------------------------------------------

    def _session(self) -> _Session:
        self._check_open()
        session: _Session | None = getattr(self._local, "session", None)
        if session is not None:
            return session
        with self._errors():
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
        session = _Session(conn)
        with self._lock:
            if self._closed:
                conn.close()
                raise Closed(f"{self!r} is closed")
            self._sessions.add(session)
        self._local.session = session
        return session

    def _check_open(self) -> None:
        if self._closed:
            raise Closed(f"{self!r} is closed")

    @contextmanager
    def _transaction(self, session: _Session) -> Iterator[None]:
        with self._errors():
            session.conn.execute("BEGIN IMMEDIATE")
        session.in_txn = True
        try:
            yield
            with self._errors():
                session.conn.execute("COMMIT")
        except BaseException:
            self._rollback(session)
            raise
        finally:
            session.in_txn = False

    def _rollback(self, session: _Session) -> None:
        try:
            if session.conn.in_transaction:
                session.conn.execute("ROLLBACK")
        except sqlite3.Error:
            # The caller's exception is the one worth reporting. A connection that failed to
            # roll back cannot be trusted with the next transaction: drop it (closing a
            # connection rolls back whatever it still holds).
            with suppress(sqlite3.Error):
                session.conn.close()
            if getattr(self._local, "session", None) is session:
                del self._local.session

    def _admin(self, op: Callable[[sqlite3.Connection], T]) -> T:
        session = self._session()
        if session.in_txn:
            with self._errors():
                return op(session.conn)
        with self._transaction(session), self._errors():
            return op(session.conn)

    def _read_catalog(self, name: str) -> tuple[int, TableSpec] | None:
        # A single autocommit SELECT is atomic on its own; no write lock needed.
        session = self._session()
        with self._errors():
            return _lookup(session.conn, name)

    @contextmanager
    def _errors(self, table: str | None = None) -> Iterator[None]:
        """Map sqlite3 errors onto the gnomon error tree (unknown ones propagate unchanged)."""
        try:
            yield
        except sqlite3.Error as e:
            mapped = self._map_error(e, table)
            if mapped is None:
                raise
            raise mapped from e

    def _map_error(self, e: sqlite3.Error, table: str | None) -> GnomonError | None:
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


class _Context:
    def __init__(self, store: SqliteStore, session: _Session) -> None:
        self.store = store
        self.session = session
        self.open = True

    def check_open(self) -> None:
        self.store._check_open()
        if not self.open:
            raise InvalidArgument("a TableContext cannot be used after its transaction ended")

    def table(self, name: str) -> _SqliteTable:
        self.check_open()
        with self.store._errors():
            found = _lookup(self.session.conn, name)
        if found is None:
            raise NotFound(f"table {name!r} does not exist")
        return _SqliteTable(self, found[0], found[1])


class _SqliteTable:
    def __init__(self, ctx: _Context, table_id: int, spec: TableSpec) -> None:
        self._ctx = ctx
        self._spec = spec
        self._table = _physical(table_id)

    @property
    def spec(self) -> TableSpec:
        return self._spec

    def write(self, row: Mapping[str, Any]) -> None:
        spec = self._spec
        spec.check_row(row)
        names = spec.field_names
        params = [normalise_value(spec, n, row.get(n)) for n in names]
        cols = ", ".join(quote_identifier(n) for n in names)
        marks = ", ".join("?" * len(names))
        self._execute(f"INSERT OR REPLACE INTO {self._table} ({cols}) VALUES ({marks})", params)

    def read(self, key: Mapping[str, Any], columns: Sequence[str] | None = None) -> Row | None:
        values = self._spec.check_key(key, full=True)
        cols = self._spec.check_columns(columns)
        params: list[Any] = []
        where = key_eq_sql(_SQLITE, self._spec, values, params)
        rows = self._execute(
            f"SELECT {select_list(_SQLITE, cols)} FROM {self._table} WHERE {where}", params
        )
        return dict(zip(cols, rows[0], strict=False)) if rows else None

    def scan(
        self,
        key_range: KeyRange | None = None,
        *,
        limit: int | None = None,
        filter: Filter | None = None,
        columns: Sequence[str] | None = None,
    ) -> Iterator[Row]:
        params: list[Any] = []
        terms = [] if key_range is None else key_range_sql(_SQLITE, self._spec, key_range, params)
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
        terms = [filter_sql(_SQLITE, self._spec, Eq(field, value), params)]
        return self._select(terms, params, limit, filter, columns)

    def delete(self, key: Mapping[str, Any]) -> bool:
        params: list[Any] = []
        where = key_eq_sql(_SQLITE, self._spec, self._spec.check_key(key, full=True), params)
        return self._change(f"DELETE FROM {self._table} WHERE {where}", params) > 0

    def delete_all(self, prefix: Mapping[str, Any]) -> int:
        params: list[Any] = []
        where = key_eq_sql(_SQLITE, self._spec, self._spec.check_key(prefix, full=False), params)
        return self._change(f"DELETE FROM {self._table} WHERE {where}", params)

    def _select(
        self,
        terms: list[str],
        params: list[Any],
        limit: int | None,
        filter: Filter | None,
        columns: Sequence[str] | None,
    ) -> Iterator[Row]:
        cols = self._spec.check_columns(columns)
        if filter is not None:
            terms.append(filter_sql(_SQLITE, self._spec, filter, params))
        if limit is not None:
            if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
                raise InvalidArgument(f"table {self._spec.name!r}: bad scan limit {limit!r}")
            params.append(limit)
        order = ", ".join(quote_identifier(k) for k in self._spec.primary_key)
        where = " AND ".join(terms) or TRUE
        sql = (
            f"SELECT {select_list(_SQLITE, cols)} FROM {self._table} WHERE {where} "
            f"ORDER BY {order}" + (" LIMIT ?" if limit is not None else "")
        )
        # Fetched eagerly: a lazy cursor would observe the caller's own writes made while
        # iterating, and would outlive the transaction if the iterator escaped it.
        return iter([dict(zip(cols, r, strict=False)) for r in self._execute(sql, params)])

    def _execute(self, sql: str, params: Sequence[Any]) -> list[Any]:
        self._ctx.check_open()
        with self._ctx.store._errors(self._spec.name):
            return self._ctx.session.conn.execute(sql, params).fetchall()

    def _change(self, sql: str, params: Sequence[Any]) -> int:
        self._ctx.check_open()
        with self._ctx.store._errors(self._spec.name):
            return self._ctx.session.conn.execute(sql, params).rowcount
