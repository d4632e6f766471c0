"""The HTTP server: an asyncio event loop (uvloop's where it is built) on a thread of its
own, the connections it serves, and the thread pool running what blocks."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import socket
import threading
from typing import Any

from gnomon.tls import ServerTls
from node.security.connections import ConnectionRate
from node.server.http.app import HttpApp
from node.server.http.connection import Connection, Shared
from node.server.listen import listen_error

log = logging.getLogger("gnomon.http")

#: Connections waiting to be accepted: a burst of clients connecting at once (the kernel caps
#: it at net.core.somaxconn) would otherwise wait out SYN retries of a second or more.
BACKLOG = 1024
#: Threads running SQL and the writes too large to batch (as many as the gRPC server has).
DEFAULT_WORKERS = 32


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop's event loop, asyncio's where uvloop is not built (Windows). Its transports
    are C: with it 8 clients of small writes wrote 1.2x the rows/s, one client the same
    (3-5% less CPU per write), 64 clients 0.9x (bench/small_writes.py, side by side; 8
    clients was where gnomon trailed InfluxDB)."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def _cut(sock: Any) -> None:
    """Shut a connection's socket down from another thread. uvloop's socket objects refuse
    ``shutdown()``; a duplicate of the descriptor ends the connection all the same."""
    with socket.socket(fileno=os.dup(sock.fileno())) as dup:
        dup.shutdown(socket.SHUT_RDWR)


class HttpServer:
    """The HTTP server: an event loop on a background thread, blocking work on a pool of
    ``workers`` threads."""

    def __init__(
        self,
        app: HttpApp,
        *,
        bind: str = "127.0.0.1",
        port: int = 5440,
        port_setting: str = "http_port",
        workers: int = DEFAULT_WORKERS,
        tls: ServerTls | None = None,
        max_connections_per_s: float = 0.0,
    ) -> None:
        """``max_connections_per_s``: new connections one client address may open a second
        (0: any number)."""
        self.app = app
        self.tls = tls
        self.bind = bind
        self._requested_port = port
        self.port = port
        self.port_setting = port_setting
        self.workers = workers
        self.max_connections_per_s = max_connections_per_s
        self._server: Shared | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._listening: asyncio.Server | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> int:
        """Bind and serve; returns the port (useful when 0 asked for a free one). Unavailable,
        naming the port and its setting, when it cannot listen there."""
        sock = self._listen()
        self.port = int(sock.getsockname()[1])
        pool = concurrent.futures.ThreadPoolExecutor(self.workers, thread_name_prefix="gnomon-http")
        loop = new_event_loop()
        rate = self.max_connections_per_s
        server = Shared(self.app, pool, loop, ConnectionRate(rate) if rate > 0 else None)
        listening = loop.run_until_complete(
            loop.create_server(
                lambda: Connection(server),
                sock=sock,
                backlog=BACKLOG,
                ssl=None if self.tls is None else self.tls.ssl_context(),
            )
        )
        self._server, self._loop, self._listening = server, loop, listening
        self._thread = threading.Thread(
            target=self._serve, args=(loop,), name="gnomon-http", daemon=True
        )
        self._thread.start()
        log.info("HTTP server listening", extra={"address": f"{self.bind}:{self.port}"})
        return self.port

    def _listen(self) -> socket.socket:
        family = socket.AF_INET6 if ":" in self.bind else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.bind, self._requested_port))
            sock.listen(BACKLOG)
        except OSError as e:
            sock.close()
            raise listen_error(
                "HTTP", self.bind, self._requested_port, self.port_setting, e
            ) from None
        sock.setblocking(False)
        return sock

    @staticmethod
    def _serve(loop: asyncio.AbstractEventLoop) -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_forever()
            # The connections closed at stop finish closing (their sockets) here.
            loop.run_until_complete(asyncio.sleep(0))
        finally:
            loop.close()

    def _stop_accepting(self, server: Shared) -> None:
        """On the loop's thread: close the listening socket and the idle connections."""
        if self._listening is not None:
            self._listening.close()
        server.close_idle()

    def stop(self, grace_s: float = 10.0) -> None:
        """Stop accepting connections, let requests in flight finish (up to ``grace_s``),
        then close every connection."""
        server, loop, thread = self._server, self._loop, self._thread
        if server is None or loop is None or thread is None:
            return
        self.app.stopping = True
        loop.call_soon_threadsafe(self._stop_accepting, server)
        if not self.app.wait_idle(grace_s):
            log.warning("requests still running at stop", extra={"grace_s": grace_s})
        loop.call_soon_threadsafe(server.close_all)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=grace_s)
        # Only if the loop did not stop: its connections are cut from here.
        with server.connections_lock:
            connections = list(server.connections)
        for sock in connections:
            with contextlib.suppress(OSError):
                _cut(sock)
        server.pool.shutdown(wait=False, cancel_futures=True)
        self._server, self._loop, self._listening, self._thread = None, None, None, None
        log.info("HTTP server stopped", extra={"port": self.port})
