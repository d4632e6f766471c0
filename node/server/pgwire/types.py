"""Arrow types as PostgreSQL types: the OID a column is described with, and its values in the
text and binary formats; and parameters sent in either format turned into SQL literals."""

from __future__ import annotations

import datetime as dt
import math
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from gnomon.errors import InvalidArgument
from node.sql import pg_functions
from node.sql.pg_functions import (
    BOOL,
    BYTEA,
    DATE,
    FLOAT4,
    FLOAT8,
    INT2,
    INT4,
    INT8,
    NUMERIC,
    TEXT,
    TIMESTAMP,
    TIMESTAMPTZ,
)

#: PostgreSQL's epoch for binary timestamps and dates.
PG_EPOCH = dt.datetime(2000, 1, 1)
PG_EPOCH_DATE = dt.date(2000, 1, 1)

UNKNOWN = 0

Encode = Callable[[Any], bytes]


@dataclass(frozen=True)
class PgType:
    oid: int
    name: str
    #: pg_type.typlen: bytes of a fixed-size value, -1 for variable size.
    size: int
    text: Encode
    binary: Encode


def _text_bool(v: Any) -> bytes:
    return b"t" if v else b"f"


def _text_float(v: Any) -> bytes:
    if math.isnan(v):
        return b"NaN"
    if math.isinf(v):
        return b"Infinity" if v > 0 else b"-Infinity"
    return repr(float(v)).encode()


def _text_timestamp(v: dt.datetime) -> bytes:
    return v.replace(tzinfo=None).isoformat(sep=" ").encode()


def _text_timestamptz(v: dt.datetime) -> bytes:
    return _text_timestamp(v.astimezone(dt.UTC)) + b"+00"


def _micros(v: dt.datetime) -> int:
    naive = v.astimezone(dt.UTC).replace(tzinfo=None) if v.tzinfo else v
    delta = naive - PG_EPOCH
    return (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds


def _binary_numeric(v: Any) -> bytes:
    """An integer in NUMERIC's binary form: base-10000 digits, most significant first."""
    n = int(v)
    sign = 0x4000 if n < 0 else 0
    n = abs(n)
    digits: list[int] = []
    while n:
        n, d = divmod(n, 10000)
        digits.insert(0, d)
    weight = len(digits) - 1 if digits else 0
    return struct.pack(f">hhhh{len(digits)}h", len(digits), weight, sign, 0, *digits)


def _str(v: Any) -> bytes:
    return str(v).encode()


#: How values of each type are encoded, text and binary.
_ENCODERS: dict[int, tuple[Encode, Encode]] = {
    BOOL: (_text_bool, lambda v: b"\x01" if v else b"\x00"),
    INT2: (_str, lambda v: struct.pack(">h", v)),
    INT4: (_str, lambda v: struct.pack(">i", v)),
    INT8: (_str, lambda v: struct.pack(">q", v)),
    NUMERIC: (_str, _binary_numeric),
    FLOAT4: (_text_float, lambda v: struct.pack(">f", v)),
    FLOAT8: (_text_float, lambda v: struct.pack(">d", v)),
    TEXT: (_str, lambda v: str(v).encode()),
    BYTEA: (lambda v: b"\\x" + bytes(v).hex().encode(), bytes),
    TIMESTAMP: (_text_timestamp, lambda v: struct.pack(">q", _micros(v))),
    TIMESTAMPTZ: (_text_timestamptz, lambda v: struct.pack(">q", _micros(v))),
    DATE: (lambda v: v.isoformat().encode(), lambda v: struct.pack(">i", (v - PG_EPOCH_DATE).days)),
}
_BY_OID = {t.oid: PgType(t.oid, t.name, t.size, *_ENCODERS[t.oid]) for t in pg_functions.TYPES}


def pg_type(arrow: pa.DataType) -> PgType:
    """The PostgreSQL type an Arrow column is described and sent as (text for the rest)."""
    return _BY_OID[pg_functions.pg_type(arrow).oid]


#: Types whose text form Arrow's cast to string writes as PostgreSQL reads it.
_CAST_AS_TEXT = frozenset({INT2, INT4, INT8, NUMERIC, FLOAT4, FLOAT8, TEXT, TIMESTAMP, DATE})


def text_values(column: pa.ChunkedArray[Any]) -> list[bytes | None]:
    """A column's values in the text format, cast by Arrow where its text is PostgreSQL's
    (many times faster than a value at a time), else encoded one by one."""
    t = pg_type(column.type)
    if pa.types.is_dictionary(column.type):
        column = column.cast(column.type.value_type)
    if t.oid == BOOL:
        column = pc.if_else(column, "t", "f")
    elif t.oid not in _CAST_AS_TEXT:
        return [None if v is None else t.text(v) for v in column.to_pylist()]
    return column.cast(pa.string()).cast(pa.binary()).to_pylist()  # type: ignore[no-any-return]


# -- parameters ----------------------------------------------------------------------------------


def quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _timestamp_literal(micros: int, tz: bool) -> str:
    value = PG_EPOCH + dt.timedelta(microseconds=micros)
    return f"TIMESTAMP {quote(value.isoformat(sep=' '))}"


_BINARY_PARAM: dict[int, Callable[[bytes], str]] = {
    BOOL: lambda b: "TRUE" if b != b"\x00" else "FALSE",
    INT2: lambda b: str(struct.unpack(">h", b)[0]),
    INT4: lambda b: str(struct.unpack(">i", b)[0]),
    INT8: lambda b: str(struct.unpack(">q", b)[0]),
    FLOAT4: lambda b: repr(struct.unpack(">f", b)[0]),
    FLOAT8: lambda b: repr(struct.unpack(">d", b)[0]),
    BYTEA: lambda b: f"X'{b.hex()}'",
    TIMESTAMP: lambda b: _timestamp_literal(struct.unpack(">q", b)[0], False),
    TIMESTAMPTZ: lambda b: _timestamp_literal(struct.unpack(">q", b)[0], True),
    DATE: lambda b: (
        f"DATE {quote((PG_EPOCH_DATE + dt.timedelta(days=struct.unpack('>i', b)[0])).isoformat())}"
    ),
}

_NUMBERS = frozenset({INT2, INT4, INT8, FLOAT4, FLOAT8, NUMERIC})


def literal(value: bytes | None, oid: int, binary: bool) -> str:
    """The SQL literal standing for a parameter's ``value`` sent as type ``oid`` (0: the
    client left it to the server: taken as a string, which DataFusion casts where compared)."""
    if value is None:
        return "NULL"
    try:
        if binary:
            decode = _BINARY_PARAM.get(oid)
            return decode(value) if decode is not None else quote(value.decode())
        text = value.decode()
        if oid in _NUMBERS:
            float(text)  # refuses anything but a number before it reaches the statement
            return text
        if oid == BOOL:
            return "TRUE" if text.lower() in ("t", "true", "1", "on", "yes", "y") else "FALSE"
        if oid == BYTEA and text.startswith("\\x"):
            return f"X'{bytes.fromhex(text[2:]).hex()}'"
        if oid in (TIMESTAMP, TIMESTAMPTZ):
            return f"TIMESTAMP {quote(text)}"
        return quote(text)
    except (struct.error, ValueError, OverflowError) as e:
        raise InvalidArgument(f"invalid parameter of type {oid}: {e}") from None
