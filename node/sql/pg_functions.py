"""PostgreSQL's functions that its clients call in their catalog queries, added to every
session so they run on the one query path whichever protocol sent them: the server's
settings (``current_setting``, ``current_schemas``), identifiers quoted and parsed as
PostgreSQL quotes them (``quote_ident``, ``parse_ident``), the bounds of one-dimensional
arrays (``array_lower``, ``array_upper``), type names by OID (``format_type``), and the
catalog look-ups whose answer is the same for every gnomon object (``pg_table_is_visible``,
``pg_get_userbyid``, ``pg_get_expr``, ``obj_description``, ``col_description``). Also the
PostgreSQL types gnomon's columns are sent as."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from gnomon.errors import InvalidArgument
from node.security.principal import DATABASE

SERVER_VERSION = "15.0 (gnomon)"

#: The parameters reported at a PostgreSQL client's startup, also answered by SHOW and
#: current_setting.
PARAMETERS: Mapping[str, str] = {
    "server_version": SERVER_VERSION,
    "server_encoding": "UTF8",
    "client_encoding": "UTF8",
    "DateStyle": "ISO, MDY",
    "integer_datetimes": "on",
    "TimeZone": "UTC",
    "standard_conforming_strings": "on",
    "IntervalStyle": "postgres",
    "is_superuser": "off",
    "application_name": "",
}
#: Every setting by its lower-case name. The search path is PostgreSQL's default, whose
#: second schema is where gnomon's tables are.
SETTINGS: Mapping[str, str] = {
    k.lower(): v
    for k, v in {
        **PARAMETERS,
        "transaction_isolation": "read committed",
        "search_path": f'"$user", {DATABASE}',
        "max_identifier_length": "63",
        "server_version_num": "150000",
    }.items()
}

_PLAIN = re.compile(r"^[a-z_][a-z0-9_$]*$")
#: Keywords PostgreSQL's quote_ident quotes (every kind but the unreserved ones).
_KEYWORDS = frozenset(
    """all analyse analyze and any array as asc asymmetric authorization between bigint
    binary bit boolean both case cast char character check coalesce collate collation column
    concurrently constraint create cross current_catalog current_date current_role
    current_schema current_time current_timestamp current_user dec decimal default deferrable
    desc distinct do else end except exists extract false fetch float for foreign freeze
    from full grant greatest group grouping having ilike in initially inner inout int integer
    intersect interval into is isnull join lateral leading least left like limit localtime
    localtimestamp national natural nchar none normalize not notnull null nullif numeric
    offset on only or order out outer overlaps overlay placing position precision primary
    real references returning right row select session_user setof similar smallint some
    substring symmetric system_user table tablesample then time timestamp to trailing treat
    trim true union unique user using values varchar variadic verbose when where window
    with""".split()  # noqa: SIM905 (a list of words reads best as text)
)


#: The OIDs of PostgreSQL's types gnomon's columns are sent as.
BOOL, BYTEA, INT8, INT2, INT4, TEXT = 16, 17, 20, 21, 23, 25
FLOAT4, FLOAT8, VARCHAR, DATE, TIMESTAMP, TIMESTAMPTZ, NUMERIC = (
    700, 701, 1043, 1082, 1114, 1184, 1700
)  # fmt: skip


@dataclass(frozen=True)
class PgType:
    """A PostgreSQL type as its catalog lists it."""

    oid: int
    #: pg_type.typname
    typname: str
    #: The standard name (format_type's, information_schema's).
    name: str
    #: pg_type.typlen: bytes of a fixed-size value, -1 for variable size.
    size: int
    matches: Callable[[pa.DataType], bool]


TYPES: tuple[PgType, ...] = (
    PgType(BOOL, "bool", "boolean", 1, pa.types.is_boolean),
    PgType(INT2, "int2", "smallint", 2, lambda t: t in (pa.int8(), pa.int16(), pa.uint8())),
    PgType(INT4, "int4", "integer", 4, lambda t: t in (pa.int32(), pa.uint16())),
    PgType(INT8, "int8", "bigint", 8, lambda t: t in (pa.int64(), pa.uint32())),
    PgType(NUMERIC, "numeric", "numeric", -1, pa.types.is_uint64),
    PgType(FLOAT4, "float4", "real", 4, lambda t: t in (pa.float16(), pa.float32())),
    PgType(FLOAT8, "float8", "double precision", 8, pa.types.is_float64),
    PgType(
        TIMESTAMP,
        "timestamp",
        "timestamp without time zone",
        8,
        lambda t: pa.types.is_timestamp(t) and t.tz is None,
    ),
    PgType(TIMESTAMPTZ, "timestamptz", "timestamp with time zone", 8, pa.types.is_timestamp),
    PgType(DATE, "date", "date", 4, lambda t: pa.types.is_date32(t) or pa.types.is_date64(t)),
    PgType(
        BYTEA, "bytea", "bytea", -1, lambda t: pa.types.is_binary(t) or pa.types.is_large_binary(t)
    ),
    PgType(TEXT, "text", "text", -1, lambda _: True),
)
_BY_OID = {t.oid: t for t in TYPES}


def pg_type(arrow: pa.DataType) -> PgType:
    """The PostgreSQL type a column of ``arrow`` is sent as (text for any other)."""
    if pa.types.is_dictionary(arrow):
        return pg_type(arrow.value_type)
    return next(t for t in TYPES if t.matches(arrow))


def type_name(arrow: pa.DataType) -> str:
    """The standard name of the PostgreSQL type a column of ``arrow`` is sent as."""
    return pg_type(arrow).name


def quote_ident(name: str) -> str:
    """``name`` as PostgreSQL writes it in SQL: bare when it reads back as itself."""
    if _PLAIN.match(name) and name not in _KEYWORDS:
        return name
    return '"' + name.replace('"', '""') + '"'


def parse_ident(text: str) -> list[str]:
    """A qualified name's parts: quoted ones as written, bare ones folded to lower case."""
    parts: list[str] = []
    rest = text.strip()
    while True:
        if rest.startswith('"'):
            end = 1
            while True:
                end = rest.find('"', end)
                if end < 0:
                    raise InvalidArgument(f"string is not a valid identifier: {text!r}")
                if rest[end + 1 : end + 2] != '"':
                    break
                end += 2
            parts.append(rest[1:end].replace('""', '"'))
            rest = rest[end + 1 :].lstrip()
        else:
            bare = re.match(r"[^\s.\"]+", rest)
            if bare is None:
                raise InvalidArgument(f"string is not a valid identifier: {text!r}")
            parts.append(bare.group(0).lower())
            rest = rest[bare.end() :].lstrip()
        if not rest:
            return parts
        if not rest.startswith("."):
            raise InvalidArgument(f"string is not a valid identifier: {text!r}")
        rest = rest[1:].lstrip()


def setting(name: str) -> str:
    """The value of the setting ``name`` (in any case)."""
    value = SETTINGS.get(name.lower())
    if value is None:
        raise InvalidArgument(f'unrecognized configuration parameter "{name}"')
    return value


def _current_setting(names: pa.Array[Any]) -> pa.Array[Any]:
    return pa.array([None if n is None else setting(n) for n in names.to_pylist()], pa.string())


def _quote_ident(names: pa.Array[Any]) -> pa.Array[Any]:
    return pa.array([None if n is None else quote_ident(n) for n in names.to_pylist()], pa.string())


def _parse_ident(names: pa.Array[Any]) -> pa.Array[Any]:
    return pa.array(
        [None if n is None else parse_ident(n) for n in names.to_pylist()], pa.list_(pa.string())
    )


def _bound(lower: bool) -> Any:
    def bound(arrays: pa.Array[Any], dimensions: pa.Array[Any]) -> pa.Array[Any]:
        out = []
        for items, dimension in zip(arrays.to_pylist(), dimensions.to_pylist(), strict=True):
            # Arrays here are one-dimensional and start at 1, as string_to_array's do.
            out.append(None if not items or dimension != 1 else 1 if lower else len(items))
        return pa.array(out, pa.int64())

    return bound


#: The schemas always searched, as current_schemas(true) names them.
SCHEMAS_SEARCHED = ("pg_catalog", DATABASE)
#: The role every object is owned by.
OWNER = "gnomon"


def _current_schemas(implicit: pa.Array[Any]) -> pa.Array[Any]:
    searched = list(SCHEMAS_SEARCHED)
    return pa.array(
        [None if i is None else searched if i else searched[1:] for i in implicit.to_pylist()],
        pa.list_(pa.string()),
    )


def _format_type(oids: pa.Array[Any], _: pa.Array[Any]) -> pa.Array[Any]:
    return pa.array(
        [None if o is None or o not in _BY_OID else _BY_OID[o].name for o in oids.to_pylist()],
        pa.string(),
    )


def _constant(value: object, kind: pa.DataType) -> Callable[..., pa.Array[Any]]:
    """A function answering ``value`` whatever it is given: gnomon has one owner, no
    comments, no defaults kept as expressions, and every table visible."""

    def answer(first: pa.Array[Any], *_: pa.Array[Any]) -> pa.Array[Any]:
        return pa.array([value] * len(first), kind)

    return answer


_TEXT, _TEXTS, _OID = pa.string(), pa.list_(pa.string()), pa.int64()

#: The functions: (function, argument types, result type, name).
SCALARS: tuple[tuple[Callable[..., pa.Array[Any]], list[pa.DataType], pa.DataType, str], ...] = (
    (_current_setting, [_TEXT], _TEXT, "current_setting"),
    (_quote_ident, [_TEXT], _TEXT, "quote_ident"),
    (_parse_ident, [_TEXT], _TEXTS, "parse_ident"),
    (_bound(lower=True), [_TEXTS, pa.int64()], pa.int64(), "array_lower"),
    (_bound(lower=False), [_TEXTS, pa.int64()], pa.int64(), "array_upper"),
    (_current_schemas, [pa.bool_()], _TEXTS, "current_schemas"),
    (_format_type, [_OID, pa.int64()], _TEXT, "format_type"),
    (_constant(True, pa.bool_()), [_OID], pa.bool_(), "pg_table_is_visible"),
    (_constant(OWNER, _TEXT), [_OID], _TEXT, "pg_get_userbyid"),
    (_constant(None, _TEXT), [_TEXT, _OID], _TEXT, "pg_get_expr"),
    (_constant(None, _TEXT), [_OID, _TEXT], _TEXT, "obj_description"),
    (_constant(None, _TEXT), [_OID, pa.int64()], _TEXT, "col_description"),
)
