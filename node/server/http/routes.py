"""Which endpoint a request goes to, and the work that answers it."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from types import MappingProxyType
from urllib.parse import parse_qs, unquote, urlsplit

from node.server import console
from node.server.http.answers import Response, error
from node.server.http.app import HttpApp
from node.server.http.bodies import decoded, wants_arrow
from node.server.http.headers import RequestHeaders
from node.server.http.writes import SMALL_WRITE_BYTES
from node.server.prom import http as prom

ROUTES: dict[str, tuple[str, ...]] = {
    "/sql": ("POST",),
    "/influxdb/v1/write": ("POST",),
    "/influxdb/v1/query": ("GET", "POST"),
    "/health": ("GET", "HEAD"),
    "/metrics": ("GET",),
    "/openapi.json": ("GET",),
    console.API_CLUSTER: ("GET",),
}
#: ``GET /route/{table}``: where a table is served (its owner's endpoints).
ROUTE_PREFIX = "/route/"
#: The endpoints that read a request body (other requests' bodies are dropped as they come).
WITH_BODY = frozenset({"/sql", "/influxdb/v1/write", "/influxdb/v1/query"}) | prom.WITH_BODY

#: The blocking work that answers a request (run on the thread pool).
Work = Callable[[], Response]
#: Where a small write goes to be batched with others: its body and parameters.
SmallWrite = Callable[[bytes, Mapping[str, list[str]]], None]


def endpoint(path: str) -> str:
    """The metrics label of a request's path (one per endpoint, whatever table it names)."""
    if path in ROUTES:
        return path
    if prom.is_prometheus(path):
        return prom.endpoint(path)
    if console.is_console(path):
        return console.PREFIX
    return "/route" if path.startswith(ROUTE_PREFIX) else "other"


@functools.lru_cache(maxsize=256)
def parameters(query: str) -> Mapping[str, list[str]]:
    """The parameters of a URL's query string. Clients send the same few again and again;
    the mapping is shared, so it is read only."""
    return MappingProxyType(parse_qs(query))


@functools.lru_cache(maxsize=256)
def target(url: bytes) -> tuple[str, str]:
    """A request target's path (``//x`` taken as ``/x``) and query string."""
    parts = urlsplit(url.decode("iso-8859-1"))
    path = parts.path
    if path.startswith("//"):
        path = "/" + path.lstrip("/")
    return path, parts.query


def _not_allowed(path: str, allowed: tuple[str, ...], method: str) -> Response:
    resp = error(405, f"{path} accepts {', '.join(allowed)}, not {method}")
    resp.headers["Allow"] = ", ".join(allowed)
    return resp


def route(
    app: HttpApp,
    method: str,
    path: str,
    query: str,
    headers: RequestHeaders,
    body: bytes,
    *,
    gone: Callable[[], bool],
    small_write: SmallWrite | None,
) -> Response | Work | None:
    """The answer to a request, the blocking work that makes it, or None: a small write handed
    to ``small_write`` (when given), answered with its batch."""
    if path.startswith(ROUTE_PREFIX):
        if method not in ("GET", "HEAD"):
            return _not_allowed(f"{ROUTE_PREFIX}{{table}}", ("GET", "HEAD"), method)
        table = unquote(path[len(ROUTE_PREFIX) :])
        return lambda: app.route(table)
    if console.is_console(path):
        return console.serve(method, path)
    if prom.is_prometheus(path):
        return prom.serve(app, method, path, parameters(query), headers, body)
    allowed = ROUTES.get(path)
    if allowed is None:
        return error(404, f"no endpoint {path!r}; see GET /openapi.json")
    if method not in allowed:
        return _not_allowed(path, allowed, method)
    if path == "/health":
        return app.health()
    if path == "/metrics":
        return app.prometheus()
    if path == "/openapi.json":
        return app.openapi()
    if path == console.API_CLUSTER:
        return app.cluster
    params = parameters(query)
    encoding = headers.get("Content-Encoding", "identity").lower()
    limit = app.max_body_bytes
    if path == "/sql":
        arrow = wants_arrow(params, headers.get("Accept", ""))
        return lambda: app.sql(decoded(body, encoding, limit), arrow=arrow, gone=gone)
    if path == "/influxdb/v1/query":
        form = decoded(body, encoding, limit)
        kind = headers.get("Content-Type", "")
        return lambda: app.influx_query(params, form, kind, gone=gone)
    app.metrics.request_bytes.inc("influxdb", amount=len(body))
    if small_write is not None and encoding in ("identity", "") and len(body) <= SMALL_WRITE_BYTES:
        small_write(body, params)
        return None
    return lambda: app.influx_write(decoded(body, encoding, limit), params)
