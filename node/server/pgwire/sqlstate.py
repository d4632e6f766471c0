"""gnomon's errors as PostgreSQL SQLSTATE codes, and the position in the statement an
error points at."""

from __future__ import annotations

import re

from gnomon.errors import (
    Cancelled,
    GnomonError,
    NotFound,
    Status,
    UnknownTable,
)

INVALID_PASSWORD = "28P01"
INVALID_AUTHORIZATION = "28000"
PROTOCOL_VIOLATION = "08P01"
FEATURE_NOT_SUPPORTED = "0A000"
INVALID_CURSOR = "34000"
INVALID_STATEMENT = "26000"
QUERY_CANCELED = "57014"
INTERNAL = "XX000"
UNDEFINED_TABLE = "42P01"

#: Errors whose class says more than their status.
_BY_CLASS: tuple[tuple[type[GnomonError], str], ...] = (
    (UnknownTable, UNDEFINED_TABLE),
    (Cancelled, QUERY_CANCELED),
)
#: The rest by their status: an owner's refusal passed on by the node a request came in at
#: keeps the owner's status, not its class, and must read as it would at the owner.
_BY_STATUS: dict[Status, str] = {
    Status.UNAUTHENTICATED: INVALID_PASSWORD,
    Status.PERMISSION_DENIED: "42501",
    Status.NOT_FOUND: "42704",
    Status.ALREADY_EXISTS: "42P07",
    Status.TOO_LARGE: "54000",
    Status.INVALID_ARGUMENT: "42601",
    Status.DEADLINE_EXCEEDED: QUERY_CANCELED,
    Status.UNAVAILABLE: "53000",
}

_LINE_COLUMN = re.compile(r"Line: (\d+), Column:? (\d+)")
_OFFSET = re.compile(r"at position (\d+)")


def sqlstate(error: BaseException) -> str:
    """The SQLSTATE of ``error``: its own (``pg_code``) where it has one."""
    own = getattr(error, "pg_code", None)
    if isinstance(own, str):
        return own
    # Not every lookup raises UnknownTable: a missing table's NotFound names it first.
    if isinstance(error, NotFound) and error.message.startswith("table "):
        return UNDEFINED_TABLE
    for cls, code in _BY_CLASS:
        if isinstance(error, cls):
            return code
    if isinstance(error, GnomonError):
        return _BY_STATUS.get(error.status, INTERNAL)
    return INTERNAL


def position(message: str, statement: str) -> int | None:
    """The 1-based character position in ``statement`` an error names: gnomon's parser
    says "at position N" (0-based), DataFusion's "Line: L, Column: C"."""
    offset = _OFFSET.search(message)
    if offset is not None:
        return int(offset.group(1)) + 1
    found = _LINE_COLUMN.search(message)
    if found is None:
        return None
    line, column = int(found.group(1)), int(found.group(2))
    lines = statement.split("\n")
    if not 1 <= line <= len(lines):
        return None
    return sum(len(text) + 1 for text in lines[: line - 1]) + column
