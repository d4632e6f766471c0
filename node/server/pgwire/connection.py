"""One client connection: startup (TLS, authentication), then the simple and extended
query protocols until the client leaves. Statements run on a worker thread, as the
connection's principal and under the server's query limits, through the same executor as
HTTP ``/sql``."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import ssl
import struct
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

import pyarrow as pa

from gnomon.errors import GnomonError, InvalidArgument, Unauthenticated
from node.security import scram
from node.security.authn import Authenticates, basic
from node.security.context import acting_as
from node.security.principal import Principal
from node.server.pgwire import (
    catalog,
    cursors,
    dialect,
    messages,
    params,
    sqlstate,
    statements,
    types,
)
from node.server.pgwire.portals import Portal, Prepared
from node.sql.cancel import CancelToken, Queries
from node.sql.pg_functions import PARAMETERS
from node.sql.result import QueryResult

log = logging.getLogger("gnomon.pgwire")

T = TypeVar("T")

#: Authentication message codes: done; the password asked in cleartext (answered in a
#: 'p'); the SASL mechanisms offered, each step's server message, the last one.
AUTH_OK = 0
AUTH_CLEARTEXT = 3
AUTH_SASL = 10
AUTH_SASL_CONTINUE = 11
AUTH_SASL_FINAL = 12


class Cancels(Protocol):
    """Where connections register so a CancelRequest naming their key finds them."""

    def register(self, conn: Connection) -> None: ...

    def unregister(self, conn: Connection) -> None: ...

    def cancel(self, pid: int, secret: int) -> None: ...


class Connection:
    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        execute: Callable[[str], QueryResult],
        queries: Queries,
        authenticator: Authenticates | None,
        tls: ssl.SSLContext | None,
        cancels: Cancels,
    ) -> None:
        self.reader = reader
        self.writer = writer
        self.execute = execute
        self.queries = queries
        self.authenticator = authenticator
        self.tls = tls
        self.cancels = cancels
        self.pid = secrets.randbits(31)
        self.secret = secrets.randbits(31)
        self.user = ""
        self.principal: Principal | None = None
        self.token: CancelToken | None = None
        self.statements: dict[str, Prepared] = {}
        self.portals: dict[str, Portal] = {}
        self.in_transaction = False
        self._out: list[bytes] = []

    # -- framing ---------------------------------------------------------------------------------

    def send(self, *frames: bytes) -> None:
        self._out.extend(frames)

    async def flush(self) -> None:
        if self._out:
            self.writer.write(b"".join(self._out))
            self._out.clear()
        await self.writer.drain()

    async def _read_body(self, length: int, most: int) -> bytes:
        if not 4 <= length <= most:
            raise messages.ProtocolViolation(f"invalid message length {length}")
        return await self.reader.readexactly(length - 4)

    # -- startup ---------------------------------------------------------------------------------

    async def serve(self) -> None:
        try:
            if await self._startup():
                self.cancels.register(self)
                try:
                    await self._messages()
                finally:
                    self.cancels.unregister(self)
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
            pass
        except messages.ProtocolViolation as e:
            self.send(messages.error(sqlstate.PROTOCOL_VIOLATION, e.message, severity="FATAL"))
            await self._flush_quietly()
        finally:
            self.writer.close()

    async def _flush_quietly(self) -> None:
        with contextlib.suppress(ConnectionError, ssl.SSLError):
            await self.flush()

    async def _startup(self) -> bool:
        """Negotiate TLS and authenticate; False when the connection ends here (a cancel
        request, refused credentials)."""
        while True:
            length = struct.unpack(">i", await self.reader.readexactly(4))[0]
            body = messages.Reader(await self._read_body(length, messages.MAX_STARTUP_BYTES))
            code = body.int32()
            if code == messages.SSL_REQUEST:
                if self.tls is None or self.writer.get_extra_info("ssl_object") is not None:
                    self.writer.write(b"N")
                    await self.writer.drain()
                    continue
                self.writer.write(b"S")
                await self.writer.drain()
                await self.writer.start_tls(self.tls)
                continue
            if code == messages.GSSENC_REQUEST:
                self.writer.write(b"N")
                await self.writer.drain()
                continue
            if code == messages.CANCEL_REQUEST:
                self.cancels.cancel(body.int32(), body.int32())
                return False
            if code != messages.PROTOCOL_3:
                raise messages.ProtocolViolation(
                    f"unsupported frontend protocol {code >> 16}.{code & 0xFFFF}: gnomon speaks 3.0"
                )
            params = {}
            while True:
                key = body.cstr()
                if not key:
                    break
                params[key] = body.cstr()
            self.user = params.get("user", "")
            return await self._authenticate()

    async def _authenticate(self) -> bool:
        authenticator = self.authenticator
        if authenticator is not None:
            # The StartupMessage named the user, so its account picks the method.
            verifier = await asyncio.to_thread(authenticator.scram_verifier, self.user)
            if verifier is None:
                principal = await self._cleartext(authenticator)
            else:
                principal = await self._scram(authenticator, verifier)
            if principal is None:
                return False
            self.principal = principal
        self.send(messages.authentication(AUTH_OK))
        for name, value in PARAMETERS.items():
            self.send(messages.parameter_status(name, value))
        self.send(messages.backend_key(self.pid, self.secret), self._ready())
        await self.flush()
        return True

    async def _scram(
        self, authenticator: Authenticates, verifier: scram.Verifier
    ) -> Principal | None:
        exchange = scram.ServerExchange(verifier)
        self.send(messages.authentication(AUTH_SASL, messages.cstr(scram.MECHANISM) + b"\x00"))
        await self.flush()
        try:
            initial = await self._password_message()
            mechanism, first = initial.cstr(), initial.value()
            if mechanism != scram.MECHANISM:
                raise InvalidArgument(
                    f"SASL mechanism {mechanism!r} was not offered: {scram.MECHANISM} was"
                )
            if first is None:
                raise InvalidArgument("SASLInitialResponse without the client-first-message")
            self.send(messages.authentication(AUTH_SASL_CONTINUE, exchange.first(first)))
            await self.flush()
            final = exchange.final((await self._password_message()).rest())
            principal = await asyncio.to_thread(authenticator.scram_principal, self.user)
        except Unauthenticated:
            await self._refuse_password()
            return None
        except InvalidArgument as e:
            raise messages.ProtocolViolation(e.message) from None
        self.send(messages.authentication(AUTH_SASL_FINAL, final))
        return principal

    async def _cleartext(self, authenticator: Authenticates) -> Principal | None:
        if self.tls is not None and self.writer.get_extra_info("ssl_object") is None:
            # A server with a certificate takes passwords over TLS only.
            await self._refuse(
                sqlstate.INVALID_AUTHORIZATION,
                "this server takes passwords over TLS only: connect with sslmode=require "
                "(or verify-full); the account has no SCRAM-SHA-256 verifier, which setting "
                "its password again makes",
            )
            return None
        self.send(messages.authentication(AUTH_CLEARTEXT))
        await self.flush()
        password = (await self._password_message()).cstr()
        try:
            return await asyncio.to_thread(authenticator.authenticate, basic(self.user, password))
        except Unauthenticated:
            await self._refuse_password()
            return None

    async def _password_message(self) -> messages.Reader:
        """The body of the client's next message, a 'p' (every answer to an authentication
        request is one)."""
        kind = await self.reader.readexactly(1)
        length = struct.unpack(">i", await self.reader.readexactly(4))[0]
        body = messages.Reader(await self._read_body(length, messages.MAX_STARTUP_BYTES))
        if kind != b"p":
            raise messages.ProtocolViolation(f"expected a password message, got {kind!r}")
        return body

    async def _refuse_password(self) -> None:
        # The same words whatever was wrong: an unknown user reads as a wrong password.
        await self._refuse(
            sqlstate.INVALID_PASSWORD, f'password authentication failed for user "{self.user}"'
        )

    async def _refuse(self, code: str, text: str) -> None:
        self.send(messages.error(code, text, severity="FATAL"))
        await self.flush()

    def _ready(self) -> bytes:
        return messages.ready(b"T" if self.in_transaction else b"I")

    # -- messages --------------------------------------------------------------------------------

    async def _messages(self) -> None:
        skipping = False  # after an error in the extended protocol, until Sync
        while True:
            head = await self.reader.readexactly(5)
            kind, length = head[:1], struct.unpack(">i", head[1:])[0]
            body = messages.Reader(await self._read_body(length, messages.MAX_MESSAGE_BYTES))
            if kind == b"X":
                return
            if kind == b"S":
                skipping = False
                # The unnamed portal's rows are not kept past the exchange that made them.
                self.portals.pop("", None)
                self.send(self._ready())
                await self.flush()
                continue
            if kind == b"Q":
                await self._simple(body.cstr())
                self.send(self._ready())
                await self.flush()
                continue
            if skipping:
                continue
            try:
                await self._extended(kind, body)
            except Exception as e:  # every failure is answered: see _failure
                failure = _failure(e)
                self.send(messages.error(sqlstate.sqlstate(failure), failure.message))
                skipping = True
                # Sent now, as PostgreSQL sends it: a client that asked with Flush (asyncpg
                # prepares so) waits for it before its Sync, which skipping would not see.
                await self.flush()
            if kind == b"H":
                await self.flush()

    async def _simple(self, text: str) -> None:
        parts = statements.split(text)
        if not parts:
            self.send(messages.EMPTY_QUERY)
            return
        for sql in parts:
            portal = Portal(sql)
            try:
                await self._run(portal)
                if portal.rows is not None:
                    self.send(portal.description(), *portal.take(0))
            except Exception as e:  # every failure is answered: see _failure
                failure = _failure(e)
                self.send(
                    messages.error(
                        sqlstate.sqlstate(failure),
                        failure.message,
                        sqlstate.position(failure.message, sql),
                    )
                )
                return
            assert portal.tag is not None
            self.send(messages.command_complete(portal.tag))

    async def _extended(self, kind: bytes, body: messages.Reader) -> None:
        if kind == b"P":
            name, sql = body.cstr(), body.cstr()
            param_types = [body.int32() for _ in range(body.int16())]
            param_types += [types.UNKNOWN] * (statements.count_params(sql) - len(param_types))
            self.statements[name] = Prepared(sql, param_types)
            self.send(messages.PARSE_COMPLETE)
        elif kind == b"B":
            self._bind(body)
        elif kind == b"D":
            what, name = body.byte(), body.cstr()
            if what == b"S":
                await self._describe_statement(self._statement(name))
            else:
                portal = self._portal(name)
                await self._run(portal)
                self.send(portal.description())
        elif kind == b"E":
            portal = self._portal(body.cstr())
            most = body.int32()
            await self._run(portal)
            self.send(*portal.take(most))
            if most > 0 and not portal.exhausted:
                self.send(messages.PORTAL_SUSPENDED)
            else:
                assert portal.tag is not None
                self.send(messages.command_complete(portal.tag))
        elif kind == b"C":
            what, name = body.byte(), body.cstr()
            (self.statements if what == b"S" else self.portals).pop(name, None)  # type: ignore[attr-defined]
            self.send(messages.CLOSE_COMPLETE)
        elif kind != b"H":
            raise messages.ProtocolViolation(f"unexpected message type {kind!r}")

    def _statement(self, name: str) -> Prepared:
        found = self.statements.get(name)
        if found is None:
            raise _Missing(
                sqlstate.INVALID_STATEMENT, f'prepared statement "{name}" does not exist'
            )
        return found

    def _portal(self, name: str) -> Portal:
        found = self.portals.get(name)
        if found is None:
            raise _Missing(sqlstate.INVALID_CURSOR, f'portal "{name}" does not exist')
        return found

    def _bind(self, body: messages.Reader) -> None:
        portal, name = body.cstr(), body.cstr()
        statement = self._statement(name)
        formats = [body.int16() for _ in range(body.int16())]
        values = [body.value() for _ in range(body.int16())]
        results = [body.int16() for _ in range(body.int16())]
        if len(values) != len(statement.param_types):
            raise InvalidArgument(
                f"bind message supplies {len(values)} parameters, but prepared statement "
                f'"{name}" requires {len(statement.param_types)}'
            )

        def literal(i: int) -> str:
            binary = bool(formats) and (formats[0] if len(formats) == 1 else formats[i]) == 1
            return types.literal(values[i], statement.param_types[i], binary)

        self.portals[portal] = Portal(statements.substitute(statement.sql, literal), results)
        self.send(messages.BIND_COMPLETE)

    async def _describe_statement(self, statement: Prepared) -> None:
        if types.UNKNOWN in statement.param_types:
            columns = await asyncio.to_thread(
                self._as_principal, params.column_types, statement.sql, self._describe_table
            )
            statement.param_types = params.infer(statement.sql, statement.param_types, columns)
        if not statements.answers_rows(statement.sql):
            self.send(messages.parameter_description(statement.param_types), messages.NO_DATA)
            return
        # The columns are known once it runs: it runs with every parameter NULL. Nothing is
        # sent before it has: a statement that fails to plan answers with the error alone,
        # as PostgreSQL's does (a driver such as asyncpg waits for nothing else after it).
        portal = Portal(statements.substitute(statement.sql, lambda _: "NULL"))
        await self._run(portal)
        self.send(messages.parameter_description(statement.param_types), portal.description())

    # -- running ---------------------------------------------------------------------------------

    async def _run(self, portal: Portal) -> None:
        if portal.ran:
            return
        await self.flush()
        cursor = cursors.parse(portal.sql)
        if cursor is None:
            tag, rows = await asyncio.to_thread(self._answer, portal.sql)
        else:
            tag, rows = await self._cursor(cursor)
        portal.tag, portal.rows = tag, rows
        if tag == "BEGIN":
            self.in_transaction = True
        elif tag in ("COMMIT", "ROLLBACK"):
            self.in_transaction = False

    async def _cursor(
        self, cursor: cursors.Declare | cursors.Fetch | cursors.CloseCursor
    ) -> tuple[str, pa.Table | None]:
        if isinstance(cursor, cursors.Declare):
            declared = Portal(cursor.query)
            await self._run(declared)
            self.portals[cursor.name] = declared
            return "DECLARE CURSOR", None
        if isinstance(cursor, cursors.CloseCursor):
            if cursor.name is None:
                self.portals.clear()
            else:
                self.portals.pop(cursor.name, None)
            return "CLOSE CURSOR", None
        rows = self._portal(cursor.name).fetch(cursor.count)
        if cursor.move:
            return f"MOVE {rows.num_rows}", None
        return f"FETCH {rows.num_rows}", rows

    def _as_principal(self, fn: Callable[..., T], *args: Any) -> T:
        with acting_as(self.principal):
            return fn(*args)

    def _describe_table(self, table: str) -> list[dict[str, object]]:
        try:
            return self.execute(f'DESCRIBE "{table}"').table().to_pylist()  # type: ignore[no-any-return]
        except GnomonError:
            return []  # not a table (a CTE's name), or not one the user may see

    def _answer(self, sql: str) -> tuple[str, pa.Table | None]:
        # The catalog's answers run statements too (SHOW TABLES, DESCRIBE): under the
        # same limits.
        with acting_as(self.principal), self.queries.running() as token:
            self.token = token
            try:
                local = catalog.answer(sql, self.user, self._engine)
                if local is not None:
                    return local.tag, local.rows
                result = self._engine(sql)
            finally:
                self.token = None
        rows = result.answer
        return statements.tag(
            sql, result.affected_rows, None if rows is None else rows.num_rows
        ), rows

    def _engine(self, sql: str) -> QueryResult:
        return self.execute(dialect.translate(sql, self.user, self._rows))

    def _rows(self, sql: str) -> pa.Table:
        answer = self.execute(sql).answer
        return pa.table({}) if answer is None else answer

    def cancel(self) -> None:
        token = self.token
        if token is not None:
            token.cancel("canceling statement due to user request")


def _failure(e: Exception) -> GnomonError:
    """``e`` as the error a client is answered: gnomon's own as it is; anything else is a
    fault of the server, logged, and answered as internal (the connection stays usable)."""
    if isinstance(e, GnomonError):
        return e
    log.exception("PostgreSQL protocol message failed")
    return GnomonError(f"internal error: {e}")


class _Missing(GnomonError):
    """A statement or portal the client never made (or closed)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.pg_code = code
