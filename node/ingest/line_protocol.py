"""InfluxDB line protocol to :class:`TableRows`, one per measurement.

``measurement[,tag=value...] field=value[,field=value...] [timestamp]``, one point per line.
Tags are strings. Field values: floats (``1``, ``-1.5e3``), integers (``1i``), unsigned
integers (``1u``), strings (``"text"``) and booleans (``t``, ``true``, ``F``, ``false``...).
Measurement names escape ``,`` and space with a backslash; tag keys, tag values and field keys
also escape ``=``; string field values escape ``"`` and ``\\``. Lines that are empty or start
with ``#`` are skipped. A point without a timestamp gets the time of the request.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from gnomon.errors import InvalidArgument
from node.engine.schema import ColumnType
from node.ingest.line_uniform import TRUE_WORDS, field_type, parse_uniform
from node.ingest.rows import TableRows

#: Precision name (line protocol's, and Arrow's timestamp units) -> (multiplier, divisor)
#: turning a timestamp into milliseconds.
PRECISIONS: dict[str, tuple[int, int]] = {
    "ns": (1, 1_000_000),
    "n": (1, 1_000_000),
    "us": (1, 1_000),
    "u": (1, 1_000),
    "ms": (1, 1),
    "s": (1_000, 1),
    "m": (60_000, 1),
    "h": (3_600_000, 1),
}

#: Timestamps are stored as signed 64-bit milliseconds.
MIN_TS_MS, MAX_TS_MS = -(2**63), 2**63 - 1

#: Bodies with fewer lines go straight to the line-by-line parser: the vectorised one costs
#: a fixed half millisecond or so in Arrow calls, which the general parser only reaches at
#: about this many lines (measured on TSBS-like lines of a few tags and fields).
UNIFORM_MIN_LINES = 48


class _LineError(Exception):
    """A malformed line; turned into InvalidArgument naming the line number."""


def _field_value(text: str) -> tuple[ColumnType, Any]:
    if not text:
        raise _LineError("field has no value")
    typ = field_type(text)
    if typ is ColumnType.INT64:
        try:
            return typ, int(text[:-1])
        except ValueError:
            raise _LineError(f"invalid integer field value {text!r}") from None
    if typ is ColumnType.UINT64:
        try:
            v = int(text[:-1])
        except ValueError:
            raise _LineError(f"invalid unsigned integer field value {text!r}") from None
        if v < 0:
            raise _LineError(f"unsigned integer field value {text!r} is negative")
        return typ, v
    if typ is ColumnType.BOOLEAN:
        return typ, text in TRUE_WORDS
    try:
        v_float = float(text)
    except ValueError:
        raise _LineError(
            f"invalid field value {text!r}: expected a number, an integer with suffix i or u, "
            'a "string" or a boolean'
        ) from None
    if v_float != v_float or v_float in (float("inf"), float("-inf")):
        raise _LineError(f"invalid field value {text!r}: NaN and infinity are not accepted")
    return typ, v_float


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    out: list[str] = []
    i = 0
    n = len(text)
    while i < n:
        c = text[i]
        if c == "\\" and i + 1 < n and text[i + 1] in ",= \\":
            out.append(text[i + 1])
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _split_unescaped(text: str, sep: str) -> list[str]:
    """``text`` split at each ``sep`` not preceded by a backslash (escapes are kept)."""
    if "\\" not in text:
        return text.split(sep)
    parts: list[str] = []
    start = 0
    i = 0
    n = len(text)
    while i < n:
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == sep:
            parts.append(text[start:i])
            start = i + 1
        i += 1
    parts.append(text[start:])
    return parts


def _sections(line: str) -> tuple[str, str, str | None]:
    """The key (measurement and tags), field set and timestamp text of one line, split at
    spaces that are neither escaped nor inside a quoted string."""
    if "\\" not in line and '"' not in line:
        parts = [p for p in line.split(" ") if p]
    else:
        parts = []
        start = 0
        i = 0
        n = len(line)
        quoted = False
        while i < n:
            c = line[i]
            if c == "\\":
                i += 2
                continue
            if c == '"':
                quoted = not quoted
            elif c == " " and not quoted:
                if i > start:
                    parts.append(line[start:i])
                start = i + 1
            i += 1
        if quoted:
            raise _LineError("unterminated string field value")
        if start < n:
            parts.append(line[start:])
    if len(parts) == 2:
        return parts[0], parts[1], None
    if len(parts) == 3:
        return parts[0], parts[1], parts[2]
    if len(parts) < 2:
        raise _LineError("expected a measurement and at least one field")
    raise _LineError(
        "too many space-separated parts: expected measurement[,tags] fields [timestamp]"
    )


def _fields(text: str) -> list[tuple[str, ColumnType, Any]]:
    if '"' not in text and "\\" not in text:
        # No strings and no escapes: every ',' and '=' is a separator.
        simple: list[tuple[str, ColumnType, Any]] = []
        for pair in text.split(","):
            key, sep, value = pair.partition("=")
            if not sep:
                raise _LineError(
                    "trailing ',' after the last field"
                    if not pair
                    else f"field {pair!r} has no '='"
                )
            if not key:
                raise _LineError("field with an empty name")
            typ, parsed = _field_value(value)
            simple.append((key, typ, parsed))
        return simple
    out: list[tuple[str, ColumnType, Any]] = []
    i = 0
    n = len(text)
    while i < n:
        eq = i
        while eq < n and text[eq] != "=":
            eq += 2 if text[eq] == "\\" else 1
        if eq >= n:
            raise _LineError(f"field {text[i:]!r} has no '='")
        key = _unescape(text[i:eq])
        if not key:
            raise _LineError("field with an empty name")
        j = eq + 1
        if j < n and text[j] == '"':
            buf: list[str] = []
            j += 1
            while j < n and text[j] != '"':
                if text[j] == "\\" and j + 1 < n and text[j + 1] in '"\\':
                    buf.append(text[j + 1])
                    j += 2
                else:
                    buf.append(text[j])
                    j += 1
            if j >= n:
                raise _LineError(f"unterminated string value of field {key!r}")
            out.append((key, ColumnType.STRING, "".join(buf)))
            j += 1
        else:
            end = text.find(",", j)
            end = n if end < 0 else end
            typ, value = _field_value(text[j:end])
            out.append((key, typ, value))
            j = end
        if j < n:
            if text[j] != ",":
                raise _LineError(f"expected ',' after the value of field {key!r}")
            j += 1
            if j >= n:
                raise _LineError("trailing ',' after the last field")
        i = j
    if not out:
        raise _LineError("no fields")
    return out


def _tags(pairs: list[str]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for pair in pairs:
        kv = _split_unescaped(pair, "=")
        if len(kv) != 2 or not kv[0]:
            raise _LineError(f"invalid tag {pair!r}: expected key=value")
        name, value = _unescape(kv[0]), _unescape(kv[1])
        if not value:
            raise _LineError(f"tag {name!r} has an empty value")
        out.append((name, value))
    return out


def _check_keys(tags: list[tuple[str, str]], fields: list[tuple[str, ColumnType, Any]]) -> None:
    """A line names each key once: a repeated tag or field, or a key that is both, would
    leave which value counts to the order of parsing (InfluxDB refuses duplicate tags)."""
    tag_keys = [name for name, _ in tags]
    field_keys = [name for name, _, _ in fields]
    if len(tag_keys) + len(field_keys) == len(set(tag_keys) | set(field_keys)):
        return
    for kind, keys in (("tag", tag_keys), ("field", field_keys)):
        seen: set[str] = set()
        for name in keys:
            if name in seen:
                raise _LineError(f"duplicate {kind} key {name!r}")
            seen.add(name)
    both = sorted(set(tag_keys) & set(field_keys))
    raise _LineError(f"key {both[0]!r} is both a tag and a field")


def parse(
    text: str,
    *,
    precision: str = "ns",
    now_ms: Callable[[], int] | None = None,
) -> list[TableRows]:
    """The points of ``text`` grouped by measurement, timestamps in milliseconds (sub-ms
    precision is dropped). Raises InvalidArgument naming the first bad line."""
    try:
        mul, div = PRECISIONS[precision]
    except KeyError:
        raise InvalidArgument(
            f"invalid precision {precision!r}; expected one of {', '.join(PRECISIONS)}"
        ) from None
    default_ts = (now_ms or (lambda: time.time_ns() // 1_000_000))()
    if text.count("\n") >= UNIFORM_MIN_LINES:
        uniform = parse_uniform(text, mul=mul, div=div, default_ts=default_ts)
        if uniform is not None:
            return uniform
    return parse_general(text, mul=mul, div=div, default_ts=default_ts)


def parse_general(text: str, *, mul: int, div: int, default_ts: int) -> list[TableRows]:
    """:func:`parse` line by line, for any body (the vectorised parser takes the common
    shape first); every error message comes from here."""
    tables: dict[str, TableRows] = {}
    for number, raw in enumerate(text.split("\n"), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        try:
            key, field_text, ts_text = _sections(line)
            key_parts = _split_unescaped(key, ",")
            measurement = _unescape(key_parts[0])
            if not measurement:
                raise _LineError("empty measurement name")
            if ts_text is None:
                ts = default_ts
            else:
                try:
                    ts = int(ts_text) * mul // div
                except ValueError:
                    raise _LineError(f"invalid timestamp {ts_text!r}") from None
                if not MIN_TS_MS <= ts <= MAX_TS_MS:
                    raise _LineError(f"timestamp {ts_text!r} is out of range")
            rows = tables.get(measurement)
            if rows is None:
                rows = tables[measurement] = TableRows(measurement)
            row = rows.num_rows
            tags = _tags(key_parts[1:])
            fields = _fields(field_text)
            _check_keys(tags, fields)
            for name, value in tags:
                rows.column(name, is_tag=True, type=ColumnType.STRING).put(row, value)
            for name, typ, field_value in fields:
                rows.column(name, is_tag=False, type=typ).put(row, field_value)
            rows.timestamps.append(ts)
        except (_LineError, InvalidArgument) as e:
            message = e.message if isinstance(e, InvalidArgument) else str(e)
            raise InvalidArgument(f"line {number}: {message}") from None
    return list(tables.values())
