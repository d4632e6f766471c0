"""What PostgreSQL clients ask before or around their own queries, answered here rather
than by the SQL engine: session statements (SET, BEGIN, ...) accepted as no-ops, SHOW of a
server parameter, the session functions (version(), current_setting(), ...) and the
pg_catalog queries of psql's ``\\dt``, ``\\d table`` and ``\\l`` (information_schema
is the query path's, :mod:`node.sql.system`). Other pg_catalog queries answer no rows, so a
client's optional look-ups succeed."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa

from node.security.principal import DATABASE
from node.sql.pg_functions import SERVER_VERSION, SETTINGS, setting
from node.sql.result import QueryResult
from node.sql.system import DATABASE_NAME, FIRST_OID, OWNER, PG_CATALOG_VIEWS

_TAGS = (
    (re.compile(r"^(begin|start\s+transaction)\b", re.I), "BEGIN"),
    (re.compile(r"^(commit|end)\b", re.I), "COMMIT"),
    (re.compile(r"^rollback\b", re.I), "ROLLBACK"),
    (re.compile(r"^set\b", re.I), "SET"),
    (re.compile(r"^reset\b", re.I), "RESET"),
    (re.compile(r"^discard\b", re.I), "DISCARD ALL"),
    (re.compile(r"^deallocate\b", re.I), "DEALLOCATE"),
    (re.compile(r"^listen\b", re.I), "LISTEN"),
    (re.compile(r"^unlisten\b", re.I), "UNLISTEN"),
)
_SHOW = re.compile(r"^show\s+([a-z_.]+)$", re.I)
_FUNCTION = re.compile(
    r"^(?:pg_catalog\.)?(version|current_database|current_schema|current_user|session_user"
    r"|current_setting)\s*(?:\(\s*(?:'([^']*)'\s*)?\))?(?:\s*::\s*\w+)?"
    r"(?:\s+as\s+(\"?[\w ]+\"?))?$",
    re.I,
)
#: Queries of PostgreSQL's catalogs: qualified, or naming one of its relations after FROM or
#: JOIN (a table of gnomon's own may start with pg_ too).
_CATALOG = re.compile(
    r"\bpg_catalog\.|\b(from|join)\s+pg_(class|type|namespace|database"
    r"|attribute|settings|proc|roles|user|tables|index|am|range|enum|description|extension)\b",
    re.I,
)
#: The relations of pg_catalog a query names (functions, followed by "(", are not).
_CATALOG_RELATION = re.compile(r"\bpg_catalog\.(\w+)\b(?!\s*\()", re.I)
_NAME_PATTERN = re.compile(r"relname OPERATOR\(pg_catalog\.~\) '([^']*)'")
_RELKINDS = re.compile(r"c\.relkind IN \(([^)]*)\)")
_OID = re.compile(r"(?:c\.oid|attrelid) = '(\d+)'")

Execute = Callable[[str], QueryResult]


@dataclass(frozen=True)
class Answer:
    """Rows (``rows`` set) or a command's completion alone."""

    tag: str
    rows: pa.Table | None = None


def _text_rows(names: list[str], rows: list[list[str | None]]) -> pa.Table:
    columns = list(zip(*rows, strict=True)) if rows else [() for _ in names]
    return pa.table(
        {n: pa.array(list(c), pa.string()) for n, c in zip(names, columns, strict=True)}
    )


def answer(sql: str, user: str, execute: Execute) -> Answer | None:
    """This module's answer to ``sql`` (one statement, trimmed), or None for the engine."""
    text = sql.strip().rstrip(";").strip()
    for pattern, tag in _TAGS:
        if pattern.match(text):
            return Answer(tag)
    show = _SHOW.match(text)
    if show and show.group(1).lower() in SETTINGS:
        name = show.group(1)
        return Answer("SHOW", _text_rows([name], [[SETTINGS[name.lower()]]]))
    select = re.match(r"^select\s+(.*)$", text, re.I | re.S)
    if select:
        functions = _functions(select.group(1), user)
        if functions is not None:
            return Answer("SELECT 1", functions)
    if _CATALOG.search(text):
        return _catalog(text, execute)
    return None


def _functions(items: str, user: str) -> pa.Table | None:
    names: list[str] = []
    values: list[str | None] = []
    for item in items.split(","):
        found = _FUNCTION.match(item.strip())
        if found is None:
            return None
        fn, arg, alias = found.group(1).lower(), found.group(2), found.group(3)
        value = (
            setting(arg or "")
            if fn == "current_setting"
            else {
                "version": f"PostgreSQL {SERVER_VERSION} on gnomon",
                "current_database": DATABASE_NAME,
                "current_schema": DATABASE,
                "current_user": user,
                "session_user": user,
            }[fn]
        )
        names.append(alias.strip('"') if alias else fn)
        values.append(value)
    return _text_rows(names, [values])


def _tables(execute: Execute) -> list[str]:
    return sorted(str(r["Tables"]) for r in execute("SHOW TABLES").table().to_pylist())


def _catalog(text: str, execute: Execute) -> Answer:
    if "pg_catalog.pg_database" in text:
        return _rows(
            [
                "Name",
                "Owner",
                "Encoding",
                "Collate",
                "Ctype",
                "ICU Locale",
                "Locale Provider",
                "Access privileges",
            ],
            [[DATABASE_NAME, OWNER, "UTF8", "C", "C", None, "libc", None]],
        )
    oid = _OID.search(text)
    if "FROM pg_catalog.pg_attribute a" in text and oid:
        return _columns(text, execute, int(oid.group(1)))
    if "c.relchecks" in text and oid:
        return _rows(
            [
                "relchecks",
                "relkind",
                "relhasindex",
                "relhasrules",
                "relhastriggers",
                "relrowsecurity",
                "relforcerowsecurity",
                "relhasoids",
                "relispartition",
                "reloptions",
                "reltablespace",
                "reloftype",
                "relpersistence",
                "relreplident",
                "amname",
            ],
            [["0", "r", "f", "f", "f", "f", "f", "f", "f", "", "0", "", "p", "d", "heap"]],
        )
    if "FROM pg_catalog.pg_namespace n" in text and '"Name"' in text:
        return _rows(["Name", "Owner"], [[DATABASE, OWNER]])
    # psql's listings and look-ups by name all ask whether a relation is visible.
    psql = "pg_catalog.pg_table_is_visible(c.oid)" in text
    kinds = _RELKINDS.search(text)
    if psql and kinds is not None and "'r'" not in kinds.group(1):
        return _rows(["Schema", "Name", "Type", "Owner"], [])  # views, indexes: none
    if psql and "FROM pg_catalog.pg_class c" in text and "relname" in text:
        pattern = _NAME_PATTERN.search(text)
        wanted = re.compile(pattern.group(1)) if pattern else None
        tables = [
            (FIRST_OID + i, t)
            for i, t in enumerate(_tables(execute))
            if wanted is None or wanted.search(t)
        ]
        if '"Name"' in text:
            return _rows(
                ["Schema", "Name", "Type", "Owner"],
                [[DATABASE, t, "table", OWNER] for _, t in tables],
            )
        return _rows(["oid", "nspname", "relname"], [[str(o), DATABASE, t] for o, t in tables])
    named = {name.lower() for name in _CATALOG_RELATION.findall(text)}
    if named and named <= PG_CATALOG_VIEWS:
        # The query path holds these relations (node.sql.system): the query runs there.
        rows = execute(text).answer
        return Answer(f"SELECT {0 if rows is None else rows.num_rows}", rows)
    return _rows(["?column?"], [])


#: The columns psql's ``\d+`` asks for besides ``\d``'s, in its order, with the value
#: each column of a gnomon table has.
_VERBOSE = (
    ("a.attstorage", "attstorage", "p"),
    ("attcompression", "attcompression", ""),
    ("attstattarget", "attstattarget", "-1"),
    ("col_description", "description", None),
)


def _columns(text: str, execute: Execute, oid: int) -> Answer:
    tables = _tables(execute)
    index = oid - FIRST_OID
    if not 0 <= index < len(tables):
        return _rows(["attname"], [])
    described = execute(f'DESCRIBE "{tables[index]}"').table().to_pylist()
    verbose = [(name, value) for marker, name, value in _VERBOSE if marker in text]
    return _rows(
        [
            "attname",
            "format_type",
            "attrdef",
            "attnotnull",
            "attcollation",
            "attidentity",
            "attgenerated",
            *(name for name, _ in verbose),
        ],
        [
            [
                c["name"],
                c["type"],
                None,
                "f" if c["is_nullable"] else "t",
                None,
                "",
                "",
                *(value for _, value in verbose),
            ]
            for c in described
        ],
    )


def _rows(names: list[str], rows: list[list[str | None]]) -> Answer:
    return Answer(f"SELECT {len(rows)}", _text_rows(names, rows))
