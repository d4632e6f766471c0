"""The store side shared by the SQL backends of the StructuredTable SPI (SQLite, PostgreSQL).

A catalog table maps each spec name to an id and the spec's JSON; each spec is one real table
``t<id>`` with a primary key over the key fields and an index ``t<id>_i<n>`` per indexed field.
Every thread gets its own connection (a :class:`Session`); transactions run on it, and their
:class:`SqlContext` hands out :class:`~gnomon.store.sqltable.SqlTable`. :class:`SqlStore` holds
this flow; a backend subclasses it with what its database does its own way: connecting, the
statement that begins a transaction, mapping the driver's errors, and how a new table's catalog
row gets its id.
"""

from __future__ import annotations

import json
import threading
import weakref
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from gnomon.errors import (
    AlreadyExists,
    Closed,
    Conflict,
    GnomonError,
    InvalidArgument,
    NotFound,
    SchemaMismatch,
)
from gnomon.store.api import TableContext
from gnomon.store.spec import FieldType, TableSpec
from gnomon.store.sqltable import SqlTable, TableDialect

T = TypeVar("T")

CATALOG = "gnomon_catalog"


class Cursor(Protocol):
    """What the stores use of a DB-API cursor (sqlite3's and psycopg's alike)."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class Connection(Protocol):
    """What the stores use of a DB-API connection (sqlite3's and psycopg's alike)."""

    def execute(self, sql: str, params: Sequence[Any], /) -> Cursor: ...

    def close(self) -> None: ...


C = TypeVar("C", bound=Connection)


class Session(Generic[C]):
    """One thread's connection. The thread-local owns it and closes the connection when the
    thread's session is freed; the store only holds it weakly, to close it on ``close()``."""

    __slots__ = ("__weakref__", "conn", "in_txn")

    def __init__(self, conn: C) -> None:
        self.conn = conn
        self.in_txn = False
        weakref.finalize(self, conn.close)


class SqlStore(ABC, Generic[C]):
    """A :class:`~gnomon.store.api.StructuredStore` on a SQL database.

    ``prefix`` qualifies the store's tables (a quoted schema and a dot, or nothing); ``types``
    is the column type of each field type and ``table_options`` ends every CREATE TABLE. Admin
    operations called outside a transaction are each their own transaction (tried up to
    ``admin_attempts`` times on conflicts); called from inside ``transact`` on the same thread
    they join that transaction and commit or roll back with it.
    """

    #: The driver's root exception; what ``_errors`` maps.
    driver_error: ClassVar[type[Exception]]
    #: Starts a transaction at the isolation the backend's conflict detection relies on.
    begin: ClassVar[str]

    def __init__(
        self,
        dialect: TableDialect,
        *,
        prefix: str,
        types: Mapping[FieldType, str],
        table_options: str = "",
        admin_attempts: int = 1,
    ) -> None:
        self.dialect = dialect
        self._prefix = prefix
        self._catalog = prefix + dialect.quote(CATALOG)
        self._types = types
        self._table_options = table_options
        self._admin_attempts = admin_attempts
        self._local = threading.local()
        self._sessions: weakref.WeakSet[Session[C]] = weakref.WeakSet()
        self._lock = threading.Lock()
        self._closed = False

    # -- what the backend supplies -------------------------------------------------------------

    @abstractmethod
    def _connect(self) -> C:
        """A new connection, in autocommit mode: transactions are begun and ended explicitly."""

    @abstractmethod
    def _map_error(
        self, e: Exception, session: Session[C] | None, table: str | None
    ) -> GnomonError | None:
        """What a driver error becomes (None: it propagates unchanged); ``table`` names the
        table a statement ran on. May drop a session the error broke."""

    @abstractmethod
    def _insert_catalog(self, conn: C, name: str, spec_json: str) -> int:
        """Insert a catalog row; its id."""

    def _check_names(self, spec: TableSpec) -> None:
        """Reject a spec that TableSpec accepts but the database cannot represent."""

    def _catalog_name(self, name: str) -> str | None:
        """A table name as the catalog stores it; None if no table can have it."""
        return name

    def _alive(self, conn: C) -> bool:
        """Whether a thread's connection can serve its next transaction."""
        return True

    def _in_transaction(self, conn: C) -> bool:
        """Whether a failed transaction may have left something to roll back."""
        return True

    def _read_catalog(self, name: str) -> tuple[int, TableSpec] | None:
        """The catalog row of ``name`` for ``exists`` and ``get_spec``."""
        return self._admin(lambda conn: self._lookup(conn, name))

    # -- admin ---------------------------------------------------------------------------------

    def create(self, spec: TableSpec, *, if_not_exists: bool = False) -> None:
        self._check_names(spec)

        def op(conn: C) -> None:
            found = self._lookup(conn, spec.name)
            if found is not None:
                if not if_not_exists:
                    raise AlreadyExists(f"table {spec.name!r} already exists")
                if found[1] != spec:
                    raise SchemaMismatch(
                        f"table {spec.name!r} exists with spec {found[1].to_json()}, "
                        f"not {spec.to_json()}"
                    )
                return
            stored = self._catalog_name(spec.name)
            assert stored is not None  # _check_names refused every name without one
            table_id = self._insert_catalog(conn, stored, json.dumps(spec.to_json()))
            for statement in self._create_table_sql(table_id, spec):
                conn.execute(statement, [])

        self._admin(op)

    def exists(self, name: str) -> bool:
        return self._read_catalog(name) is not None

    def get_spec(self, name: str) -> TableSpec:
        found = self._read_catalog(name)
        if found is None:
            raise NotFound(f"table {name!r} does not exist")
        return found[1]

    def drop(self, name: str) -> None:
        def op(conn: C) -> None:
            found = self._lookup(conn, name)
            if found is None:
                raise NotFound(f"table {name!r} does not exist")
            conn.execute(f"DROP TABLE {self._physical(found[0])}", [])
            conn.execute(
                f"DELETE FROM {self._catalog} WHERE id = {self.dialect.marker}", [found[0]]
            )

        self._admin(op)

    # -- transactions --------------------------------------------------------------------------

    def transact(self, fn: Callable[[TableContext], T]) -> T:
        session = self._session()
        if session.in_txn:
            raise InvalidArgument(f"{self!r}: transact called inside a transaction of this thread")
        ctx = SqlContext(self, session)
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

    def _physical(self, table_id: int) -> str:
        # Real tables are named by catalog id, not by spec name: spec names may differ only in
        # case, be longer than an identifier or collide with reserved names. Ids are never
        # reused, so a stale id cannot address a newer table.
        return self._prefix + self.dialect.quote(f"t{table_id}")

    def _create_table_sql(self, table_id: int, spec: TableSpec) -> list[str]:
        quote, table = self.dialect.quote, self._physical(table_id)
        cols = ", ".join(
            f"{quote(f.name)} {self._types[f.type]}"
            + (" NOT NULL" if f.name in spec.primary_key else "")
            for f in spec.fields
        )
        pk = ", ".join(quote(k) for k in spec.primary_key)
        return [f"CREATE TABLE {table} ({cols}, PRIMARY KEY ({pk})){self._table_options}"] + [
            f"CREATE INDEX {quote(f't{table_id}_i{i}')} ON {table} ({quote(field)})"
            for i, field in enumerate(spec.indexes)
        ]

    def _lookup(self, conn: C, name: str) -> tuple[int, TableSpec] | None:
        stored = self._catalog_name(name)
        if stored is None:
            return None
        row = conn.execute(
            f"SELECT id, spec FROM {self._catalog} WHERE name = {self.dialect.marker}", [stored]
        ).fetchone()
        if row is None:
            return None
        return int(row[0]), TableSpec.from_json(json.loads(row[1]))

    def _session(self) -> Session[C]:
        self._check_open()
        session: Session[C] | None = getattr(self._local, "session", None)
        if session is not None and self._alive(session.conn):
            return session
        session = Session(self._connect())
        with self._lock:
            if self._closed:
                session.conn.close()
                raise Closed(f"{self!r} is closed")
            self._sessions.add(session)
        self._local.session = session
        return session

    def _check_open(self) -> None:
        if self._closed:
            raise Closed(f"{self!r} is closed")

    @contextmanager
    def _transaction(self, session: Session[C]) -> Iterator[None]:
        with self._errors(session):
            session.conn.execute(self.begin, [])
        session.in_txn = True
        try:
            yield
            with self._errors(session):
                session.conn.execute("COMMIT", [])
        except BaseException:
            self._rollback(session)
            raise
        finally:
            session.in_txn = False

    def _rollback(self, session: Session[C]) -> None:
        try:
            if self._in_transaction(session.conn):
                session.conn.execute("ROLLBACK", [])
        except self.driver_error:
            # The caller's exception is the one worth reporting. A connection that failed to
            # roll back cannot be trusted with the next transaction: drop it (closing it rolls
            # back whatever it still holds).
            self._drop_session(session)

    def _drop_session(self, session: Session[C]) -> None:
        with suppress(self.driver_error):
            session.conn.close()
        if getattr(self._local, "session", None) is session:
            del self._local.session

    def _admin(self, op: Callable[[C], T]) -> T:
        session = self._session()
        if session.in_txn:
            with self._errors(session):
                return op(session.conn)
        attempt = 1
        while True:
            try:
                with self._transaction(session), self._errors(session):
                    return op(session.conn)
            except Conflict:
                if attempt >= self._admin_attempts:
                    raise
                attempt += 1
                session = self._session()  # a new one if the conflict broke the connection

    @contextmanager
    def _errors(self, session: Session[C] | None, table: str | None = None) -> Iterator[None]:
        """Map driver errors onto the gnomon error tree (unknown ones propagate unchanged)."""
        try:
            yield
        except self.driver_error as e:
            mapped = self._map_error(e, session, table)
            if mapped is None:
                raise
            raise mapped from e


class SqlContext(Generic[C]):
    """The :class:`~gnomon.store.api.TableContext` of one transaction; also the
    :class:`~gnomon.store.sqltable.Statements` of its tables."""

    def __init__(self, store: SqlStore[C], session: Session[C]) -> None:
        self.store = store
        self.session = session
        self.open = True

    def check_open(self) -> None:
        self.store._check_open()
        if not self.open:
            raise InvalidArgument("a TableContext cannot be used after its transaction ended")

    def table(self, name: str) -> SqlTable:
        self.check_open()
        with self.store._errors(self.session):
            found = self.store._lookup(self.session.conn, name)
        if found is None:
            raise NotFound(f"table {name!r} does not exist")
        return SqlTable(self, self.store.dialect, self.store._physical(found[0]), found[1])

    def fetch(self, sql: str, params: Sequence[Any], table: str) -> list[Any]:
        self.check_open()
        with self.store._errors(self.session, table):
            return self.session.conn.execute(sql, params).fetchall()

    def change(self, sql: str, params: Sequence[Any], table: str) -> int:
        self.check_open()
        with self.store._errors(self.session, table):
            return self.session.conn.execute(sql, params).rowcount
