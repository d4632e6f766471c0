"""HoraeDB's SQL dialect through a real server, over HTTP and gRPC alike (the cases of
tests/sql/cases/horaedb_dialect.sql check each feature in depth)."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest

from tests.server.conftest import Running
from tests.server.test_grpc import decode, sql


@pytest.fixture(scope="module")
def channel(gnomon: Running) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(gnomon.grpc_endpoint) as ch:
        yield ch


def test_horaedb_statements_over_http_and_grpc(gnomon: Running, channel: grpc.Channel) -> None:
    status, body = gnomon.sql(
        "CREATE TABLE 07_dialect (name string TAG, payload varbinary, "
        "t timestamp NOT NULL TIMESTAMP KEY, PRIMARY KEY(tsid, t)) "
        "ENGINE=Analytic WITH (storage_format='hybrid', update_mode=\"APPEND\")"
    )
    assert (status, body) == (200, {"affected_rows": 0})
    status, body = gnomon.sql(
        "INSERT INTO TABLE 07_dialect (name, payload, t) VALUES (\"a\", x'11', 1000)"
    )
    assert (status, body) == (200, {"affected_rows": 1})
    resp = sql(channel, "INSERT INTO TABLE 07_dialect VALUES (\"b\", x'0aff', 2000)")
    assert resp.header.code == 200 and resp.affected_rows == 1

    query = 'SELECT name, payload FROM 07_dialect WHERE name IN ("a", "b") ORDER BY t'
    status, body = gnomon.sql(query)
    assert status == 200 and [r["name"] for r in body["rows"]] == ["a", "b"]
    resp = sql(channel, query)
    assert resp.header.code == 200
    assert decode(resp.arrow).to_pydict() == {"name": ["a", "b"], "payload": [b"\x11", b"\n\xff"]}


def test_two_timestamp_keys_are_a_400_over_http_and_grpc(
    gnomon: Running, channel: grpc.Channel
) -> None:
    create = "CREATE TABLE 07_two (a timestamp NOT NULL TIMESTAMP KEY, b timestamp TIMESTAMP KEY)"
    status, body = gnomon.sql(create)
    assert status == 400 and "two TIMESTAMP KEYs ('a' and 'b')" in str(body)
    assert "Traceback" not in str(body)
    resp = sql(channel, create)
    assert resp.header.code == 400 and "two TIMESTAMP KEYs" in resp.header.error
    status, body = gnomon.sql("SHOW TABLES LIKE '07_two'")
    assert (status, body) == (200, {"rows": []})
