"""The ``gnomon sql`` client: statements sent to a server's HTTP ``/sql`` endpoint, results
shown as plain-text tables (at most ``max_rows`` of them, so a large answer neither floods the
terminal nor takes seconds to lay out)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import urllib.error
import urllib.parse
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gnomon.errors import GnomonError, InvalidArgument, Unavailable

if TYPE_CHECKING:
    from rich.console import Console

HISTORY = os.path.expanduser("~/.gnomon_history")
#: The port ``gnomon standalone`` serves HTTP on, assumed when an endpoint names none.
DEFAULT_HTTP_PORT = 5440
#: Rows shown of an answer unless the caller asks otherwise.
DEFAULT_MAX_ROWS = 1000
#: Longest cell shown; longer values are cut with an ellipsis so one value cannot widen the
#: whole table past any screen.
MAX_CELL_CHARS = 80


def base_url(endpoint: str) -> str:
    """``http://host:port`` of an endpoint given as ``host``, ``host:port`` or an http(s) URL."""
    text = endpoint.strip()
    if "://" not in text:
        text = f"http://{text}"
    try:
        parts = urllib.parse.urlsplit(text)
        port = parts.port
    except ValueError as e:
        raise InvalidArgument(f"invalid endpoint {endpoint!r}: {e}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidArgument(
            f"invalid endpoint {endpoint!r}: expected host:port or http://host:port"
        )
    netloc = parts.netloc
    if port is None and "://" not in endpoint:
        netloc = f"{netloc}:{DEFAULT_HTTP_PORT}"
    return f"{parts.scheme}://{netloc}{parts.path.rstrip('/')}"


def _unreachable(url: str, e: Exception) -> Unavailable:
    """Why ``url`` gave no answer of gnomon's HTTP API: nothing there, or what is there."""
    import http.client

    if isinstance(e, http.client.BadStatusLine) and _http2_frame(str(e.args[0])):
        return Unavailable(
            f"{url} answers HTTP/2 (a gRPC or Arrow Flight port), not HTTP/1.1: gnomon sql "
            f"needs a gnomon server's HTTP port ({DEFAULT_HTTP_PORT} unless --http-port moved it)"
        )
    if isinstance(e, http.client.HTTPException) and not isinstance(e, OSError):
        return Unavailable(
            f"{url} does not answer as gnomon's HTTP API ({type(e).__name__}): gnomon sql needs "
            f"a gnomon server's HTTP port ({DEFAULT_HTTP_PORT} unless --http-port moved it)"
        )
    reason = e.reason if isinstance(e, urllib.error.URLError) else e
    return Unavailable(f"cannot connect to gnomon at {url}: {reason}")


def _http2_frame(line: str) -> bool:
    """Whether a status line read is an HTTP/2 server's first frame: a SETTINGS frame
    (type 4 in the fourth byte of its header), which gRPC servers send first, whatever
    they were asked."""
    return len(line) >= 9 and line.startswith("\x00") and line[3] == "\x04"


def check_server(url: str, *, timeout_s: float = 5.0) -> None:
    """Unavailable, naming ``url``, unless a gnomon server answers its health check there."""
    import http.client
    import urllib.request  # with http.client, email and ssl: only once a command talks

    try:
        with urllib.request.urlopen(f"{url}/health", timeout=timeout_s) as resp:
            resp.read()
    except urllib.error.HTTPError as e:
        raise Unavailable(f"cannot connect to gnomon at {url}: health check {e.code}") from None
    except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
        raise _unreachable(url, e) from None


def run_sql(url: str, sql: str, *, timeout_s: float = 300.0) -> dict[str, Any]:
    """POST one statement to the server at ``url`` (see :func:`base_url`); the server's JSON
    answer, or a GnomonError with its message."""
    import http.client
    import urllib.request

    req = urllib.request.Request(
        f"{url}/sql",
        data=json.dumps({"query": sql}).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            return dict(json.loads(resp.read() or b"{}"))
    except urllib.error.HTTPError as e:
        body = e.read()
        try:
            message = json.loads(body).get("message", body.decode(errors="replace"))
        except ValueError:
            message = body.decode(errors="replace")
        raise InvalidArgument(f"{e.code}: {message}") from None
    except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
        raise _unreachable(url, e) from None


def _cell(v: Any) -> str:
    text = "NULL" if v is None else str(v).replace("\n", "\\n")
    return text if len(text) <= MAX_CELL_CHARS else text[: MAX_CELL_CHARS - 1] + "…"


def format_rows(rows: list[dict[str, Any]], max_rows: int) -> str:
    """``rows`` (at most ``max_rows`` of them) as an aligned text table with a footer that
    says how many rows the answer had and how many were left out."""
    shown = rows[: max(0, max_rows)]
    names = list(rows[0])
    cells = [[_cell(v) for v in r.values()] for r in shown]
    widths = [max([len(n), *(len(c[i]) for c in cells)]) for i, n in enumerate(names)]
    lines = [
        " | ".join(n.ljust(w) for n, w in zip(names, widths, strict=True)),
        "-+-".join("-" * w for w in widths),
    ]
    lines.extend(" | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in cells)
    total = f"{len(rows):,} row{'s' if len(rows) != 1 else ''}"
    hidden = len(rows) - len(shown)
    lines.append(
        f"({total}, {hidden:,} not shown; --max-rows sets how many are)" if hidden else f"({total})"
    )
    return "\n".join(lines)


def render(console: Console, answer: dict[str, Any], *, max_rows: int = DEFAULT_MAX_ROWS) -> None:
    if "rows" not in answer:
        console.out(f"affected rows: {answer.get('affected_rows', 0)}", highlight=False)
    elif not answer["rows"]:
        console.out("(no rows)", highlight=False)
    else:
        console.out(format_rows(answer["rows"], max_rows), highlight=False)


def _error(console: Console, e: GnomonError) -> None:
    console.print(f"[red]error:[/red] {e.message}", markup=True, highlight=False)


def repl(
    url: str,
    console: Console,
    *,
    max_rows: int = DEFAULT_MAX_ROWS,
    read_line: Callable[[str], str] = input,
) -> None:
    """Read statements (ended by ``;``) until end of input or ``\\q``, run each, show its
    answer. Ctrl-C drops the statement being typed, or stops waiting for the one running, and
    returns to the prompt; Ctrl-D (end of input) leaves."""
    buffer: list[str] = []
    while True:
        running = False
        # One handler for the whole step: a Ctrl-C pressed as a prompt is drawn may be raised
        # only once the line has been read.
        try:
            line = read_line("gnomon> " if not buffer else "     -> ")
            if not buffer and line.strip() in ("\\q", "quit", "exit"):
                return
            buffer.append(line)
            text = "\n".join(buffer).strip()
            if not text.endswith(";"):
                if not text:
                    buffer.clear()
                continue
            buffer.clear()
            running = True
            render(console, run_sql(url, text), max_rows=max_rows)
        except EOFError:
            console.out("")
            return
        except KeyboardInterrupt:
            buffer.clear()
            console.out("cancelled" if running else "^C")
        except GnomonError as e:
            _error(console, e)


def interactive(url: str, console: Console, *, max_rows: int = DEFAULT_MAX_ROWS) -> None:
    """The shell with line editing and a persistent history, once the server answers."""
    check_server(url)
    try:
        import readline

        if os.path.exists(HISTORY):
            readline.read_history_file(HISTORY)
    except (ImportError, OSError):
        readline = None  # type: ignore[assignment]
    console.out(
        f"connected to {url}; end statements with ';', Ctrl-C cancels, \\q or Ctrl-D quits",
        highlight=False,
    )
    # Ctrl-C is this shell's cancel key even when it was started with SIGINT ignored (as a
    # shell without job control starts its background commands, and their children inherit):
    # Python would then leave it ignored, and Ctrl-C would do nothing at all.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        repl(url, console, max_rows=max_rows)
    finally:
        if readline is not None:
            with contextlib.suppress(OSError):
                readline.write_history_file(HISTORY)
