"""A vectorised parser for the common shape of an InfluxDB line-protocol body: every line has
the same measurement, the same tag keys and field keys in the same order, and either every line
or none has a timestamp, with no quotes or escapes anywhere (what Telegraf, SDKs and TSBS send
for one measurement).

The first line is the template; the body is cut into lines, sections, pairs and values with
Arrow string kernels (checking every line against the template on the way), and each column is
turned into its type by one Arrow cast: no Python object per line or value. A
body that does not fit exactly (a line of another shape, a value that does not cast, NaN ...)
returns None and takes the general parser (:func:`node.ingest.line_protocol.parse`), which also
produces every error message. About seven times faster than the general parser on TSBS lines.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from node.engine.schema import ColumnType
from node.ingest.rows import ColumnValues, TableRows

#: The spellings of booleans in line protocol.
TRUE_WORDS = frozenset({"t", "T", "true", "True", "TRUE"})
FALSE_WORDS = frozenset({"f", "F", "false", "False", "FALSE"})
_BOOLS = pa.array(sorted(TRUE_WORDS | FALSE_WORDS))
_TRUES = pa.array(sorted(TRUE_WORDS))


class _Misfit(Exception):
    """The body is not of the uniform shape (or a value does not cast): use the general path."""


def _pairs(text: str) -> list[str]:
    keys = []
    for pair in text.split(","):
        key, sep, value = pair.partition("=")
        if not sep or not key or not value or "=" in value:
            raise _Misfit
        keys.append(key)
    if len(set(keys)) != len(keys):
        raise _Misfit
    return keys


def field_type(value: str) -> ColumnType:
    """The type a (non-empty, unquoted) field value denotes: suffix ``i`` or ``u``, a boolean
    word, else a float (whether it parses is the caller's check)."""
    if value[-1] == "i":
        return ColumnType.INT64
    if value[-1] == "u":
        return ColumnType.UINT64
    if value in TRUE_WORDS or value in FALSE_WORDS:
        return ColumnType.BOOLEAN
    return ColumnType.DOUBLE


def _typed(values: pa.Array[Any], typ: ColumnType) -> pa.Array[Any]:
    try:
        if typ is ColumnType.DOUBLE:
            out = values.cast(pa.float64())
            if not pc.all(pc.is_finite(out)).as_py():
                raise _Misfit  # NaN and infinity are refused, with a message, by the general path
            return out
        if typ is ColumnType.BOOLEAN:
            if not pc.all(pc.is_in(values, value_set=_BOOLS)).as_py():
                raise _Misfit
            return pc.is_in(values, value_set=_TRUES)
        suffix = "i" if typ is ColumnType.INT64 else "u"
        if not pc.all(pc.ends_with(values, suffix)).as_py():
            raise _Misfit
        digits = pc.utf8_slice_codeunits(values, 0, -1)
        return digits.cast(pa.int64() if typ is ColumnType.INT64 else pa.uint64())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        raise _Misfit from None


def parse_uniform(text: str, *, mul: int, div: int, default_ts: int) -> list[TableRows] | None:
    """The points of ``text`` if it has the uniform shape (see the module), else None.
    Timestamps are multiplied by ``mul`` and floor-divided by ``div`` into milliseconds;
    lines without one get ``default_ts``."""
    if '"' in text or "\\" in text:
        return None
    lines: Any = pc.list_flatten(pc.split_pattern(pa.array([text], pa.large_string()), "\n"))
    wanted = pc.and_(
        pc.greater(pc.utf8_length(lines), pa.scalar(0)), pc.invert(pc.starts_with(lines, "#"))
    )
    lines = lines.filter(wanted)
    if len(lines) == 0:
        return None
    try:
        return [_parse(lines, mul=mul, div=div, default_ts=default_ts)]
    except _Misfit:
        return None


def _split(values: pa.Array[Any], separator: str, count: int) -> list[pa.Array[Any]]:
    """Each of ``values`` cut at ``separator`` into exactly ``count`` parts, as ``count``
    columns."""
    lists = pc.split_pattern(values, separator)
    lengths: Any = pc.list_value_length(lists)
    if not pc.all(pc.equal(lengths, pa.scalar(count))).as_py():
        raise _Misfit
    return [pc.list_element(lists, i) for i in range(count)]


def _values(pairs: pa.Array[Any], key: str) -> pa.Array[Any]:
    """The values of ``key=value`` texts that all name ``key``."""
    prefix = f"{key}="
    if not pc.all(pc.starts_with(pairs, prefix)).as_py():
        raise _Misfit
    values: Any = pc.utf8_slice_codeunits(pairs, len(prefix))
    if (
        not pc.all(pc.greater(pc.utf8_length(values), pa.scalar(0))).as_py()
        or pc.any(pc.match_substring(values, "=")).as_py()
    ):
        raise _Misfit
    out: pa.Array[Any] = values.cast(pa.string())
    return out


def _parse(lines: pa.Array[Any], *, mul: int, div: int, default_ts: int) -> TableRows:
    first = str(lines[0].as_py()).split(" ")
    if len(first) not in (2, 3):
        raise _Misfit
    measurement, *tag_pairs = first[0].split(",")
    if not measurement or "=" in measurement:
        raise _Misfit
    tags = _pairs(",".join(tag_pairs)) if tag_pairs else []
    fields = _pairs(first[1])
    if set(tags) & set(fields):
        raise _Misfit
    sections = _split(lines, " ", len(first))
    key_parts: list[Any] = _split(sections[0], ",", 1 + len(tags))
    if not pc.all(pc.equal(key_parts[0], pa.scalar(measurement))).as_py():
        raise _Misfit
    rows = TableRows(measurement)
    for name, pairs in zip(tags, key_parts[1:], strict=True):
        rows.columns[name] = ColumnValues(name, True, ColumnType.STRING, built=_values(pairs, name))
    samples = [pair.partition("=")[2] for pair in first[1].split(",")]
    field_parts = _split(sections[1], ",", len(fields))
    for name, sample, pairs in zip(fields, samples, field_parts, strict=True):
        typ = field_type(sample)
        rows.columns[name] = ColumnValues(name, False, typ, built=_typed(_values(pairs, name), typ))
    if len(first) == 3:
        try:
            raw = sections[2].cast(pa.int64()).to_numpy()
        except pa.ArrowInvalid:
            raise _Misfit from None
        if mul > 1 and np.abs(raw).max() > np.iinfo(np.int64).max // mul:
            raise _Misfit  # out of range in milliseconds: the general parser says so
        rows.timestamps = (raw * mul // div).tolist()
    else:
        rows.timestamps = [default_ts] * len(lines)
    return rows
