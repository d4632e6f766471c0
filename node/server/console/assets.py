"""The console's files, read once from ``static/`` and answered from memory. Only the files
shipped are served (a path naming anything else is 404), each with a policy that lets the
page load and fetch from this server alone."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from node.server.http.answers import Response

#: Where the console is served; its page is ``/dashboard`` (or ``/dashboard/``).
PREFIX = "/dashboard"
#: The JSON the cluster page shows.
API_CLUSTER = "/api/cluster"
STATIC = Path(__file__).parent / "static"
PAGE = "index.html"
_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".LICENSE": "text/plain; charset=utf-8",
}
#: Nothing but this server: scripts, styles, fetches, images (uPlot draws on a canvas and
#: sets element styles from script, which the policy allows).
POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)


def _load() -> dict[str, tuple[bytes, str]]:
    files: dict[str, tuple[bytes, str]] = {}
    for path in sorted(STATIC.iterdir()):
        kind = _TYPES.get(path.suffix)
        if path.is_file() and kind is not None:
            files[path.name] = (path.read_bytes(), kind)
    return files


_FILES = _load()


def is_console(path: str) -> bool:
    """Whether ``path`` is one of the console's files (open to anyone: they hold no data)."""
    return path == PREFIX or path.startswith(PREFIX + "/")


def serve(method: str, path: str) -> Response:
    """The console file ``path`` names (``/dashboard`` is its page)."""
    # Imported here: the HTTP server's modules import this one.
    from node.server.http.answers import Response, error

    if method not in ("GET", "HEAD"):
        resp = error(405, f"{PREFIX} accepts GET, HEAD, not {method}")
        resp.headers["Allow"] = "GET, HEAD"
        return resp
    name = path[len(PREFIX) :].lstrip("/") or PAGE
    found = _FILES.get(name)
    if found is None:
        return error(404, f"the console has no file {name!r}")
    body, kind = found
    headers = {
        "Content-Security-Policy": POLICY,
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "Cache-Control": "no-cache",
    }
    return Response(200, body, kind, headers)
