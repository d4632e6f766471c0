"""The Prometheus endpoints of the HTTP server: which paths they are and the work that
answers each (the server authenticates them as any other endpoint)."""

from __future__ import annotations

from collections.abc import Callable

from node.prom import remote_read, remote_write
from node.prom.host import PromHost
from node.server.http.answers import NO_CONTENT, Response, error

#: Remote write and read, at Prometheus's paths and at HoraeDB's.
WRITE_PATHS = frozenset({"/api/v1/write", "/prom/v1/write"})
READ_PATHS = frozenset({"/api/v1/read", "/prom/v1/read"})
#: The endpoints whose request bodies are read.
WITH_BODY = WRITE_PATHS | READ_PATHS
PROTOBUF = "application/x-protobuf"

Work = Callable[[], Response]


def is_prometheus(path: str) -> bool:
    return path in WITH_BODY


def _write(host: PromHost, body: bytes) -> Response:
    rows = remote_write.decode(body, max_body_bytes=host.max_body_bytes)
    written = host.ingestor.write_all(rows) if rows else 0
    host.metrics.rows_written.inc("prometheus", amount=written)
    return NO_CONTENT


def _read(host: PromHost, body: bytes) -> Response:
    with host.queries.running():
        answer = remote_read.answer(host.execute, body, max_body_bytes=host.max_body_bytes)
    return Response(200, answer, PROTOBUF, {"Content-Encoding": "snappy"})


def serve(host: PromHost, method: str, path: str, body: bytes) -> Response | Work:
    """The answer to a request to a Prometheus path, or the blocking work that makes it."""
    if method != "POST":
        resp = error(405, f"{path} accepts POST, not {method}")
        resp.headers["Allow"] = "POST"
        return resp
    host.metrics.request_bytes.inc("prometheus", amount=len(body))
    if path in WRITE_PATHS:
        return lambda: _write(host, body)
    return lambda: _read(host, body)
