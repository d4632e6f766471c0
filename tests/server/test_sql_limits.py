"""Statements that once crashed a real server (a native stack overflow in DataFusion) or
answered 500 (a RecursionError) get a clean 400 naming the bound, over HTTP and gRPC alike;
the largest admitted statements answer; long ORs of one column answer as IN lists do; literal
SELECT items are named by their text; constant integer overflow and internal names in
errors."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest

from gnomon.proto import storage_pb2 as pb
from node.sql.lexer import MAX_EXPRESSION_DEPTH, MAX_NESTING
from tests.server.conftest import Running
from tests.server.test_grpc import decode, sql, unary, write_request

pytestmark = pytest.mark.integration

CRASHED = {
    "or": "SELECT 1 WHERE " + " OR ".join(f"{i} = 1" for i in range(10_000)),
    "and": "SELECT 1 WHERE " + " AND ".join(f"{i} = 1" for i in range(10_000)),
    "plus": "SELECT " + "+".join(["1"] * 20_000),
    "concat": "SELECT " + "||".join(["'a'"] * 20_000),
    "nested-where": "SELECT 1 WHERE " + "(" * 5000 + "1 = 1" + ")" * 5000,
}


@pytest.fixture(scope="module")
def channel(gnomon: Running) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(gnomon.grpc_endpoint) as ch:
        yield ch


@pytest.fixture(scope="module")
def table(channel: grpc.Channel) -> str:
    """``l_rows``: 300 rows, value 0..299 (host 'h')."""
    assert unary(channel, "Write", write_request("l_rows", 300), pb.WriteResponse).success == 300
    return "l_rows"


def alive(gnomon: Running) -> None:
    assert gnomon.sql("SELECT 2 AS two") == (200, {"rows": [{"two": 2}]})


@pytest.mark.parametrize("name", sorted(CRASHED))
def test_once_fatal_statements_are_refused_over_http(gnomon: Running, name: str) -> None:
    status, body = gnomon.sql(CRASHED[name])
    assert status == 400, body
    assert body["message"].startswith("query too complex")
    alive(gnomon)


@pytest.mark.parametrize("name", sorted(CRASHED))
def test_once_fatal_statements_are_refused_over_grpc(
    gnomon: Running, channel: grpc.Channel, name: str
) -> None:
    resp = sql(channel, CRASHED[name])
    assert resp.header.code == 400
    assert "query too complex" in resp.header.error
    alive(gnomon)


def test_nesting_in_where_on_a_table_is_400(
    gnomon: Running, channel: grpc.Channel, table: str
) -> None:
    deep = f"SELECT value FROM {table} WHERE " + "(" * 5000 + "value > 1" + ")" * 5000
    status, body = gnomon.sql(deep)
    assert status == 400 and "MAX_NESTING" in body["message"]
    resp = sql(channel, deep)
    assert resp.header.code == 400 and "MAX_NESTING" in resp.header.error


def test_the_admitted_maximum_answers(gnomon: Running, channel: grpc.Channel, table: str) -> None:
    # A chain as long as admitted over the table (run on DataFusion's own threads too),
    # and the same depth reached through the most parentheses admitted.
    chain = " + ".join(["value"] * (MAX_EXPRESSION_DEPTH + 1))
    status, body = gnomon.sql(f"SELECT {chain} AS s FROM {table} WHERE value = 2")
    assert status == 200, body
    assert body["rows"] == [{"s": 2.0 * (MAX_EXPRESSION_DEPTH + 1)}]
    per_level = MAX_EXPRESSION_DEPTH // MAX_NESTING - 1
    nested = "value"
    for _ in range(MAX_NESTING):
        nested = "(" + " + ".join([nested, *["1"] * per_level]) + ")"
    resp = sql(channel, f"SELECT {nested} AS s FROM {table} WHERE value = 0")
    assert resp.header.code == 200, resp.header.error
    assert decode(resp.arrow).to_pylist() == [{"s": float(per_level * MAX_NESTING)}]
    alive(gnomon)


def test_long_or_of_one_column_answers_as_in_does(gnomon: Running, table: str) -> None:
    wanted = range(0, 6000, 7)
    chain = " OR ".join(f"value = {v}" for v in wanted)
    status, body = gnomon.sql(f"SELECT value FROM {table} WHERE {chain} ORDER BY value")
    assert status == 200, body
    listed = ", ".join(str(v) for v in wanted)
    expected = gnomon.sql(f"SELECT value FROM {table} WHERE value IN ({listed}) ORDER BY value")
    assert body == expected[1]
    assert [r["value"] for r in body["rows"]] == [float(v) for v in range(0, 300, 7)]


def test_literal_items_are_named_by_their_text(gnomon: Running, channel: grpc.Channel) -> None:
    assert gnomon.sql("SELECT 1, 'a', 1 + 1") == (200, {"rows": [{"1": 1, "'a'": "a", "1 + 1": 2}]})
    # The HoraeDB protocol answers with HoraeDB's names (docs/compatibility.md).
    resp = sql(channel, "SELECT 1")
    assert decode(resp.arrow).column_names == ["Int64(1)"]


def test_integer_overflow_is_400(gnomon: Running, channel: grpc.Channel) -> None:
    status, body = gnomon.sql("SELECT 9223372036854775807 + 1")
    assert status == 400 and "bigint out of range" in body["message"]
    resp = sql(channel, "SELECT 9223372036854775807 + 1")
    assert resp.header.code == 400 and "bigint out of range" in resp.header.error


def test_errors_name_no_internals(gnomon: Running, channel: grpc.Channel, table: str) -> None:
    for query in (
        f"SELECT * FROM {table} WHERE timestamp > 'garbage'",
        f"SELECT nope FROM {table} VERSION AS OF 1",
    ):
        status, body = gnomon.sql(query)
        assert status == 400
        resp = sql(channel, query)
        for message in (body["message"], resp.header.error):
            assert "Optimizer rule" not in message and "__" not in message, message
            assert "Traceback" not in message
