"""SQL-level cursors (DECLARE, FETCH, MOVE, CLOSE), as psycopg's server-side cursors use
them: a declared cursor is a portal of its connection, fetched from a slice at a time."""

from __future__ import annotations

import re
from dataclasses import dataclass

_NAME = r'(?:"((?:[^"]|"")+)"|(\w+))'
_DECLARE = re.compile(
    rf"^declare\s+{_NAME}\s+((?:\w+\s+)*?)cursor\s+(?:with(?:out)?\s+hold\s+)?for\s+(.+)$",
    re.I | re.S,
)
_FETCH = re.compile(
    rf"^(fetch|move)\s+(?:(?:forward|next)\s+)?(all|\d+)?\s*(?:from|in)?\s*{_NAME}$", re.I
)
_CLOSE = re.compile(rf"^close\s+(?:all|{_NAME})$", re.I)


@dataclass(frozen=True)
class Declare:
    name: str
    query: str


@dataclass(frozen=True)
class Fetch:
    name: str
    #: Rows to fetch; None: all that are left.
    count: int | None
    #: MOVE: skip the rows instead of answering them.
    move: bool


@dataclass(frozen=True)
class CloseCursor:
    #: None: every cursor (CLOSE ALL).
    name: str | None


def _name(quoted: str | None, bare: str | None) -> str:
    return quoted.replace('""', '"') if quoted is not None else (bare or "").lower()


def parse(sql: str) -> Declare | Fetch | CloseCursor | None:
    text = sql.strip().rstrip(";").strip()
    found = _DECLARE.match(text)
    if found:
        return Declare(_name(found.group(1), found.group(2)), found.group(4))
    found = _FETCH.match(text)
    if found:
        count = found.group(2)
        return Fetch(
            _name(found.group(3), found.group(4)),
            None if count is None or count.lower() == "all" else int(count),
            found.group(1).lower() == "move",
        )
    found = _CLOSE.match(text)
    if found:
        return CloseCursor(
            None
            if found.group(1) is None and found.group(2) is None
            else _name(found.group(1), found.group(2))
        )
    return None
