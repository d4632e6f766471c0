"""A vectorised decoder for the common shape of a HoraeDB ``WriteTableRequest``: every field
group of every series entry has the same layout (a timestamp, then the same float64 fields in
the same order), as SDK clients writing one metric set produce.

Reading such a request through the protobuf objects costs about a microsecond per value (one
Python object per ``Field`` and ``Value``); here the request's wire bytes are cut into one
fixed-width row per field group with numpy, every row is checked byte for byte against the
first one outside the value bytes, and the timestamps and doubles are read as columns. Any
request that does not fit exactly (another value type, a missing or repeated field, a field
index out of range, varints of different lengths...) returns None and takes the general path
(:func:`node.ingest.horaedb.decode_table_request`), which also produces every error message.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gnomon.proto import storage_pb2

#: Wire types.
_VARINT, _I64, _LEN = 0, 1, 2
#: Protobuf field numbers used here.
_TABLE_ENTRIES = 4
_ENTRY_GROUPS = 2
_GROUP_TIMESTAMP, _GROUP_FIELDS = 1, 2
_FIELD_INDEX, _FIELD_VALUE = 1, 2
_VALUE_FLOAT64 = 1


class _Misfit(Exception):
    """The bytes are not of the uniform shape."""


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise _Misfit
        b = buf[pos]
        result |= (b & 0x7F) << shift
        pos += 1
        if b < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise _Misfit


def _fields(buf: bytes, start: int, end: int) -> Iterator[tuple[int, int, int, int, int]]:
    """(field number, wire type, start of key, start of value, end of value) of each field
    in a message; a varint's value spans its bytes."""
    pos = start
    while pos < end:
        key_start = pos
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == _VARINT:
            _, after = _varint(buf, pos)
        elif wire == _I64:
            after = pos + 8
        elif wire == _LEN:
            length, pos = _varint(buf, pos)
            after = pos + length
        else:
            raise _Misfit
        if after > end:
            raise _Misfit
        yield number, wire, key_start, pos, after
        pos = after


@dataclass(frozen=True)
class _Layout:
    """Where the values sit in every field group (offsets from the group's first byte)."""

    stride: int
    ts_start: int
    ts_len: int
    fields: list[tuple[int, int]]  # (name index, offset of the 8 value bytes)


def _layout(buf: bytes, start: int, n_fields: int) -> _Layout:
    """The layout of the field group at ``start`` (its ``LEN`` key included)."""
    key, pos = _varint(buf, start)
    if key != (_ENTRY_GROUPS << 3 | _LEN):
        raise _Misfit
    length, body = _varint(buf, pos)
    end = body + length
    parts = list(_fields(buf, body, end))
    if not parts or parts[0][:2] != (_GROUP_TIMESTAMP, _VARINT):
        raise _Misfit  # a zero timestamp is left out of the bytes: not uniform
    _, _, _, ts_start, ts_end = parts[0]
    fields: list[tuple[int, int]] = []
    seen: set[int] = set()
    for number, wire, _, f_start, f_end in parts[1:]:
        if (number, wire) != (_GROUP_FIELDS, _LEN):
            raise _Misfit
        index, offset = 0, -1
        for fn, fw, _, v_start, v_end in _fields(buf, f_start, f_end):
            if (fn, fw) == (_FIELD_INDEX, _VARINT):
                index, _ = _varint(buf, v_start)
            elif (fn, fw) == (_FIELD_VALUE, _LEN):
                inner = list(_fields(buf, v_start, v_end))
                if len(inner) != 1 or inner[0][:2] != (_VALUE_FLOAT64, _I64):
                    raise _Misfit
                offset = inner[0][3]
            else:
                raise _Misfit
        if offset < 0 or index in seen or index >= n_fields:
            raise _Misfit
        seen.add(index)
        fields.append((index, offset - start))
    return _Layout(end - start, ts_start - start, ts_end - ts_start, fields)


def _group_starts(buf: bytes) -> tuple[list[int], list[tuple[int, int]], int] | None:
    """The start of every field group, (first row, group count) per entry, and the start of
    the first group; None when no entry has groups."""
    starts: list[int] = []
    per_entry: list[tuple[int, int]] = []
    stride = first = -1
    for number, wire, _, e_start, e_end in _fields(buf, 0, len(buf)):
        if (number, wire) != (_TABLE_ENTRIES, _LEN):
            continue
        # The groups must be one run ending the entry; they are not walked here: the rest
        # of the entry is cut into stride-sized rows and each row must repeat the first
        # group's bytes outside its values, which only a group of the same layout does.
        groups_at = -1
        for fn, _, key_start, _, _ in _fields(buf, e_start, e_end):
            if fn == _ENTRY_GROUPS:
                groups_at = key_start
                break
        if groups_at < 0:
            per_entry.append((len(starts), 0))
            continue
        if stride < 0:
            first = groups_at
            _, body = _varint(buf, groups_at)
            length, after_len = _varint(buf, body)
            stride = after_len + length - groups_at
        span = e_end - groups_at
        if span % stride:
            raise _Misfit
        count = span // stride
        per_entry.append((len(starts), count))
        starts.extend(range(groups_at, e_end, stride))
    if stride < 0:
        return None
    return starts, per_entry, first


def decode_uniform(
    req: storage_pb2.WriteTableRequest,
) -> tuple[list[int], dict[int, list[float]], list[tuple[int, int]]] | None:
    """Timestamps, values per field name index and (first row, rows) per series entry of a
    request whose field groups are all alike; None for any other request."""
    buf = req.SerializeToString()
    try:
        found = _group_starts(buf)
        if found is None:
            return None
        starts, per_entry, first = found
        layout = _layout(buf, first, len(req.field_names))
    except _Misfit:
        return None
    data = np.frombuffer(buf, dtype=np.uint8)
    rows: npt.NDArray[np.uint8] = data[
        np.asarray(starts, dtype=np.int64)[:, None] + np.arange(layout.stride)
    ]
    is_value = np.zeros(layout.stride, dtype=bool)
    is_value[layout.ts_start : layout.ts_start + layout.ts_len] = True
    for _, offset in layout.fields:
        is_value[offset : offset + 8] = True
    fixed = rows[:, ~is_value]
    if not (fixed == fixed[0]).all():
        return None
    ts_bytes = rows[:, layout.ts_start : layout.ts_start + layout.ts_len].astype(np.uint64)
    continuation = ts_bytes >= 0x80
    if not (continuation == continuation[0]).all():
        return None  # timestamps whose varints differ in length
    ts = np.zeros(len(starts), dtype=np.uint64)
    for k in range(layout.ts_len):
        ts |= (ts_bytes[:, k] & np.uint64(0x7F)) << np.uint64(7 * k)
    values = {
        index: np.ascontiguousarray(rows[:, offset : offset + 8]).view("<f8").ravel().tolist()
        for index, offset in layout.fields
    }
    return ts.view(np.int64).tolist(), values, per_entry
