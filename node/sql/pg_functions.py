"""PostgreSQL's functions that its clients call in their catalog queries, added to every
session so they run on the one query path whichever protocol sent them: the server's
settings (``current_setting``), identifiers quoted and parsed as PostgreSQL quotes them
(``quote_ident``, ``parse_ident``) and the bounds of one-dimensional arrays
(``array_lower``, ``array_upper``)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
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


def type_name(arrow: pa.DataType) -> str:
    """The standard name of the PostgreSQL type a column of ``arrow`` is sent as."""
    if pa.types.is_dictionary(arrow):
        return type_name(arrow.value_type)
    for test, name in _TYPE_NAMES:
        if test(arrow):
            return name
    return "text"


_TYPE_NAMES: tuple[tuple[Callable[[pa.DataType], bool], str], ...] = (
    (pa.types.is_boolean, "boolean"),
    (lambda t: t in (pa.int8(), pa.int16(), pa.uint8()), "smallint"),
    (lambda t: t in (pa.int32(), pa.uint16()), "integer"),
    (lambda t: t in (pa.int64(), pa.uint32()), "bigint"),
    (pa.types.is_uint64, "numeric"),
    (lambda t: t in (pa.float16(), pa.float32()), "real"),
    (pa.types.is_float64, "double precision"),
    (lambda t: pa.types.is_timestamp(t) and t.tz is None, "timestamp without time zone"),
    (pa.types.is_timestamp, "timestamp with time zone"),
    (lambda t: pa.types.is_date32(t) or pa.types.is_date64(t), "date"),
    (lambda t: pa.types.is_binary(t) or pa.types.is_large_binary(t), "bytea"),
)


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


_TEXT, _TEXTS = pa.string(), pa.list_(pa.string())

#: The functions: (function, argument types, result type, name).
SCALARS: tuple[tuple[Callable[..., pa.Array[Any]], list[pa.DataType], pa.DataType, str], ...] = (
    (_current_setting, [_TEXT], _TEXT, "current_setting"),
    (_quote_ident, [_TEXT], _TEXT, "quote_ident"),
    (_parse_ident, [_TEXT], _TEXTS, "parse_ident"),
    (_bound(lower=True), [_TEXTS, pa.int64()], pa.int64(), "array_lower"),
    (_bound(lower=False), [_TEXTS, pa.int64()], pa.int64(), "array_upper"),
)
