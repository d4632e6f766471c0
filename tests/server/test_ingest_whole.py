"""A write request is checked whole before anything changes, over a real server: a refused
line-protocol or HoraeDB Write creates no table, adds no column and writes no row, whatever
table of the request is at fault; duplicate keys in a line and tables past the column limit
are refused."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest

from gnomon.proto import storage_pb2 as pb
from node.engine.schema import MAX_COLUMNS
from tests.server.conftest import Running

pytestmark = pytest.mark.integration

CTX = pb.RequestContext(database="public")


def _write(gnomon: Running, body: str) -> tuple[int, str]:
    status, _, answer = gnomon.request(
        "POST", "/influxdb/v1/write?precision=ms", body.encode(), {"Content-Type": "text/plain"}
    )
    return status, answer.decode()


def _columns(gnomon: Running, table: str) -> list[str] | None:
    """The table's columns, None if it does not exist."""
    status, body = gnomon.sql(f"SHOW TABLES LIKE '{table}'")
    assert status == 200
    if not body["rows"]:
        return None
    status, body = gnomon.sql(f"DESCRIBE {table}")
    assert status == 200
    return [r["name"] for r in body["rows"]]


def _count(gnomon: Running, table: str) -> int:
    status, body = gnomon.sql(f"SELECT count(*) AS n FROM {table}")
    assert status == 200
    return int(body["rows"][0]["n"])


def test_a_refused_line_changes_no_schema(gnomon: Running) -> None:
    assert _write(gnomon, "w_probe v=1i 1")[0] == 204
    before = _columns(gnomon, "w_probe")
    status, message = _write(gnomon, "w_probe,newtag=a v=1.5,newfield=3 2")
    assert status == 400 and "column:v" in message
    assert _columns(gnomon, "w_probe") == before
    assert _count(gnomon, "w_probe") == 1


def test_a_value_out_of_range_creates_no_table(gnomon: Running) -> None:
    status, message = _write(gnomon, "w_never v=99999999999999999999i 1")
    assert status == 400 and "'v'" in message
    assert _columns(gnomon, "w_never") is None


def test_a_bad_second_measurement_writes_nothing(gnomon: Running) -> None:
    assert _write(gnomon, "w_typed v=1i 1")[0] == 204
    status, message = _write(gnomon, "w_first v=1 1\nw_typed v=2.5 2\n")
    assert status == 400 and "w_typed" in message
    assert _columns(gnomon, "w_first") is None
    assert _count(gnomon, "w_typed") == 1


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("w_dup,host=a,host=b v=1 1", "line 1: duplicate tag key 'host'"),
        ("w_dup v=1,v=2 1", "line 1: duplicate field key 'v'"),
        ("w_dup,v=a v=1 1", "line 1: key 'v' is both a tag and a field"),
    ],
)
def test_duplicate_keys_in_a_line_are_refused(gnomon: Running, line: str, message: str) -> None:
    status, answer = _write(gnomon, f"w_dup_ok v=1 1\n{line}")
    assert status == 400
    assert message.replace("line 1", "line 2") in answer
    assert _columns(gnomon, "w_dup_ok") is None and _columns(gnomon, "w_dup") is None


def test_a_write_past_the_column_limit_is_refused(gnomon: Running) -> None:
    tags = ",".join(f"t{i}=x" for i in range(MAX_COLUMNS))
    status, message = _write(gnomon, f"w_wide,{tags} v=1 1")
    assert status == 400 and f"at most {MAX_COLUMNS} columns" in message
    assert _columns(gnomon, "w_wide") is None

    assert _write(gnomon, "w_grow,host=a v=1 1")[0] == 204
    before = _columns(gnomon, "w_grow")
    assert before is not None
    fields = ",".join(f"f{i}=1" for i in range(MAX_COLUMNS - len(before) + 1))
    status, message = _write(gnomon, f"w_grow,host=a {fields} 2")
    assert status == 400 and f"at most {MAX_COLUMNS} columns" in message
    assert _columns(gnomon, "w_grow") == before
    # Up to the limit is fine.
    fields = ",".join(f"f{i}=1" for i in range(MAX_COLUMNS - len(before)))
    assert _write(gnomon, f"w_grow,host=a {fields} 3")[0] == 204
    assert len(_columns(gnomon, "w_grow") or []) == MAX_COLUMNS


def test_create_and_alter_table_meet_the_column_limit(gnomon: Running) -> None:
    columns = ", ".join(f"c{i} double" for i in range(MAX_COLUMNS))
    status, body = gnomon.sql(
        f"CREATE TABLE w_sql_wide (t timestamp NOT NULL, {columns}, TIMESTAMP KEY(t))"
    )
    assert status == 400 and f"at most {MAX_COLUMNS} columns" in body["message"]
    assert _columns(gnomon, "w_sql_wide") is None

    status, _ = gnomon.sql("CREATE TABLE w_sql (t timestamp NOT NULL, TIMESTAMP KEY(t))")
    assert status == 200
    before = _columns(gnomon, "w_sql")
    assert before is not None
    adds = ", ".join(f"ADD COLUMN a{i} double" for i in range(MAX_COLUMNS - len(before) + 1))
    status, body = gnomon.sql(f"ALTER TABLE w_sql {adds}")
    assert status == 400 and f"at most {MAX_COLUMNS} columns" in body["message"]
    assert _columns(gnomon, "w_sql") == before


# -- HoraeDB Write ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def channel(gnomon: Running) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(gnomon.grpc_endpoint) as ch:
        yield ch


def _table(table: str, value: pb.Value, field: str = "v") -> pb.WriteTableRequest:
    return pb.WriteTableRequest(
        table=table,
        tag_names=["host"],
        field_names=[field],
        entries=[
            pb.WriteSeriesEntry(
                tags=[pb.Tag(name_index=0, value=pb.Value(string_value="a"))],
                field_groups=[
                    pb.FieldGroup(timestamp=1000, fields=[pb.Field(name_index=0, value=value)])
                ],
            )
        ],
    )


def _grpc_write(channel: grpc.Channel, *tables: pb.WriteTableRequest) -> pb.WriteResponse:
    call = channel.unary_unary(
        "/storage.StorageService/Write",
        request_serializer=pb.WriteRequest.SerializeToString,
        response_deserializer=pb.WriteResponse.FromString,
    )
    resp: pb.WriteResponse = call(pb.WriteRequest(context=CTX, table_requests=tables), timeout=30)
    return resp


def test_a_write_with_one_bad_table_changes_no_table(
    gnomon: Running, channel: grpc.Channel
) -> None:
    ok = _grpc_write(channel, _table("g_typed", pb.Value(int64_value=1)))
    assert ok.header.code == 200
    before = _columns(gnomon, "g_typed")
    resp = _grpc_write(
        channel,
        _table("g_first", pb.Value(float64_value=1.0)),
        _table("g_other", pb.Value(float64_value=1.0), field="w"),
        _table("g_typed", pb.Value(float64_value=2.5)),
    )
    assert resp.header.code == 400 and "g_typed" in resp.header.error
    assert _columns(gnomon, "g_first") is None and _columns(gnomon, "g_other") is None
    assert _columns(gnomon, "g_typed") == before
    assert _count(gnomon, "g_typed") == 1


def test_a_table_named_twice_in_one_write_gets_both_column_sets(
    gnomon: Running, channel: grpc.Channel
) -> None:
    resp = _grpc_write(
        channel,
        _table("g_twice", pb.Value(float64_value=1.0)),
        _table("g_twice", pb.Value(int64_value=2), field="n"),
    )
    assert resp.header.code == 200 and resp.success == 2
    assert _columns(gnomon, "g_twice") == ["tsid", "timestamp", "host", "v", "n"]
