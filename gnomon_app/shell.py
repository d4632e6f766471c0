"""The ``gnomon sql`` client: statements sent to a server's HTTP ``/sql`` endpoint, results
shown as plain-text tables. Only the rows shown are asked for (``max_rows`` of them, so a large
answer is neither sent whole nor floods the terminal), as Arrow, so timestamps are known for
what they are and shown as ISO 8601 in the client's time zone. Answers with multi-line values
(EXPLAIN's plans) are shown as records, every value whole. The interactive shell keeps a
history of whole statements."""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import signal
import urllib.error
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gnomon.errors import GnomonError, InvalidArgument, Unavailable

# Arrow is imported by what reads answers: `gnomon --help` imports this module too.
if TYPE_CHECKING:
    import pyarrow as pa
    from rich.console import Console

HISTORY = os.path.expanduser("~/.gnomon_history")
#: Statements the history keeps (the latest).
HISTORY_ENTRIES = 1000
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


@dataclass(frozen=True)
class Answer:
    """What a statement answered: a query's rows (the first of them, when it was asked for
    no more) and how many it had in all, or the rows another statement changed."""

    rows: pa.Table | None = None
    total_rows: int = 0
    affected_rows: int = 0


def run_sql(
    url: str, sql: str, *, max_rows: int | None = None, timeout_s: float = 300.0
) -> Answer:
    """Run one statement at the server at ``url`` (see :func:`base_url`), asking for the
    first ``max_rows`` rows of a query's answer only (None: all); its answer, or a
    GnomonError with the server's message."""
    import http.client
    import urllib.request

    import pyarrow as pa

    body: dict[str, Any] = {"query": sql}
    if max_rows is not None:
        body["max_rows"] = max_rows
    req = urllib.request.Request(
        f"{url}/sql?format=arrow",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            data = resp.read()
            # A query answers an Arrow stream, saying how many rows it had when cut; other
            # statements answer JSON.
            if resp.headers.get_content_type() != "application/vnd.apache.arrow.stream":
                return Answer(affected_rows=int(json.loads(data or b"{}").get("affected_rows", 0)))
            rows = pa.ipc.open_stream(data).read_all()
            total = resp.headers.get("Gnomon-Total-Rows")
            return Answer(rows, rows.num_rows if total is None else int(total))
    except urllib.error.HTTPError as e:
        error = e.read()
        try:
            message = json.loads(error).get("message", error.decode(errors="replace"))
        except ValueError:
            message = error.decode(errors="replace")
        raise InvalidArgument(f"{e.code}: {message}") from None
    except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
        raise _unreachable(url, e) from None


def time_zone(name: str) -> datetime.tzinfo | None:
    """The zone named ``name``: ``local`` (None: this machine's, with its daylight saving
    rules), ``UTC``, or an IANA name such as ``Europe/Paris``."""
    if name.lower() == "local":
        return None
    if name.upper() == "UTC":
        return datetime.UTC
    import zoneinfo

    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise InvalidArgument(
            f"unknown time zone {name!r}: expected local, UTC or a name such as Europe/Paris"
        ) from None


@dataclass(frozen=True)
class View:
    """How answers are shown: at most ``max_rows`` rows, timestamps in ``zone`` (None: the
    client's own)."""

    max_rows: int = DEFAULT_MAX_ROWS
    zone: datetime.tzinfo | None = None


def _texts(column: pa.ChunkedArray[Any], view: View) -> list[str]:
    """The values of ``column`` as shown: timestamps (instants since the epoch, UTC when
    their type names no zone) as ISO 8601 in the view's zone, NULL for nulls."""
    import pyarrow as pa

    values = column.to_pylist()
    if not pa.types.is_timestamp(column.type):
        return ["NULL" if v is None else str(v) for v in values]
    return [
        "NULL"
        if v is None
        else (v if v.tzinfo else v.replace(tzinfo=datetime.UTC))
        .astimezone(view.zone)
        .isoformat(timespec="milliseconds")
        for v in values
    ]


def _cell(text: str) -> str:
    text = text.replace("\n", "\\n")
    return text if len(text) <= MAX_CELL_CHARS else text[: MAX_CELL_CHARS - 1] + "…"


def _footer(shown: int, total: int) -> str:
    counted = f"{total:,} row{'s' if total != 1 else ''}"
    if shown == total:
        return f"({counted})"
    return f"({counted}, {total - shown:,} not shown; --max-rows sets how many are)"


def format_rows(names: list[str], columns: list[list[str]], total: int) -> str:
    """Rows given by column (the texts shown) as an aligned table, every cell on one line
    and cut to MAX_CELL_CHARS, with a footer saying how many rows the answer had and how
    many are not shown."""
    cells = [[_cell(t) for t in c] for c in columns]
    widths = [max([len(n), *map(len, c)]) for n, c in zip(names, cells, strict=True)]
    lines = [
        " | ".join(n.ljust(w) for n, w in zip(names, widths, strict=True)),
        "-+-".join("-" * w for w in widths),
    ]
    for row in zip(*cells, strict=True):
        lines.append(" | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))
    lines.append(_footer(len(columns[0]) if columns else 0, total))
    return "\n".join(lines)


def format_records(names: list[str], columns: list[list[str]], total: int) -> str:
    """Rows given by column as records, one ``name: value`` line per column and every value
    whole: a multi-line value (EXPLAIN's plans) starts on the next line, indented."""
    records = []
    for row in zip(*columns, strict=True):
        lines = []
        for name, text in zip(names, row, strict=True):
            if "\n" in text:
                lines.append(f"{name}:")
                lines.extend(f"  {line}" for line in text.rstrip("\n").splitlines())
            else:
                lines.append(f"{name}: {text}")
        records.append("\n".join(lines))
    return "\n\n".join([*records, _footer(len(columns[0]) if columns else 0, total)])


def render(console: Console, answer: Answer, view: View) -> None:
    """Print ``answer``: a query's rows as a table (as records when a value spans lines),
    else how many rows the statement changed."""
    if answer.rows is None:
        console.out(f"affected rows: {answer.affected_rows}", highlight=False)
        return
    if not answer.total_rows:
        console.out("(no rows)", highlight=False)
        return
    shown = answer.rows.slice(0, view.max_rows)
    columns = [_texts(c, view) for c in shown.columns]
    multiline = any("\n" in t for c in columns for t in c)
    layout = format_records if multiline else format_rows
    console.out(layout(shown.column_names, columns, answer.total_rows), highlight=False)


def _error(console: Console, e: GnomonError) -> None:
    console.print(f"[red]error:[/red] {e.message}", markup=True, highlight=False)


def repl(
    url: str,
    console: Console,
    view: View = View(),
    *,
    read_line: Callable[[str], str] = input,
    remember: Callable[[str], None] = lambda statement: None,
) -> None:
    """Read statements (ended by ``;``) until end of input or ``\\q``, run each, show its
    answer; each whole statement is handed to ``remember`` (the history) before it runs.
    Ctrl-C drops the statement being typed, or stops waiting for the one running, and
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
            remember(text)
            running = True
            render(console, run_sql(url, text, max_rows=view.max_rows), view)
        except EOFError:
            console.out("")
            return
        except KeyboardInterrupt:
            buffer.clear()
            console.out("cancelled" if running else "^C")
        except GnomonError as e:
            _error(console, e)


def read_history(path: Path) -> list[str]:
    """The statements of a history file: one JSON string a line, so a statement of several
    lines is one entry (a line that is no JSON string, from an older file, is taken as it
    is)."""
    entries = []
    for line in path.read_text(errors="replace").splitlines():
        entry: object = line
        if line.startswith('"'):
            with contextlib.suppress(ValueError):
                entry = json.loads(line)
        if isinstance(entry, str) and entry.strip():
            entries.append(entry)
    return entries


def write_history(path: Path, entries: list[str]) -> None:
    """Keep the latest HISTORY_ENTRIES of ``entries`` in ``path``, readable by
    :func:`read_history`."""
    kept = entries[-HISTORY_ENTRIES:]
    path.write_text("".join(json.dumps(e) + "\n" for e in kept))


def interactive(url: str, console: Console, view: View = View()) -> None:
    """The shell with line editing and a persistent history of whole statements (not each
    line typed, nor statements cancelled while typed), once the server answers."""
    check_server(url)
    try:
        import readline
    except ImportError:  # no line editing on this system, nor a history
        readline = None  # type: ignore[assignment]
    console.out(
        f"connected to {url}; end statements with ';', Ctrl-C cancels, \\q or Ctrl-D quits",
        highlight=False,
    )
    # Ctrl-C is this shell's cancel key even when it was started with SIGINT ignored (as a
    # shell without job control starts its background commands, and their children inherit):
    # Python would then leave it ignored, and Ctrl-C would do nothing at all.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    if readline is None:
        repl(url, console, view)
        return
    history = Path(HISTORY)
    # Lines typed are not history: the statements they make are, added as each is run.
    readline.set_auto_history(False)
    with contextlib.suppress(OSError):
        for entry in read_history(history):
            readline.add_history(entry)

    def remember(statement: str) -> None:
        last = readline.get_current_history_length()
        if last == 0 or readline.get_history_item(last) != statement:
            readline.add_history(statement)

    try:
        repl(url, console, view, remember=remember)
    finally:
        entries = [
            readline.get_history_item(i)
            for i in range(1, readline.get_current_history_length() + 1)
        ]
        with contextlib.suppress(OSError):
            write_history(history, entries)
