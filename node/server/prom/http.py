"""The Prometheus endpoints of the HTTP server: which paths they are and the work that
answers each (the server authenticates them as any other endpoint)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from node.prom import otlp, remote_read, remote_write
from node.prom.host import PromHost
from node.server.http.answers import NO_CONTENT, Response, error
from node.server.http.bodies import decoded
from node.server.http.headers import RequestHeaders
from node.server.prom.api import QueryApi, form

#: Remote write and read, at Prometheus's paths and at HoraeDB's.
WRITE_PATHS = frozenset({"/api/v1/write", "/prom/v1/write"})
READ_PATHS = frozenset({"/api/v1/read", "/prom/v1/read"})
#: OTLP/HTTP metrics export: the OpenTelemetry default path and Prometheus's.
OTLP_PATHS = frozenset({"/v1/metrics", "/api/v1/otlp/v1/metrics"})
#: The query API's endpoints (GET, or POST with a form body).
QUERY_PATHS = frozenset(
    {
        "/api/v1/query",
        "/api/v1/query_range",
        "/api/v1/labels",
        "/api/v1/series",
        "/api/v1/metadata",
        "/api/v1/status/buildinfo",
    }
)
#: ``/api/v1/label/<name>/values``.
LABEL_VALUES = ("/api/v1/label/", "/values")
#: The endpoints whose request bodies are read.
WITH_BODY = WRITE_PATHS | READ_PATHS | OTLP_PATHS | QUERY_PATHS
#: The endpoints that take POST alone.
_POST_ONLY = WRITE_PATHS | READ_PATHS | OTLP_PATHS
PROTOBUF = "application/x-protobuf"

Work = Callable[[], Response]


def _label_values(path: str) -> bool:
    start, end = LABEL_VALUES
    return path.startswith(start) and path.endswith(end) and len(path) > len(start) + len(end)


def is_prometheus(path: str) -> bool:
    return path in WITH_BODY or _label_values(path)


def endpoint(path: str) -> str:
    """The metrics label of a Prometheus path (one for all label names)."""
    return "/api/v1/label/{name}/values" if _label_values(path) else path


def _write(host: PromHost, body: bytes) -> Response:
    rows = remote_write.decode(body, max_body_bytes=host.max_body_bytes, cache=host.series_cache)
    written = host.ingestor.write_all(rows) if rows else 0
    host.metrics.rows_written.inc("prometheus", amount=written)
    return NO_CONTENT


def _read(host: PromHost, body: bytes) -> Response:
    with host.queries.running():
        answer = remote_read.answer(host.execute, body, max_body_bytes=host.max_body_bytes)
    return Response(200, answer, PROTOBUF, {"Content-Encoding": "snappy"})


def _otlp(host: PromHost, body: bytes, headers: RequestHeaders) -> Response:
    encoding = headers.get("Content-Encoding", "identity").lower()
    data = decoded(body, encoding, host.max_body_bytes)
    kind = headers.get("Content-Type", "application/x-protobuf")
    rows, rejected = otlp.decode(data, kind)
    written = host.ingestor.write_all(rows) if rows else 0
    host.metrics.rows_written.inc("otlp", amount=written)
    return Response(200, otlp.answer(rejected), PROTOBUF)


def _not_allowed(path: str, method: str, allowed: tuple[str, ...]) -> Response:
    resp = error(405, f"{path} accepts {', '.join(allowed)}, not {method}")
    resp.headers["Allow"] = ", ".join(allowed)
    return resp


def serve(
    host: PromHost,
    method: str,
    path: str,
    params: Mapping[str, list[str]],
    headers: RequestHeaders,
    body: bytes,
) -> Response | Work:
    """The answer to a request to a Prometheus path, or the blocking work that makes it."""
    if path in _POST_ONLY:
        if method != "POST":
            return _not_allowed(path, method, ("POST",))
        if path in OTLP_PATHS:
            host.metrics.request_bytes.inc("otlp", amount=len(body))
            return lambda: _otlp(host, body, headers)
        host.metrics.request_bytes.inc("prometheus", amount=len(body))
        if path in WRITE_PATHS:
            return lambda: _write(host, body)
        return lambda: _read(host, body)
    if method not in ("GET", "POST"):
        return _not_allowed(path, method, ("GET", "POST"))
    merged = form(params, body, headers.get("Content-Type", ""))
    return lambda: QueryApi(host).answer(path, merged)
