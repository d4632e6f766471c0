"""How the etcd backend of the StructuredTable SPI (:mod:`gnomon.store.etcd`) lays data out in
etcd: order-preserving key bytes, rows as compact JSON, catalog entries, the key layout of a
namespace, and filters checked and normalised the way stored values are."""

from __future__ import annotations

import base64
import functools
import json
import math
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gnomon.errors import Corrupted, GnomonError, InvalidArgument
from gnomon.store.api import Row
from gnomon.store.filters import And, Eq, Filter, In, Not, Or, Range
from gnomon.store.spec import FieldType, TableSpec
from gnomon.store.sqlfilter import normalise_value

_FLOAT_TYPES = frozenset({FieldType.FLOAT, FieldType.DOUBLE})
_SIGN = 1 << 63
_ALL_BITS = (1 << 64) - 1


# -- key encoding -----------------------------------------------------------------------------


def _escaped(data: bytes) -> bytes:
    # 0x00 becomes 0x00 0xFF and the value ends with 0x00 0x01: the terminator sorts below every
    # escaped byte, so a value sorts before its extensions and the encoding is prefix-free.
    return data.replace(b"\x00", b"\x00\xff") + b"\x00\x01"


def encode_value(field_type: FieldType, value: Any) -> bytes:
    """Order-preserving, self-delimiting bytes of one (normalised, non-null) field value.

    Strings sort by code point (their UTF-8 bytes do), bytes bytewise, ints numerically (64-bit
    big-endian with the sign bit flipped), floats numerically with -0.0 equal to 0.0.
    """
    if field_type is FieldType.STRING:
        return _escaped(value.encode("utf-8"))
    if field_type is FieldType.BYTES:
        return _escaped(bytes(value))
    if field_type in _FLOAT_TYPES:
        number = float(value) + 0.0  # adding 0.0 turns -0.0 into 0.0
        (bits,) = struct.unpack(">Q", struct.pack(">d", number))
        bits = bits ^ _ALL_BITS if bits & _SIGN else bits | _SIGN
        return int(bits).to_bytes(8, "big")
    return (int(value) + _SIGN).to_bytes(8, "big")


def encode_key(spec: TableSpec, values: Sequence[Any]) -> bytes:
    """The bytes of a (partial) primary key; a prefix's bytes prefix those of its full keys."""
    return b"".join(
        encode_value(spec.field(name).type, value)
        for name, value in zip(spec.primary_key, values, strict=False)
    )


def successor(key: bytes) -> bytes:
    return key + b"\x00"


# -- row encoding -----------------------------------------------------------------------------


def dump_row(spec: TableSpec, row: Mapping[str, Any]) -> bytes:
    """Compact JSON of a normalised row; nulls are left out, bytes are base64, infinities are
    the strings "inf"/"-inf" (JSON has no token for them)."""
    out: dict[str, Any] = {}
    for f in spec.fields:
        value = row.get(f.name)
        if value is None:
            continue
        if f.type is FieldType.BYTES:
            value = base64.b64encode(value).decode("ascii")
        elif f.type in _FLOAT_TYPES and math.isinf(value):
            value = "inf" if value > 0 else "-inf"
        out[f.name] = value
    # ASCII: field names may hold lone surrogates, which have no UTF-8 bytes.
    return json.dumps(out, separators=(",", ":"), allow_nan=False).encode()


def load_row(spec: TableSpec, key: bytes, data: bytes) -> Row:
    try:
        raw = json.loads(data)
        row: Row = {}
        for f in spec.fields:
            value = raw.get(f.name)
            if value is not None:
                if f.type is FieldType.BYTES:
                    value = base64.b64decode(value, validate=True)
                elif f.type in _FLOAT_TYPES:
                    value = float(value)
            row[f.name] = value
        return row
    except (ValueError, TypeError, AttributeError) as e:
        raise Corrupted(f"table {spec.name!r}: row at etcd key {key!r} is not valid: {e}") from e


# -- catalog ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    id: int
    spec: TableSpec


@functools.lru_cache(maxsize=1024)
def load_entry(data: bytes) -> Entry:
    try:
        raw = json.loads(data)
        return Entry(int(raw["id"]), TableSpec.from_json(raw["spec"]))
    except (ValueError, TypeError, KeyError, GnomonError) as e:
        raise Corrupted(f"etcd catalog entry {data[:200]!r} is not valid: {e}") from e


def dump_entry(entry: Entry) -> bytes:
    return json.dumps({"id": entry.id, "spec": entry.spec.to_json()}).encode()


class Layout:
    """The keys of one namespace."""

    def __init__(self, namespace: str) -> None:
        base = namespace.rstrip("/").encode("utf-8", "surrogatepass") + b"/"
        self.base = base
        self.next_id = base + b"next_id"
        self._catalog = base + b"catalog/"
        self._tables = base + b"tables/"

    def catalog(self, name: str) -> bytes:
        # surrogatepass: every Python str is a valid table name here, so it must have bytes.
        return self._catalog + name.encode("utf-8", "surrogatepass")

    def table(self, table_id: int) -> bytes:
        return self._tables + str(table_id).encode() + b"/"


# -- filters ----------------------------------------------------------------------------------


def _checked_value(spec: TableSpec, name: str, value: Any) -> Any:
    # Ints given for float fields stay ints here: matches() compares them with the stored
    # floats exactly, as the reference semantics want.
    spec.check_value(name, value)
    return normalise_value(spec, name, value)


def stored_value(spec: TableSpec, name: str, value: Any) -> Any:
    value = _checked_value(spec, name, value)
    if value is not None and spec.field(name).type in _FLOAT_TYPES:
        return float(value)
    return value


def checked_filter(spec: TableSpec, f: Filter) -> Filter:
    """``f`` with every value checked against its field and normalised as stored values are, so
    that :func:`matches` on stored rows is the whole evaluation."""
    if isinstance(f, Eq):
        spec.field(f.field)
        return f if f.value is None else Eq(f.field, _checked_value(spec, f.field, f.value))
    if isinstance(f, In):
        spec.field(f.field)
        return In(
            f.field,
            frozenset(None if v is None else _checked_value(spec, f.field, v) for v in f.values),
        )
    if isinstance(f, Range):
        spec.field(f.field)
        return Range(
            f.field,
            None if f.lower is None else _checked_value(spec, f.field, f.lower),
            None if f.upper is None else _checked_value(spec, f.field, f.upper),
            f.lower_inclusive,
            f.upper_inclusive,
        )
    if isinstance(f, Not):
        return Not(checked_filter(spec, f.filter))
    if isinstance(f, And):
        return And(tuple(checked_filter(spec, s) for s in f.filters))
    if isinstance(f, Or):
        return Or(tuple(checked_filter(spec, s) for s in f.filters))
    raise InvalidArgument(f"table {spec.name!r}: not a filter: {f!r}")


def check_limit(spec: TableSpec, limit: int | None) -> None:
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise InvalidArgument(f"table {spec.name!r}: bad scan limit {limit!r}")
