"""The PostgreSQL protocol server: an asyncio loop on a thread of its own, accepting
connections on the bind address and ``pg_port``."""

from __future__ import annotations

import asyncio
import logging
import ssl
import threading
from collections.abc import Callable

from node.security.authn import Authenticates
from node.server.listen import listen_error
from node.server.pgwire.connection import Connection
from node.sql.cancel import Queries
from node.sql.result import QueryResult

log = logging.getLogger("gnomon.pgwire")


class PgServer:
    """Serves ``execute`` (the executor HTTP ``/sql`` runs) to PostgreSQL clients.
    ``start`` returns the port listened on; ``stop`` closes the listener and the
    connections, giving statements running ``grace_s`` to finish."""

    def __init__(
        self,
        execute: Callable[[str], QueryResult],
        queries: Queries,
        *,
        bind: str,
        port: int,
        authenticator: Authenticates | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.execute = execute
        self.queries = queries
        self.bind = bind
        self.port = port
        self.authenticator = authenticator
        self.tls = tls
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="gnomon-pgwire", daemon=True
        )
        self._server: asyncio.Server | None = None
        self._connections: dict[int, Connection] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def start(self) -> int:
        self._thread.start()
        try:
            self._server = asyncio.run_coroutine_threadsafe(
                asyncio.start_server(self._accept, self.bind, self.port), self._loop
            ).result()
        except OSError as e:
            self._halt()
            raise listen_error("PostgreSQL", self.bind, self.port, "pg_port", e) from None
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    def stop(self, grace_s: float) -> None:
        if self._server is None:
            return
        server, self._server = self._server, None

        async def close() -> None:
            server.close()
            # Connections wait for their client's next message: closed at once; the
            # statements they run are the query limits' to cancel.
            for task in self._tasks:
                task.cancel()
            if self._tasks:
                await asyncio.wait(self._tasks, timeout=grace_s)

        asyncio.run_coroutine_threadsafe(close(), self._loop).result()
        self._halt()

    def _halt(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = Connection(
            reader,
            writer,
            execute=self.execute,
            queries=self.queries,
            authenticator=self.authenticator,
            tls=self.tls,
            cancels=self,
        )
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            await conn.serve()
        finally:
            self._tasks.discard(task)

    # -- cancel requests -------------------------------------------------------------------------

    def register(self, conn: Connection) -> None:
        self._connections[conn.pid] = conn

    def unregister(self, conn: Connection) -> None:
        self._connections.pop(conn.pid, None)

    def cancel(self, pid: int, secret: int) -> None:
        conn = self._connections.get(pid)
        # A wrong key is ignored without a word, as PostgreSQL does.
        if conn is not None and conn.secret == secret:
            conn.cancel()
