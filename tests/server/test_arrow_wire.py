"""Arrow payloads of SqlQuery: encoded as HoraeDB does, decoded back, zstd frames included."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from node.server.arrow_wire import decode_payload, encode_payload, to_wire, zstd_content_size

pytestmark = pytest.mark.unit


def _table(rows: int) -> pa.Table:
    rng = np.random.default_rng(3)
    return pa.table(
        {
            "host": pa.array([f"host_{i % 50}" for i in range(rows)]),
            "ts": pa.array(np.arange(rows) * 10_000, pa.timestamp("ms")),
            "usage": rng.random(rows),
        }
    )


@pytest.mark.parametrize("compress_min_bytes", [1, 1 << 40])
def test_payload_round_trips(compress_min_bytes: int) -> None:
    table = _table(20_000)
    batches, compressed = encode_payload(table, compress_min_bytes)
    assert compressed == (compress_min_bytes == 1)
    assert decode_payload(batches, compressed).equals(table)


def test_a_table_of_types_the_sdk_reads_goes_out_as_it_is() -> None:
    table = _table(10)
    assert to_wire(table) is table


def test_other_types_are_cast_to_ones_the_sdk_reads() -> None:
    table = _table(10).append_column(
        "n", pa.array(range(10), pa.int64()).cast(pa.decimal128(22, 2))
    )
    table = table.set_column(1, "ts", table.column("ts").cast(pa.timestamp("us")))
    wired = to_wire(table)
    assert wired.schema.types == [pa.string(), pa.timestamp("ms"), pa.float64(), pa.float64()]
    assert wired.column("ts").equals(_table(10).column("ts"))


def test_empty_result_has_no_batches() -> None:
    batches, compressed = encode_payload(_table(0), 1)
    assert (batches, compressed) == ([], False)
    assert decode_payload(batches, compressed).num_rows == 0


@pytest.mark.parametrize("size", [0, 200, 255, 256, 70_000, 5_000_000])
def test_zstd_content_size_reads_the_frame_header(size: int) -> None:
    data = bytes(np.random.default_rng(size).integers(0, 4, size, dtype=np.uint8))
    frame = pa.Codec("zstd").compress(data, asbytes=True)
    assert zstd_content_size(frame) == size


def test_frames_without_a_size_still_decode() -> None:
    table = _table(1000)
    sink = pa.BufferOutputStream()
    # A streaming compressor does not know the size up front and leaves it out.
    with pa.CompressedOutputStream(sink, "zstd") as out, pa.ipc.new_stream(out, table.schema) as w:
        w.write_table(table)
    frame = sink.getvalue().to_pybytes()
    assert zstd_content_size(frame) is None
    assert decode_payload([frame], True).equals(table)
    assert zstd_content_size(b"not a zstd frame") is None
