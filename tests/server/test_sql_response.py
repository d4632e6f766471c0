"""SqlQueryResponse written and read around its payload: the same bytes protobuf writes, and
the same message protobuf reads, whatever the fields."""

from __future__ import annotations

import pyarrow as pa
import pytest

from gnomon.proto import common_pb2, storage_pb2
from node.server import sql_response
from node.server.arrow_wire import decode_payload, encode_payload

pytestmark = pytest.mark.unit

OK = common_pb2.ResponseHeader(code=200)
ZSTD = storage_pb2.ArrowPayload.ZSTD


@pytest.mark.parametrize(
    ("batches", "compressed"),
    [([], False), ([b"x" * 300], False), ([b"a", b"", b"b" * 70_000], True)],
)
def test_encoded_bytes_are_protobufs(batches: list[bytes], compressed: bool) -> None:
    expected = storage_pb2.SqlQueryResponse(
        header=OK,
        arrow=storage_pb2.ArrowPayload(record_batches=batches, compression=ZSTD * compressed),
    )
    views = [memoryview(b) for b in batches]
    encoded = sql_response.encode(OK, views, compressed)
    assert encoded.data == expected.SerializeToString()
    assert encoded.header.code == 200


@pytest.mark.parametrize(
    "message",
    [
        storage_pb2.SqlQueryResponse(header=OK, affected_rows=7),
        storage_pb2.SqlQueryResponse(header=OK, arrow=storage_pb2.ArrowPayload()),
        storage_pb2.SqlQueryResponse(
            header=OK,
            arrow=storage_pb2.ArrowPayload(record_batches=[b"one", b"two"], compression=ZSTD),
        ),
        storage_pb2.SqlQueryResponse(
            header=common_pb2.ResponseHeader(code=400, error="table 'x' does not exist")
        ),
    ],
)
def test_decoded_as_protobuf_reads_it(message: storage_pb2.SqlQueryResponse) -> None:
    got = sql_response.decode(message.SerializeToString())
    assert got.header == message.header
    output = message.WhichOneof("output")
    assert got.affected_rows == (message.affected_rows if output == "affected_rows" else None)
    if output == "arrow":
        assert got.batches is not None
        assert [bytes(b) for b in got.batches] == list(message.arrow.record_batches)
        assert got.compressed == (message.arrow.compression == ZSTD)
    else:
        assert got.batches is None


def test_later_oneof_field_wins_and_unknown_fields_are_skipped() -> None:
    arrow = storage_pb2.SqlQueryResponse(arrow=storage_pb2.ArrowPayload(record_batches=[b"r"]))
    rows = storage_pb2.SqlQueryResponse(affected_rows=3)
    unknown = b"\x28\x05" + b"\x31" + bytes(8) + b"\x3a\x02hi"  # varint, fixed64, bytes
    got = sql_response.decode(arrow.SerializeToString() + unknown + rows.SerializeToString())
    assert (got.affected_rows, got.batches) == (3, None)
    got = sql_response.decode(rows.SerializeToString() + arrow.SerializeToString())
    assert got.affected_rows is None and got.batches is not None
    assert [bytes(b) for b in got.batches] == [b"r"]


@pytest.mark.parametrize("data", [b"\x1a\x05ab", b"\x08", b"\x0b"])
def test_malformed_responses_raise(data: bytes) -> None:
    with pytest.raises(ValueError, match="SqlQueryResponse"):
        sql_response.decode(data)


@pytest.mark.parametrize("compress_min_bytes", [1, 1 << 40])
def test_rows_round_trip_in_place(compress_min_bytes: int) -> None:
    table = pa.table({"host": ["a", "b", None], "v": [1.5, None, 3.0]})
    batches, compressed = encode_payload(table, compress_min_bytes)
    got = sql_response.decode(sql_response.encode(OK, batches, compressed).data)
    assert got.batches is not None
    assert decode_payload(got.batches, got.compressed).equals(table)
