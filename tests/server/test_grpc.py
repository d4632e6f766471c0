"""The gRPC service at the protocol level, with clients built from gnomon's own .proto: status
headers, Arrow payload shape and types, compression, message limits, streaming RPCs, Route."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc
import pyarrow as pa
import pytest

from gnomon.proto import storage_pb2 as pb
from node.server.standalone import Standalone
from testkit.procs import free_port
from testkit.sdk import run_sdk
from tests.server.conftest import COMPRESS_MIN_BYTES, MAX_REQUEST_BYTES, Running

pytestmark = pytest.mark.integration

CTX = pb.RequestContext(database="public")

#: Arrow types the HoraeDB SDK decodes (anything else fails or crashes it).
SDK_TYPES = (
    pa.types.is_null,
    pa.types.is_float64,
    pa.types.is_float32,
    pa.types.is_binary,
    pa.types.is_string,
    pa.types.is_integer,
    pa.types.is_boolean,
    lambda t: pa.types.is_timestamp(t) and t.unit == "ms",
    lambda t: t == pa.time32("ms"),
    lambda t: t == pa.dictionary(pa.int32(), pa.string()),
)


@pytest.fixture(scope="module")
def channel(gnomon: Running) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(
        gnomon.grpc_endpoint, options=[("grpc.max_send_message_length", 64 * 1024**2)]
    ) as ch:
        yield ch


def unary(channel: grpc.Channel, method: str, req: Any, resp_cls: Any) -> Any:
    call = channel.unary_unary(
        f"/storage.StorageService/{method}",
        request_serializer=type(req).SerializeToString,
        response_deserializer=resp_cls.FromString,
    )
    return call(req, timeout=30)


def sql(channel: grpc.Channel, query: str) -> pb.SqlQueryResponse:
    return unary(
        channel, "SqlQuery", pb.SqlQueryRequest(context=CTX, sql=query), pb.SqlQueryResponse
    )


def write_request(table: str, n: int, *, text: str = "v") -> pb.WriteRequest:
    return pb.WriteRequest(
        context=CTX,
        table_requests=[
            pb.WriteTableRequest(
                table=table,
                tag_names=["host"],
                field_names=["value", "text"],
                entries=[
                    pb.WriteSeriesEntry(
                        tags=[pb.Tag(name_index=0, value=pb.Value(string_value="h"))],
                        field_groups=[
                            pb.FieldGroup(
                                timestamp=1_700_000_000_000 + i,
                                fields=[
                                    pb.Field(name_index=0, value=pb.Value(float64_value=float(i))),
                                    pb.Field(name_index=1, value=pb.Value(string_value=text)),
                                ],
                            )
                            for i in range(n)
                        ],
                    )
                ],
            )
        ],
    )


def decode(payload: pb.ArrowPayload) -> pa.Table:
    batches = []
    for element in payload.record_batches:
        data = element
        if payload.compression == pb.ArrowPayload.ZSTD:
            # Each element is one standard zstd frame, as the SDK expects.
            assert element[:4] == b"\x28\xb5\x2f\xfd"
            data = pa.CompressedInputStream(pa.BufferReader(element), "zstd").read()
        batches.extend(pa.ipc.open_stream(data).read_all().to_batches())
    return pa.Table.from_batches(batches) if batches else pa.table({})


def test_route_answers_200_without_routes(channel: grpc.Channel) -> None:
    for tables in ([], ["a", "b"]):
        resp = unary(
            channel, "Route", pb.RouteRequest(context=CTX, tables=tables), pb.RouteResponse
        )
        assert resp.header.code == 200
        assert list(resp.routes) == []


def test_write_needs_the_public_database(channel: grpc.Channel) -> None:
    req = write_request("g_db", 1)
    req.ClearField("context")
    resp = unary(channel, "Write", req, pb.WriteResponse)
    assert resp.header.code == 400 and "Database is not set" in resp.header.error
    req.context.database = "other"
    resp = unary(channel, "Write", req, pb.WriteResponse)
    assert resp.header.code == 400 and "Schema not found, schema:other" in resp.header.error
    assert (resp.success, resp.failed) == (0, 0)


def test_select_is_one_ipc_stream_of_sdk_types(channel: grpc.Channel) -> None:
    assert unary(channel, "Write", write_request("g_types", 3), pb.WriteResponse).success == 3
    resp = sql(
        channel,
        "SELECT *, now() AS n, arrow_cast(text, 'LargeUtf8') AS l, "
        "CAST(value AS DECIMAL(10, 2)) AS d, CAST('2024-01-02' AS DATE) AS dt, "
        "arrow_cast(text, 'BinaryView') AS bv FROM g_types",
    )
    assert resp.header.code == 200
    assert resp.WhichOneof("output") == "arrow"
    assert len(resp.arrow.record_batches) == 1
    assert resp.arrow.compression == pb.ArrowPayload.NONE
    table = decode(resp.arrow)
    assert table.num_rows == 3
    for f in table.schema:
        assert any(ok(f.type) for ok in SDK_TYPES), f"{f.name}: {f.type} is not SDK-readable"
    assert table.column("timestamp").type == pa.timestamp("ms")


def test_empty_result_and_affected_rows(channel: grpc.Channel) -> None:
    unary(channel, "Write", write_request("g_empty", 1), pb.WriteResponse)
    resp = sql(channel, "SELECT * FROM g_empty WHERE value > 100")
    assert resp.header.code == 200 and resp.WhichOneof("output") == "arrow"
    assert list(resp.arrow.record_batches) == []
    resp = sql(channel, "INSERT INTO g_empty (timestamp, host, value) VALUES (1, 'x', 1.0)")
    assert resp.WhichOneof("output") == "affected_rows" and resp.affected_rows == 1


def test_large_results_are_zstd_frames(channel: grpc.Channel) -> None:
    text = "z" * 200
    n = COMPRESS_MIN_BYTES // len(text) + 100
    assert (
        unary(channel, "Write", write_request("g_zstd", n, text=text), pb.WriteResponse).success
        == n
    )
    resp = sql(channel, "SELECT value, text FROM g_zstd")
    assert resp.arrow.compression == pb.ArrowPayload.ZSTD
    assert len(resp.arrow.record_batches) == 1
    table = decode(resp.arrow)
    assert table.num_rows == n
    assert set(table.column("text").to_pylist()) == {text}


def test_message_size_limits(channel: grpc.Channel) -> None:
    # Above grpcio's default 4 MiB, within the server's limit: accepted.
    big = "b" * (5 * 1024**2)
    resp = unary(channel, "Write", write_request("g_big", 1, text=big), pb.WriteResponse)
    assert resp.header.code == 200 and resp.success == 1
    with pytest.raises(grpc.RpcError) as err:
        unary(
            channel,
            "Write",
            write_request("g_big", 1, text="b" * (MAX_REQUEST_BYTES + 1024)),
            pb.WriteResponse,
        )
    assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


def test_streaming_rpcs(channel: grpc.Channel) -> None:
    stream_write = channel.stream_unary(
        "/storage.StorageService/StreamWrite",
        request_serializer=pb.WriteRequest.SerializeToString,
        response_deserializer=pb.WriteResponse.FromString,
    )
    resp = stream_write(iter([write_request("g_stream", 5), write_request("g_stream2", 7)]))
    assert resp.header.code == 200 and resp.success == 12
    bad = write_request("g_stream", 1)
    bad.table_requests[0].entries[0].field_groups[0].fields[0].value.Clear()
    resp = stream_write(iter([write_request("g_stream", 1), bad]))
    assert resp.header.code == 400

    stream_sql = channel.unary_stream(
        "/storage.StorageService/StreamSqlQuery",
        request_serializer=pb.SqlQueryRequest.SerializeToString,
        response_deserializer=pb.SqlQueryResponse.FromString,
    )
    responses = list(stream_sql(pb.SqlQueryRequest(context=CTX, sql="SELECT * FROM g_stream")))
    assert all(r.header.code == 200 for r in responses)
    assert sum(decode(r.arrow).num_rows for r in responses) == 5
    (err,) = list(stream_sql(pb.SqlQueryRequest(context=CTX, sql="SELECT * FROM missing")))
    assert err.header.code == 500 and "'missing' does not exist" in err.header.error


def test_prometheus_rpcs_are_unimplemented(channel: grpc.Channel) -> None:
    for method in ("PromRemoteQuery", "PromQuery"):
        req = pb.PrometheusRemoteQueryRequest(context=CTX)
        with pytest.raises(grpc.RpcError) as err:
            unary(channel, method, req, pb.PrometheusRemoteQueryResponse)
        assert err.value.code() == grpc.StatusCode.UNIMPLEMENTED


def test_route_with_advertised_endpoint_and_direct_sdk(tmp_path: Path) -> None:
    grpc_port = free_port()
    with Standalone(
        str(tmp_path / "data"),
        http_port=0,
        grpc_port=grpc_port,
        flight_port=0,
        wal_sync="never",
        advertise=f"127.0.0.1:{grpc_port}",
    ) as server:
        with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as ch:
            resp = unary(ch, "Route", pb.RouteRequest(context=CTX, tables=["a"]), pb.RouteResponse)
        assert [(r.table, r.endpoint.ip, r.endpoint.port) for r in resp.routes] == [
            ("a", "127.0.0.1", grpc_port)
        ]
        out = run_sdk(
            f"127.0.0.1:{grpc_port}",
            """
            async def scenario(ctx):
                c = client("Direct")
                w1 = await write(c, ctx, [point("routed", 1000, {"h": V().string("a")},
                                                {"v": V().double(1.0)})])
                w2 = await write(c, ctx, [point("routed", 2000, {"h": V().string("a")},
                                                {"v": V().double(2.0)})])
                r = await query(c, ctx, ["routed"], "SELECT sum(v) AS s FROM routed")
                return {"w": [w1, w2], "s": rows(r)[0]["s"][0]}
            """,
            tmp_path,
        )
        assert out == {"w": [[1, 0], [1, 0]], "s": 3.0}
        assert server.metrics.requests.value("grpc", "Route", "200") >= 3


def test_concurrent_writers_create_one_table_and_its_columns(channel: grpc.Channel) -> None:
    def write_with_field(k: int) -> pb.WriteResponse:
        req = write_request("g_race", 10)
        table_req = req.table_requests[0]
        table_req.field_names.append(f"extra_{k % 4}")
        for group in table_req.entries[0].field_groups:
            group.fields.add(name_index=2, value=pb.Value(int64_value=k))
        return unary(channel, "Write", req, pb.WriteResponse)

    with ThreadPoolExecutor(8) as pool:
        responses = list(pool.map(write_with_field, range(16)))
    assert [r.header.code for r in responses] == [200] * 16
    table = decode(sql(channel, "SELECT * FROM g_race").arrow)
    assert {f"extra_{k}" for k in range(4)} <= set(table.column_names)
