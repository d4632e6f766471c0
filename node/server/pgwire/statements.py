"""Statement text as the protocol needs it: a simple query cut into its statements,
``$n`` placeholders replaced by their parameters' literals, and the completion tag of a
statement's outcome."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

from gnomon.errors import InvalidArgument

#: Starts of statements that answer rows (described before they run).
_ROWS = re.compile(r"^\s*\(*\s*(select|with|show|describe|desc|explain|values|table|fetch)\b", re.I)
_VERB = re.compile(r"^\s*(\w+)(?:\s+(\w+))?", re.I)


def _tokens(sql: str) -> Iterator[tuple[int, int, str]]:
    """(start, end, kind) of each stretch of ``sql``: kind "code", "quoted" (a string or
    quoted name, whose contents are not SQL), "comment" or "param" (``$n``)."""
    i, n, start = 0, len(sql), 0
    while i < n:
        c = sql[i]
        end = -1
        if c in "'\"":
            end = i + 1
            while end < n:
                if sql[end] == c:
                    if end + 1 < n and sql[end + 1] == c:
                        end += 2
                        continue
                    break
                end += 1
            end += 1
        elif sql.startswith("--", i):
            found = sql.find("\n", i)
            end = n if found < 0 else found
        elif sql.startswith("/*", i):
            found = sql.find("*/", i + 2)
            end = n if found < 0 else found + 2
        elif c == "$" and i + 1 < n and sql[i + 1].isdigit():
            end = i + 1
            while end < n and sql[end].isdigit():
                end += 1
            if start < i:
                yield start, i, "code"
            yield i, end, "param"
            i = start = end
            continue
        if end >= 0:
            if start < i:
                yield start, i, "code"
            yield i, min(end, n), "quoted" if c in "'\"" else "comment"
            i = start = min(end, n)
        else:
            i += 1
    if start < n:
        yield start, n, "code"


def split(sql: str) -> list[str]:
    """The statements of a simple query, empty ones dropped (blanks and comments alone, such
    as the ``-- ping`` a Go driver checks a connection with, are empty, as in PostgreSQL)."""
    statements, current, said = [], [], []
    for start, end, kind in _tokens(sql):
        piece = sql[start:end]
        if kind != "code":
            current.append(piece)
            said.append(kind != "comment")
            continue
        parts = piece.split(";")
        current.append(parts[0])
        said.append(bool(parts[0].strip()))
        for part in parts[1:]:
            statements.append(("".join(current), any(said)))
            current, said = [part], [bool(part.strip())]
    statements.append(("".join(current), any(said)))
    return [text for text, something in statements if something]


def count_params(sql: str) -> int:
    return max((int(sql[s + 1 : e]) for s, e, k in _tokens(sql) if k == "param"), default=0)


def substitute(sql: str, literal: Callable[[int], str]) -> str:
    """``sql`` with each ``$n`` replaced by ``literal(n - 1)``."""
    out = []
    for start, end, kind in _tokens(sql):
        if kind == "param":
            index = int(sql[start + 1 : end]) - 1
            if index < 0:
                raise InvalidArgument(f"there is no parameter {sql[start:end]}")
            out.append(literal(index))
        else:
            out.append(sql[start:end])
    return "".join(out)


def answers_rows(sql: str) -> bool:
    return _ROWS.match(sql) is not None


def tag(sql: str, affected: int | None, rows: int | None) -> str:
    """The CommandComplete tag of ``sql`` that answered ``rows`` rows or changed
    ``affected``."""
    if rows is not None:
        return f"SELECT {rows}"
    found = _VERB.match(sql)
    verb = found.group(1).upper() if found else ""
    count = affected or 0
    if verb == "INSERT":
        return f"INSERT 0 {count}"
    if verb in ("DELETE", "UPDATE"):
        return f"{verb} {count}"
    if found and found.group(2) and verb in ("CREATE", "DROP", "ALTER"):
        return f"{verb} {found.group(2).upper()}"
    return verb or "OK"
