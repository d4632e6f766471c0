"""PostgreSQL backend of the StructuredTable SPI (:mod:`gnomon.store.api`).

One schema holds a catalog of table specs and one real table per spec (primary key over the key
fields, one B-tree index per indexed field). Every thread gets its own connection; every
transaction runs at SERIALIZABLE isolation, so PostgreSQL itself detects concurrent
transactions that touched the same rows, and its serialization failures and deadlocks become
:class:`~gnomon.errors.Conflict`.
"""

from __future__ import annotations

import json
import re
import threading
import weakref
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from typing import Any, TypeVar

import psycopg
from psycopg.conninfo import conninfo_to_dict

from gnomon.errors import (
    AlreadyExists,
    Closed,
    Conflict,
    GnomonError,
    InvalidArgument,
    NotFound,
    SchemaMismatch,
    TooLarge,
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
    # COLLATE "C" compares UTF-8 bytes, which is code point order, the SPI's order of strings.
    FieldType.STRING: 'text COLLATE "C"',
    FieldType.INT: "integer",
    FieldType.LONG: "bigint",
    # Both float types are doubles, as in SQLite: a float must read back exactly as written.
    FieldType.FLOAT: "double precision",
    FieldType.DOUBLE: "double precision",
    FieldType.BYTES: "bytea",
}

_CASTS = {
    FieldType.STRING: "text",
    FieldType.INT: "integer",
    FieldType.LONG: "bigint",
    FieldType.FLOAT: "double precision",
    FieldType.DOUBLE: "double precision",
    FieldType.BYTES: "bytea",
}

# PostgreSQL truncates longer identifiers (NAMEDATALEN - 1 bytes).
_MAX_IDENTIFIER_BYTES = 63

# Serialization failure, deadlock, lock not available; and a unique key that a concurrent
# transaction inserted first (creates racing on the catalog).
_CONFLICT_STATES = frozenset({"40001", "40P01", "55P03", "23505"})
_UNDEFINED_TABLE = "42P01"
_PROGRAM_LIMIT_CLASS = "54"  # e.g. a key too large for a B-tree entry

# Admin calls outside a transaction are repeated on conflict: serializable DDL and catalog
# writes may lose to unrelated concurrent transactions, which is no reason to fail.
_ADMIN_ATTEMPTS = 16

_ESCAPED = re.compile("\x01[\x01\x02]")


def _escape_text(value: str) -> str:
    # PostgreSQL text cannot hold U+0000. U+0001 becomes U+0001 U+0002 and U+0000 becomes
    # U+0001 U+0001: injective, and order-preserving, since the escape sorts below every other
    # character and its second character keeps U+0000 below U+0001.
    if "\x00" not in value and "\x01" not in value:
        return value
    return value.replace("\x01", "\x01\x02").replace("\x00", "\x01\x01")


def _unescape_text(value: str) -> str:
    if "\x01" not in value:
        return value
    return _ESCAPED.sub(lambda m: "\x00" if m.group()[1] == "\x01" else "\x01", value)


def _quote(name: str) -> str:
    # Every statement is sent with parameters, so psycopg reads "%" as a placeholder.
    return quote_identifier(name).replace("%", "%%")


def _to_param(spec: TableSpec, name: str, value: Any) -> Any:
    value = normalise_value(spec, name, value)
    if value is None:
        return None
    field_type = spec.field(name).type
    if field_type is FieldType.STRING:
        return _escape_text(value)
    if field_type in (FieldType.FLOAT, FieldType.DOUBLE):
        return float(value)
    return value


_POSTGRES = Dialect(
    quote=_quote,
    placeholder=lambda field_type: f"%s::{_CASTS[field_type]}",
    to_param=_to_param,
)


def _from_sql(spec: TableSpec, cols: tuple[str, ...], values: Sequence[Any]) -> Row:
    row: Row = {}
    for name, value in zip(cols, values, strict=False):
        if isinstance(value, str) and spec.field(name).type is FieldType.STRING:
            value = _unescape_text(value)
        row[name] = value
    return row


def _check_postgres_names(spec: TableSpec) -> None:
    """Reject specs that TableSpec accepts but PostgreSQL cannot represent faithfully."""
    try:
        spec.name.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidArgument(f"table {spec.name!r}: the name is not valid Unicode") from None
    for name in spec.field_names:
        if "\x00" in name:
            raise InvalidArgument(f"table {spec.name!r}: field {name!r} contains a NUL character")
        try:
            size = len(name.encode("utf-8"))
        except UnicodeEncodeError:
            raise InvalidArgument(
                f"table {spec.name!r}: field {name!r} is not valid Unicode"
            ) from None
        if size > _MAX_IDENTIFIER_BYTES:
            raise InvalidArgument(
                f"table {spec.name!r}: field {name!r} is longer than PostgreSQL's "
                f"{_MAX_IDENTIFIER_BYTES}-byte identifiers"
            )


def _catalog_name(name: str) -> str | None:
    """A table name as the catalog stores it; None if no table can have it."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return None
    return _escape_text(name)


class _Session:
    """One thread's connection. The thread-local owns it and closes the connection when the
    thread's session is freed; the store only holds it weakly, to close it on ``close()``."""

    __slots__ = ("__weakref__", "conn", "in_txn")

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn
        self.in_txn = False
        weakref.finalize(self, conn.close)


class PostgresStore:
    """A :class:`~gnomon.store.api.StructuredStore` in one schema of a PostgreSQL database.

    ``dsn`` is a libpq connection string or URI; ``schema`` is created if missing, and stores
    with different schemas are independent. Admin operations called outside a transaction are
    each their own transaction; called from inside ``transact`` on the same thread they join
    that transaction and commit or roll back with it. A store must not be carried across
    ``fork``: open a new one in the child.
    """

    def __init__(self, dsn: str, *, schema: str = "gnomon") -> None:
        if not schema or "\x00" in schema or len(schema.encode()) > _MAX_IDENTIFIER_BYTES:
            raise InvalidArgument(f"PostgresStore: bad schema name {schema!r}")
        try:
            info = conninfo_to_dict(dsn)
        except psycopg.ProgrammingError as e:
            raise InvalidArgument(f"PostgresStore: bad dsn: {e}") from None
        self._where = f"{info.get('host') or 'localhost'}:{info.get('port') or 5432}"
        self._dsn = dsn
        # A server that does not answer must become Unavailable, not a hang.
        self._connect_options: dict[str, Any] = (
            {} if "connect_timeout" in info else {"connect_timeout": 10}
        )
        self._schema = schema
        self._catalog = f"{_quote(schema)}.{_quote(_CATALOG)}"
        self._local = threading.local()
        self._sessions: weakref.WeakSet[_Session] = weakref.WeakSet()
        self._lock = threading.Lock()
        self._closed = False
        self._init_schema()

    def __repr__(self) -> str:
        return f"PostgresStore({self._where!r}, schema={self._schema!r})"

    # -- admin ---------------------------------------------------------------------------------

    def create(self, spec: TableSpec, *, if_not_exists: bool = False) -> None:
        _check_postgres_names(spec)

        def op(conn: psycopg.Connection[Any]) -> None:
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
            row = conn.execute(
                f"INSERT INTO {self._catalog} (name, spec) VALUES (%s, %s) RETURNING id",
                [_catalog_name(spec.name), json.dumps(spec.to_json())],
            ).fetchone()
            assert row is not None
            table_id = int(row[0])
            table = self._physical(table_id)
            cols = ", ".join(
                f"{_quote(f.name)} {_SQL_TYPES[f.type]}"
                + (" NOT NULL" if f.name in spec.primary_key else "")
                for f in spec.fields
            )
            pk = ", ".join(_quote(k) for k in spec.primary_key)
            conn.execute(f"CREATE TABLE {table} ({cols}, PRIMARY KEY ({pk}))", [])
            for i, field in enumerate(spec.indexes):
                index = _quote(f"t{table_id}_i{i}")
                conn.execute(f"CREATE INDEX {index} ON {table} ({_quote(field)})", [])

        self._admin(op)

    def exists(self, name: str) -> bool:
        return self._admin(lambda conn: self._lookup(conn, name)) is not None

    def get_spec(self, name: str) -> TableSpec:
        found = self._admin(lambda conn: self._lookup(conn, name))
        if found is None:
            raise NotFound(f"table {name!r} does not exist")
        return found[1]

    def drop(self, name: str) -> None:
        def op(conn: psycopg.Connection[Any]) -> None:
            found = self._lookup(conn, name)
            if found is None:
                raise NotFound(f"table {name!r} does not exist")
            conn.execute(f"DROP TABLE {self._physical(found[0])}", [])
            conn.execute(f"DELETE FROM {self._catalog} WHERE id = %s", [found[0]])

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

    def _physical(self, table_id: int) -> str:
        # Real tables are named by catalog id: spec names may be longer than an identifier or
        # collide with reserved names, and ids are never reused (a sequence hands them out).
        return f"{_quote(self._schema)}.{_quote(f't{table_id}')}"

    def _lookup(self, conn: psycopg.Connection[Any], name: str) -> tuple[int, TableSpec] | None:
        stored = _catalog_name(name)
        if stored is None:
            return None
        row = conn.execute(f"SELECT id, spec FROM {self._catalog} WHERE name = %s", [stored])
        found = row.fetchone()
        if found is None:
            return None
        return int(found[0]), TableSpec.from_json(json.loads(found[1]))

    def _init_schema(self) -> None:
        session = self._session()
        # Concurrent CREATE ... IF NOT EXISTS of the same schema can still collide; a
        # transaction-scoped advisory lock per schema name serialises the stores opening it.
        lock_key = zlib.crc32(f"gnomon.store.postgres:{self._schema}".encode())
        with self._errors(session), session.conn.transaction():
            session.conn.execute("SELECT pg_advisory_xact_lock(%s)", [lock_key])
            session.conn.execute(f"CREATE SCHEMA IF NOT EXISTS {_quote(self._schema)}", [])
            session.conn.execute(
                f"CREATE TABLE IF NOT EXISTS {self._catalog} (id bigserial PRIMARY KEY, "
                'name text COLLATE "C" NOT NULL UNIQUE, spec text NOT NULL)',
                [],
            )

    def _session(self) -> _Session:
        self._check_open()
        session: _Session | None = getattr(self._local, "session", None)
        if session is not None and not session.conn.closed:
            return session
        try:
            # autocommit: transactions are begun and ended explicitly, never implicitly by
            # psycopg, so that each one gets the isolation level it asks for.
            conn = psycopg.connect(self._dsn, autocommit=True, **self._connect_options)
        except psycopg.OperationalError as e:
            raise Unavailable(f"PostgreSQL at {self._where} is unavailable: {e}") from e
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
        with self._errors(session):
            session.conn.execute("BEGIN ISOLATION LEVEL SERIALIZABLE", [])
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

    def _rollback(self, session: _Session) -> None:
        try:
            if not session.conn.closed:
                session.conn.execute("ROLLBACK", [])
        except psycopg.Error:
            # The caller's exception is the one worth reporting. A connection that failed to
            # roll back cannot be trusted with the next transaction: drop it (the server rolls
            # back whatever it still holds).
            self._drop_session(session)

    def _drop_session(self, session: _Session) -> None:
        with suppress(psycopg.Error):
            session.conn.close()
        if getattr(self._local, "session", None) is session:
            del self._local.session

    def _admin(self, op: Callable[[psycopg.Connection[Any]], T]) -> T:
        session = self._session()
        if session.in_txn:
            with self._errors(session):
                return op(session.conn)
        last: Conflict | None = None
        for _ in range(_ADMIN_ATTEMPTS):
            try:
                with self._transaction(session), self._errors(session):
                    return op(session.conn)
            except Conflict as e:
                last = e
                session = self._session()  # a new one if the conflict broke the connection
        assert last is not None
        raise last

    @contextmanager
    def _errors(self, session: _Session, table: str | None = None) -> Iterator[None]:
        """Map psycopg errors onto the gnomon error tree (unknown ones propagate unchanged)."""
        try:
            yield
        except psycopg.Error as e:
            mapped = self._map_error(e, table)
            if isinstance(mapped, Unavailable) or session.conn.broken:
                self._drop_session(session)
            if mapped is None:
                raise
            raise mapped from e

    def _map_error(self, e: psycopg.Error, table: str | None) -> GnomonError | None:
        if self._closed:
            return Closed(f"{self!r} is closed")
        state = e.sqlstate or ""
        if state in _CONFLICT_STATES:
            return Conflict(f"{self!r}: {e}")
        if state == _UNDEFINED_TABLE and table is not None:
            return NotFound(f"table {table!r} was dropped")
        if state.startswith(_PROGRAM_LIMIT_CLASS):
            return TooLarge(f"{self!r}: {e}")
        if isinstance(e, psycopg.OperationalError):
            return Unavailable(f"PostgreSQL at {self._where} is unavailable: {e}")
        return None


class _Context:
    def __init__(self, store: PostgresStore, session: _Session) -> None:
        self.store = store
        self.session = session
        self.open = True

    def check_open(self) -> None:
        self.store._check_open()
        if not self.open:
            raise InvalidArgument("a TableContext cannot be used after its transaction ended")

    def table(self, name: str) -> _PostgresTable:
        self.check_open()
        with self.store._errors(self.session):
            found = self.store._lookup(self.session.conn, name)
        if found is None:
            raise NotFound(f"table {name!r} does not exist")
        return _PostgresTable(self, found[0], found[1])


class _PostgresTable:
    def __init__(self, ctx: _Context, table_id: int, spec: TableSpec) -> None:
        self._ctx = ctx
        self._spec = spec
        self._table = ctx.store._physical(table_id)

    @property
    def spec(self) -> TableSpec:
        return self._spec

    def write(self, row: Mapping[str, Any]) -> None:
        spec = self._spec
        spec.check_row(row)
        names = spec.field_names
        params: list[Any] = []
        marks = ", ".join(_POSTGRES.bind(spec, n, row.get(n), params) for n in names)
        cols = ", ".join(_quote(n) for n in names)
        pk = ", ".join(_quote(k) for k in spec.primary_key)
        rest = [n for n in names if n not in spec.primary_key]
        on_conflict = (
            "DO UPDATE SET " + ", ".join(f"{_quote(n)} = EXCLUDED.{_quote(n)}" for n in rest)
            if rest
            else "DO NOTHING"
        )
        self._change(
            f"INSERT INTO {self._table} ({cols}) VALUES ({marks}) ON CONFLICT ({pk}) {on_conflict}",
            params,
        )

    def read(self, key: Mapping[str, Any], columns: Sequence[str] | None = None) -> Row | None:
        values = self._spec.check_key(key, full=True)
        cols = self._spec.check_columns(columns)
        params: list[Any] = []
        where = key_eq_sql(_POSTGRES, self._spec, values, params)
        rows = self._execute(
            f"SELECT {select_list(_POSTGRES, cols)} FROM {self._table} WHERE {where}", params
        )
        return _from_sql(self._spec, cols, rows[0]) if rows else None

    def scan(
        self,
        key_range: KeyRange | None = None,
        *,
        limit: int | None = None,
        filter: Filter | None = None,
        columns: Sequence[str] | None = None,
    ) -> Iterator[Row]:
        params: list[Any] = []
        terms = [] if key_range is None else key_range_sql(_POSTGRES, self._spec, key_range, params)
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
        terms = [filter_sql(_POSTGRES, self._spec, Eq(field, value), params)]
        return self._select(terms, params, limit, filter, columns)

    def delete(self, key: Mapping[str, Any]) -> bool:
        params: list[Any] = []
        where = key_eq_sql(_POSTGRES, self._spec, self._spec.check_key(key, full=True), params)
        return self._change(f"DELETE FROM {self._table} WHERE {where}", params) > 0

    def delete_all(self, prefix: Mapping[str, Any]) -> int:
        params: list[Any] = []
        where = key_eq_sql(_POSTGRES, self._spec, self._spec.check_key(prefix, full=False), params)
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
            terms.append(filter_sql(_POSTGRES, self._spec, filter, params))
        if limit is not None:
            if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
                raise InvalidArgument(f"table {self._spec.name!r}: bad scan limit {limit!r}")
            params.append(limit)
        order = ", ".join(_quote(k) for k in self._spec.primary_key)
        where = " AND ".join(terms) or TRUE
        sql = (
            f"SELECT {select_list(_POSTGRES, cols)} FROM {self._table} WHERE {where} "
            f"ORDER BY {order}" + (" LIMIT %s" if limit is not None else "")
        )
        # Fetched eagerly: a lazy cursor would outlive the transaction if the iterator escaped
        # it, and the caller's own writes made while iterating must not show up.
        return iter([_from_sql(self._spec, cols, r) for r in self._execute(sql, params)])

    def _execute(self, sql: str, params: Sequence[Any]) -> list[Any]:
        self._ctx.check_open()
        with self._ctx.store._errors(self._ctx.session, self._spec.name):
            return self._ctx.session.conn.execute(sql, params).fetchall()

    def _change(self, sql: str, params: Sequence[Any]) -> int:
        self._ctx.check_open()
        with self._ctx.store._errors(self._ctx.session, self._spec.name):
            return self._ctx.session.conn.execute(sql, params).rowcount
