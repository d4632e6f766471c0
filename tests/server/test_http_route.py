"""GET /route/{table} on a standalone server: every table is served here."""

from __future__ import annotations

import json

import pytest

from tests.server.conftest import Running

pytestmark = pytest.mark.integration


def test_a_table_routes_to_this_server(gnomon: Running) -> None:
    status, _ = gnomon.sql(
        "CREATE TABLE IF NOT EXISTS routed (host string TAG, v double, ts timestamp NOT NULL, "
        "TIMESTAMP KEY(ts))"
    )
    assert status == 200
    status, _, body = gnomon.request("GET", "/route/routed")
    answer = json.loads(body)
    assert status == 200 and answer["table"] == "routed"
    assert answer["grpc"] == f"127.0.0.1:{gnomon.grpc_port}"
    assert answer["http"] == f"127.0.0.1:{gnomon.http_port}"
    assert set(answer) == {"table", "grpc", "http", "flight"}


def test_unknown_tables_and_other_methods(gnomon: Running) -> None:
    status, _, body = gnomon.request("GET", "/route/no_such_table")
    assert status == 404 and "no_such_table" in json.loads(body)["message"]
    status, headers, _ = gnomon.request("POST", "/route/routed", b"")
    assert status == 405 and headers["Allow"] == "GET, HEAD"
