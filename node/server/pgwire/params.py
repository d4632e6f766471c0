"""The types of parameters a client left unspecified, inferred from the columns they are
compared with (``host = $1``, ``$2 < ts``), as PostgreSQL infers them: drivers that describe
a statement before binding (asyncpg) then send each value as its column's type."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence

from node.server.pgwire import types
from node.sql import pg_functions

_OPERATOR = r"(?:=|<>|!=|<=|>=|<|>)"
_TABLES = re.compile(r'\b(?:from|join)\s+"?(\w+)"?', re.I)

#: gnomon's column type names (DESCRIBE's ``type``) as PostgreSQL types.
_BY_NAME: Mapping[str, int] = {
    "boolean": pg_functions.BOOL,
    "tinyint": pg_functions.INT2,
    "smallint": pg_functions.INT2,
    "int": pg_functions.INT4,
    "integer": pg_functions.INT4,
    "bigint": pg_functions.INT8,
    "uint8": pg_functions.INT2,
    "uint16": pg_functions.INT4,
    "uint32": pg_functions.INT8,
    "uint64": pg_functions.NUMERIC,
    "float": pg_functions.FLOAT4,
    "double": pg_functions.FLOAT8,
    "string": pg_functions.TEXT,
    "varchar": pg_functions.TEXT,
    "timestamp": pg_functions.TIMESTAMP,
    "date": pg_functions.DATE,
    "varbinary": pg_functions.BYTEA,
}


def tables_in(sql: str) -> list[str]:
    return _TABLES.findall(sql)


def infer(sql: str, given: Sequence[int], columns: Mapping[str, str]) -> list[int]:
    """``given`` with each unspecified (0) type replaced by that of the column (``columns``:
    name to gnomon type) the parameter is compared with, else text."""
    out = list(given)
    for i, oid in enumerate(out):
        if oid != types.UNKNOWN:
            continue
        n = i + 1
        found = re.search(rf'"?(\w+)"?\s*{_OPERATOR}\s*\${n}(?!\d)', sql) or re.search(
            rf'\${n}(?!\d)\s*{_OPERATOR}\s*"?(\w+)"?', sql
        )
        column = None if found is None else columns.get(found.group(1))
        out[i] = _BY_NAME.get((column or "").lower(), pg_functions.TEXT)
    return out


def column_types(sql: str, describe: Callable[[str], list[dict[str, object]]]) -> dict[str, str]:
    """Name to gnomon type of the columns of the tables ``sql`` reads (those ``describe``
    knows: a table it cannot describe adds none)."""
    found: dict[str, str] = {}
    for table in tables_in(sql):
        for column in describe(table):
            found.setdefault(str(column["name"]), str(column["type"]))
    return found
