"""HoraeDB's SQL dialect through a real server, over HTTP and gRPC alike (the cases of
tests/sql/cases/horaedb_dialect.sql check each feature in depth)."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest

from tests.server.conftest import Running
from tests.server.test_grpc import decode, sql

pytestmark = pytest.mark.integration


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
    # Without a column list the values follow the table's order, the key first.
    resp = sql(channel, "INSERT INTO TABLE 07_dialect VALUES (2000, \"b\", x'0aff')")
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


def test_grpc_answers_under_horaedb_names_and_http_under_gnomons(
    gnomon: Running, channel: grpc.Channel
) -> None:
    status, _ = gnomon.sql(
        "CREATE TABLE 07_names (host string TAG, v double, t timestamp NOT NULL TIMESTAMP KEY)"
    )
    assert status == 200
    status, _ = gnomon.sql("INSERT INTO 07_names (host, v, t) VALUES ('a', 1.5, 1), ('b', 2, 2)")
    assert status == 200
    query = "SELECT sum(v), count(DISTINCT host), 1, v % 2 AS r FROM 07_names GROUP BY v % 2"
    status, body = gnomon.sql(query + " ORDER BY r")
    assert status == 200
    assert list(body["rows"][0]) == ["sum(07_names.v)", "count(DISTINCT 07_names.host)", "1", "r"]
    resp = sql(channel, query + " ORDER BY r")
    assert resp.header.code == 200
    assert decode(resp.arrow).to_pydict() == {
        "SUM(07_names.v)": [2.0, 1.5],
        "COUNT(DISTINCT 07_names.host)": [1, 1],
        "Int64(1)": [1, 1],
        "r": [0.0, 1.5],
    }
