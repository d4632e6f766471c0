"""Query results in the shapes clients can read: Arrow IPC payloads for the HoraeDB SDK and
JSON rows for HTTP.

The HoraeDB SDK (Arrow 38, no IPC compression) fails on or crashes with many Arrow types that
DataFusion and the engine produce, so results are cast to the types it reads first:
timestamps become milliseconds, large and view strings/binaries the plain ones, decimals
float64, dates timestamps, and nested values their JSON text.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from node.engine import ipc as engine_ipc

#: HoraeDB's default ``resp_compress_min_length``: payloads from this size on are zstd frames.
DEFAULT_COMPRESS_MIN_BYTES = 4 * 1024**2
#: Query results are mostly floats, which zstd shrinks little at any level: the fastest
#: level keeps nearly all of level 3's gain (4.6 vs 4.3 MB of a 6.5 MB TSBS result) at about
#: half its cost.
_ZSTD_LEVEL = 1
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def _json_text(values: list[Any]) -> list[str | None]:
    return [None if v is None else json.dumps(v, default=str) for v in values]


#: Ids of the types the SDK reads as they are: most columns, passed without testing every
#: other kind (by id: a set of types would hash each column's type through its name).
_AS_IS = frozenset(
    t.id
    for t in (
        *(pa.int8(), pa.int16(), pa.int32(), pa.int64()),
        *(pa.uint8(), pa.uint16(), pa.uint32(), pa.uint64()),
        *(pa.float32(), pa.float64(), pa.bool_(), pa.string(), pa.binary()),
    )
)


def _wire_array(arr: pa.ChunkedArray[Any]) -> pa.ChunkedArray[Any]:
    t = arr.type
    if t.id in _AS_IS:
        return arr
    if pa.types.is_timestamp(t):
        if t.unit == "ms":
            return arr
        return arr.cast(pa.timestamp("ms", t.tz), safe=False)
    if pa.types.is_date(t):
        return arr.cast(pa.timestamp("ms"))
    if pa.types.is_time(t):
        if isinstance(t, pa.Time32Type) and t.unit == "ms":
            return arr
        return arr.cast(pa.time32("ms"), safe=False)
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return arr.cast(pa.string())
    if (
        pa.types.is_large_binary(t)
        or pa.types.is_binary_view(t)
        or pa.types.is_fixed_size_binary(t)
    ):
        return arr.cast(pa.binary())
    if pa.types.is_decimal(t):
        return arr.cast(pa.float64())
    if pa.types.is_float16(t):
        return arr.cast(pa.float32())
    if pa.types.is_duration(t):
        return arr.cast(pa.int64())
    if pa.types.is_dictionary(t):
        if t.index_type == pa.int32() and t.value_type == pa.string():
            return arr
        return _wire_array(arr.cast(t.value_type))
    if pa.types.is_nested(t) or pa.types.is_interval(t):
        return pa.chunked_array([pa.array(_json_text(arr.to_pylist()), pa.string())])
    return arr


def to_wire(table: pa.Table) -> pa.Table:
    """``table`` with every column cast to a type the HoraeDB SDK decodes."""
    # One list of the columns for both: each ``table.columns`` makes new wrapper objects,
    # which would never be the ones passed through.
    originals = table.columns
    columns = [_wire_array(c) for c in originals]
    if all(c is o for c, o in zip(columns, originals, strict=True)):
        return table
    return pa.Table.from_arrays(columns, names=table.column_names)


def ipc_stream(table: pa.Table) -> memoryview:
    """One complete Arrow IPC stream (schema, batches, end marker) of ``table``, in the
    buffer it was written to."""
    batches = (b for b in table.to_batches() if b.num_rows)
    return memoryview(engine_ipc.ipc_stream(table.schema, batches))


def encode_payload(
    table: pa.Table, compress_min_bytes: int
) -> tuple[list[bytes | memoryview], bool]:
    """The ``record_batches`` of an ArrowPayload and whether they are zstd-compressed: as
    HoraeDB does, one IPC stream holding every row (none at all when there are no rows),
    compressed only from ``compress_min_bytes`` on."""
    if table.num_rows == 0:
        return [], False
    data = ipc_stream(to_wire(table))
    if len(data) >= compress_min_bytes:
        codec = pa.Codec("zstd", compression_level=_ZSTD_LEVEL)
        return [bytes(codec.compress(data, asbytes=True))], True
    return [data], False


def decode_payload(record_batches: Sequence[bytes | memoryview], compressed: bool) -> pa.Table:
    """The rows of an ArrowPayload (the inverse of :func:`encode_payload`); uncompressed
    batches are read in place."""
    tables = []
    for data in record_batches:
        stream = _unzstd(data) if compressed else data
        tables.append(pa.ipc.open_stream(pa.py_buffer(stream)).read_all())
    return pa.concat_tables(tables) if tables else pa.table({})


def _unzstd(frame: bytes | memoryview) -> bytes:
    """A zstd frame decompressed in one call when its header states its size (as one-shot
    compressors write it, ours included): three to four times faster than streaming."""
    size = zstd_content_size(frame)
    if size is None:
        return bytes(pa.input_stream(pa.py_buffer(frame), compression="zstd").read())
    return bytes(pa.Codec("zstd").decompress(frame, decompressed_size=size, asbytes=True))


def zstd_content_size(frame: bytes | memoryview) -> int | None:
    """The Frame_Content_Size of a zstd frame's header (RFC 8878, 3.1.1.1), None if absent."""
    if len(frame) < 6 or frame[:4] != _ZSTD_MAGIC:
        return None
    descriptor = frame[4]
    fcs_flag, single_segment, dict_flag = descriptor >> 6, (descriptor >> 5) & 1, descriptor & 3
    offset = 5 + (0 if single_segment else 1) + (0, 1, 2, 4)[dict_flag]
    width = (1 if single_segment else 0, 2, 4, 8)[fcs_flag]
    if width == 0 or len(frame) < offset + width:
        return None
    value = int.from_bytes(frame[offset : offset + width], "little")
    return value + 256 if width == 2 else value


# -- JSON --------------------------------------------------------------------------------------


def _finite(values: list[Any]) -> list[Any]:
    # JSON has no NaN or infinity; HoraeDB's serde_json writes them as null.
    return [None if v is not None and not math.isfinite(v) else v for v in values]


def _json_values(arr: pa.ChunkedArray[Any]) -> list[Any]:
    t = arr.type
    if pa.types.is_dictionary(t):
        return _json_values(arr.cast(t.value_type))
    if pa.types.is_timestamp(t):
        # HoraeDB renders timestamps as integer milliseconds since the epoch.
        ms = arr if t.unit == "ms" else arr.cast(pa.timestamp("ms", t.tz), safe=False)
        return ms.cast(pa.int64()).to_pylist()
    if pa.types.is_date(t) or pa.types.is_time(t):
        return arr.cast(pa.string()).to_pylist()
    if pa.types.is_duration(t):
        return arr.cast(pa.int64()).to_pylist()
    if pa.types.is_floating(t):
        return _finite(arr.cast(pa.float64()).to_pylist())
    if pa.types.is_decimal(t):
        return _finite(arr.cast(pa.float64()).to_pylist())
    if (
        pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_binary_view(t)
        or pa.types.is_fixed_size_binary(t)
    ):
        # serde_json writes bytes as an array of numbers; so does HoraeDB.
        return [None if v is None else list(v) for v in arr.to_pylist()]
    if pa.types.is_nested(t) or pa.types.is_interval(t):
        return [
            None if v is None else json.loads(json.dumps(v, default=str)) for v in arr.to_pylist()
        ]
    return arr.to_pylist()


def json_rows(table: pa.Table) -> list[dict[str, Any]]:
    """The rows of ``table`` as JSON-ready dicts, column values rendered as HoraeDB does."""
    names = table.column_names
    columns = [_json_values(c) for c in table.columns]
    return [dict(zip(names, row, strict=True)) for row in zip(*columns, strict=True)]
