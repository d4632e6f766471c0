"""The ``gnomon sql`` client: statements sent to a server's HTTP ``/sql`` endpoint, results
shown as tables."""

from __future__ import annotations

import contextlib
import json
import os
import urllib.error
import urllib.request
from typing import Any

from rich.console import Console
from rich.table import Table

from gnomon.errors import GnomonError, InvalidArgument, Unavailable

HISTORY = os.path.expanduser("~/.gnomon_history")


def run_sql(endpoint: str, sql: str, *, timeout_s: float = 300.0) -> dict[str, Any]:
    """POST one statement; the server's JSON answer, or a GnomonError with its message."""
    req = urllib.request.Request(
        f"http://{endpoint}/sql",
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
    except (urllib.error.URLError, OSError) as e:
        raise Unavailable(f"cannot reach gnomon at {endpoint}: {e}") from None


def render(console: Console, answer: dict[str, Any]) -> None:
    if "rows" in answer:
        rows: list[dict[str, Any]] = answer["rows"]
        if not rows:
            console.print("(no rows)")
            return
        table = Table(show_lines=False)
        for name in rows[0]:
            table.add_column(str(name))
        for r in rows:
            table.add_row(*("NULL" if v is None else str(v) for v in r.values()))
        console.print(table)
        console.print(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")
    else:
        console.print(f"affected rows: {answer.get('affected_rows', 0)}")


def interactive(endpoint: str, console: Console) -> None:
    """A read-eval-print loop with line editing and a persistent history."""
    try:
        import readline

        if os.path.exists(HISTORY):
            readline.read_history_file(HISTORY)
    except (ImportError, OSError):
        readline = None  # type: ignore[assignment]
    console.print(f"connected to {endpoint}; end statements with ';', quit with \\q or Ctrl-D")
    buffer: list[str] = []
    try:
        while True:
            try:
                line = input("gnomon> " if not buffer else "     -> ")
            except EOFError:
                console.print()
                return
            if not buffer and line.strip() in ("\\q", "quit", "exit"):
                return
            buffer.append(line)
            text = "\n".join(buffer).strip()
            if not text.endswith(";"):
                continue
            buffer.clear()
            try:
                render(console, run_sql(endpoint, text))
            except GnomonError as e:
                console.print(f"[red]error:[/red] {e.message}")
    finally:
        if readline is not None:
            with contextlib.suppress(OSError):
                readline.write_history_file(HISTORY)
