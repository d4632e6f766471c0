"""PostgreSQL backend of the StructuredTable SPI (:mod:`gnomon.store.api`).

One schema holds a catalog of table specs and one real table per spec (primary key over the key
fields, one B-tree index per indexed field). Every thread gets its own connection; every
transaction runs at SERIALIZABLE isolation, so PostgreSQL itself detects concurrent
transactions that touched the same rows, and its serialization failures and deadlocks become
:class:`~gnomon.errors.Conflict`.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict

from gnomon.errors import (
    Closed,
    Conflict,
    GnomonError,
    InvalidArgument,
    NotFound,
    TooLarge,
    Unavailable,
)
from gnomon.store.api import Row
from gnomon.store.spec import FieldType, TableSpec
from gnomon.store.sqlfilter import normalise_value, quote_identifier
from gnomon.store.sqlstore import Session, SqlStore
from gnomon.store.sqltable import TableDialect

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


def _upsert(table: str, spec: TableSpec, cols: str, marks: str) -> str:
    pk = ", ".join(_quote(k) for k in spec.primary_key)
    rest = [n for n in spec.field_names if n not in spec.primary_key]
    on_conflict = (
        "DO UPDATE SET " + ", ".join(f"{_quote(n)} = EXCLUDED.{_quote(n)}" for n in rest)
        if rest
        else "DO NOTHING"
    )
    return f"INSERT INTO {table} ({cols}) VALUES ({marks}) ON CONFLICT ({pk}) {on_conflict}"


def _from_sql(spec: TableSpec, cols: tuple[str, ...], values: Sequence[Any]) -> Row:
    row: Row = {}
    for name, value in zip(cols, values, strict=False):
        if isinstance(value, str) and spec.field(name).type is FieldType.STRING:
            value = _unescape_text(value)
        row[name] = value
    return row


_POSTGRES = TableDialect(
    quote=_quote,
    placeholder=lambda field_type: f"%s::{_CASTS[field_type]}",
    to_param=_to_param,
    marker="%s",
    upsert=_upsert,
    from_sql=_from_sql,
)


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


class PostgresStore(SqlStore[psycopg.Connection[Any]]):
    """A :class:`~gnomon.store.api.StructuredStore` in one schema of a PostgreSQL database.

    ``dsn`` is a libpq connection string or URI; ``schema`` is created if missing, and stores
    with different schemas are independent. Admin operations called outside a transaction are
    each their own transaction; called from inside ``transact`` on the same thread they join
    that transaction and commit or roll back with it. A store must not be carried across
    ``fork``: open a new one in the child.
    """

    driver_error = psycopg.Error
    begin = "BEGIN ISOLATION LEVEL SERIALIZABLE"

    def __init__(self, dsn: str, *, schema: str = "gnomon") -> None:
        if not schema or "\x00" in schema or len(schema.encode()) > _MAX_IDENTIFIER_BYTES:
            raise InvalidArgument(f"PostgresStore: bad schema name {schema!r}")
        try:
            info = conninfo_to_dict(dsn)
        except psycopg.ProgrammingError as e:
            raise InvalidArgument(f"PostgresStore: bad dsn: {e}") from None
        super().__init__(
            _POSTGRES,
            prefix=f"{_quote(schema)}.",
            types=_SQL_TYPES,
            admin_attempts=_ADMIN_ATTEMPTS,
        )
        self._where = f"{info.get('host') or 'localhost'}:{info.get('port') or 5432}"
        self._dsn = dsn
        # A server that does not answer must become Unavailable, not a hang.
        self._connect_options: dict[str, Any] = (
            {} if "connect_timeout" in info else {"connect_timeout": 10}
        )
        self._schema = schema
        self._init_schema()

    def __repr__(self) -> str:
        return f"PostgresStore({self._where!r}, schema={self._schema!r})"

    def _check_names(self, spec: TableSpec) -> None:
        _check_postgres_names(spec)

    def _catalog_name(self, name: str) -> str | None:
        try:
            name.encode("utf-8")
        except UnicodeEncodeError:
            return None
        return _escape_text(name)

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

    def _connect(self) -> psycopg.Connection[Any]:
        try:
            return psycopg.connect(self._dsn, autocommit=True, **self._connect_options)
        except psycopg.OperationalError as e:
            raise Unavailable(f"PostgreSQL at {self._where} is unavailable: {e}") from e

    def _alive(self, conn: psycopg.Connection[Any]) -> bool:
        return not conn.closed

    def _in_transaction(self, conn: psycopg.Connection[Any]) -> bool:
        return not conn.closed

    def _insert_catalog(self, conn: psycopg.Connection[Any], name: str, spec_json: str) -> int:
        # A sequence hands out the ids: they are never reused.
        row = conn.execute(
            f"INSERT INTO {self._catalog} (name, spec) VALUES (%s, %s) RETURNING id",
            [name, spec_json],
        ).fetchone()
        assert row is not None
        return int(row[0])

    def _map_error(
        self, e: Exception, session: Session[psycopg.Connection[Any]] | None, table: str | None
    ) -> GnomonError | None:
        mapped = self._mapped(e, table)
        if session is not None and (isinstance(mapped, Unavailable) or session.conn.broken):
            self._drop_session(session)
        return mapped

    def _mapped(self, e: Exception, table: str | None) -> GnomonError | None:
        if self._closed:
            return Closed(f"{self!r} is closed")
        state = getattr(e, "sqlstate", None) or ""
        if state in _CONFLICT_STATES:
            return Conflict(f"{self!r}: {e}")
        if state == _UNDEFINED_TABLE and table is not None:
            return NotFound(f"table {table!r} was dropped")
        if state.startswith(_PROGRAM_LIMIT_CLASS):
            return TooLarge(f"{self!r}: {e}")
        if isinstance(e, psycopg.OperationalError):
            return Unavailable(f"PostgreSQL at {self._where} is unavailable: {e}")
        return None
