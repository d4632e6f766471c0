"""gnomon's HTTP endpoints that the HTTP bench times (``/sql``, ``/influxdb/v1/write``,
``/health``) served by a server library instead of gnomon's own connection handling: aiohttp's
low-level server, or uvicorn (httptools) with a raw ASGI app. Both call the same
:class:`HttpApp` as gnomon's server, and small writes take the same batches
(:class:`node.server.http.writes.Writes`): what differs is only what the library costs per
request. No auth, no limits past the body size, no error shapes: the candidates are as cheap
as the library allows, so what they measure is a lower bound of a port.

    python -m bench.http_candidates --server aiohttp --port 5440 --data-dir /tmp/d
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import gc
import socket
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from gnomon.error_codes import http_status, message_of
from gnomon.metrics import Registry
from node.backends import open_standalone
from node.ingest.writer import Ingestor
from node.server.http import HttpApp
from node.server.http.answers import Response, error
from node.server.http.routes import parameters
from node.server.http.writes import SMALL_WRITE_BYTES, Writes
from node.sql.executor import SqlExecutor

SERVERS = ("aiohttp", "uvicorn")
MAX_BODY_BYTES = 512 * 1024**2

#: What a candidate calls with a request's method, path, query string and body.
Handle = Callable[[str, str, str, bytes], Awaitable[Response]]


def _handler(app: HttpApp, pool: concurrent.futures.Executor) -> Handle:
    """The endpoints the bench times, as one coroutine over (method, path, query, body)."""
    loop = asyncio.get_running_loop()
    writes = Writes(app, pool, loop)

    async def handle(method: str, path: str, query: str, body: bytes) -> Response:
        try:
            if path == "/influxdb/v1/write":
                params: Mapping[str, list[str]] = parameters(query)
                if len(body) <= SMALL_WRITE_BYTES:
                    answered: asyncio.Future[Response | Exception] = loop.create_future()
                    writes.add(body, params, answered.set_result)
                    outcome = await answered
                    if isinstance(outcome, Exception):
                        raise outcome
                    return outcome
                return await loop.run_in_executor(pool, app.influx_write, body, params)
            if path == "/sql":
                return await loop.run_in_executor(pool, app.sql, body)
            return app.health()
        except Exception as e:
            return error(http_status(e), message_of(e))

    return handle


async def _aiohttp(handle_of: Callable[[], Handle], sock: socket.socket) -> None:
    from aiohttp import web

    handle = handle_of()

    async def serve(request: web.BaseRequest) -> web.StreamResponse:
        body = await request.read()
        answer = await handle(request.method, request.path, request.query_string, body)
        return web.Response(
            status=answer.status,
            body=bytes(answer.body) if answer.status != 204 else None,
            headers={"Content-Type": answer.content_type} if answer.content_type else None,
        )

    server = web.Server(serve, access_log=None)
    await asyncio.get_running_loop().create_server(server, sock=sock)
    await asyncio.Event().wait()


async def _uvicorn(handle_of: Callable[[], Handle], sock: socket.socket) -> None:
    import uvicorn

    handle: Handle | None = None

    async def asgi(scope: dict[str, Any], receive: Any, send: Any) -> None:
        nonlocal handle
        if scope["type"] != "http":
            return
        if handle is None:
            handle = handle_of()
        parts = []
        while True:
            message = await receive()
            parts.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        answer = await handle(
            scope["method"], scope["path"], scope["query_string"].decode(), b"".join(parts)
        )
        headers = [(b"content-length", str(len(answer.body)).encode())]
        if answer.content_type:
            headers.append((b"content-type", answer.content_type.encode()))
        await send({"type": "http.response.start", "status": answer.status, "headers": headers})
        await send({"type": "http.response.body", "body": bytes(answer.body)})

    config = uvicorn.Config(
        asgi,
        http="httptools",
        loop="asyncio",
        lifespan="off",
        access_log=False,
        log_level="warning",
        server_header=False,
    )
    await uvicorn.Server(config).serve(sockets=[sock])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", choices=SERVERS, required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--data-dir", required=True)
    args = parser.parse_args(argv)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Accepted connections inherit it: without it uvicorn's body, written after its headers,
    # waits for the client's delayed ACK (40 ms). aiohttp sets it on each connection itself.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind(("127.0.0.1", args.port))
    sock.listen(1024)
    pool = concurrent.futures.ThreadPoolExecutor(32)
    with open_standalone(args.data_dir, wal_sync="always") as engine:
        app = HttpApp(
            ingestor=Ingestor(engine),
            execute=SqlExecutor(engine).execute,
            metrics=Registry(),
            max_body_bytes=MAX_BODY_BYTES,
            healthy=lambda: True,
        )
        serve = _aiohttp if args.server == "aiohttp" else _uvicorn
        # As gnomon standalone does once serving: full collections skip what startup made.
        gc.collect()
        gc.freeze()
        asyncio.run(serve(lambda: _handler(app, pool), sock))
    return 0


if __name__ == "__main__":
    sys.exit(main())
