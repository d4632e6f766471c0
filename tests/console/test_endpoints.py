"""The console over plain HTTP: its files (and only those) with a policy that keeps the page
on this server, and ``GET /api/cluster`` on a standalone server, open and behind sign-in."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from node.server.console.assets import STATIC
from tests.security.conftest import ROOT, admin, basic
from tests.server.conftest import Running, start_standalone

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    root = tmp_path_factory.mktemp("console-http")
    running = start_standalone(root / "data", root / "server.log")
    status, _ = running.sql(
        "CREATE TABLE mem (host string TAG, v double, ts timestamp NOT NULL, TIMESTAMP KEY(ts))"
    )
    assert status == 200
    yield running
    running.server.stop()


def test_the_page_and_its_files(server: Running) -> None:
    for path in ("/dashboard", "/dashboard/"):
        status, headers, body = server.request("GET", path)
        assert status == 200
        assert headers["Content-Type"] == "text/html; charset=utf-8"
        assert body == (STATIC / "index.html").read_bytes()
        policy = headers["Content-Security-Policy"]
        assert "default-src 'none'" in policy and "connect-src 'self'" in policy
    for name, kind in (
        ("console.js", "text/javascript"),
        ("console.css", "text/css"),
        ("uPlot.iife.min.js", "text/javascript"),
        ("uPlot.min.css", "text/css"),
        ("uPlot.LICENSE", "text/plain"),
    ):
        status, headers, body = server.request("GET", f"/dashboard/{name}")
        assert status == 200 and headers["Content-Type"].startswith(kind), name
        assert body == (STATIC / name).read_bytes()
    status, headers, body = server.request("HEAD", "/dashboard")
    assert status == 200 and body == b""


def test_nothing_but_its_files(server: Running) -> None:
    for path in ("/dashboard/nope.js", "/dashboard/../pyproject.toml", "/dashboard/static"):
        status, _, body = server.request("GET", path)
        assert status == 404, path
        assert json.loads(body)["code"] == 404
    status, headers, _ = server.request("POST", "/dashboard", b"{}")
    assert status == 405 and headers["Allow"] == "GET, HEAD"


def test_cluster_view_of_a_standalone_server(server: Running) -> None:
    status, _, body = server.request("GET", "/api/cluster")
    assert status == 200
    doc = json.loads(body)
    assert doc["mode"] == "standalone"
    me = f"127.0.0.1:{server.grpc_port}"
    assert doc["me"] == me
    [node] = doc["nodes"]
    assert node["name"] == me and node["live"] is True and node["role"] == "standalone"
    assert {"rows_per_s", "memtable_bytes", "queries_per_s", "cpu"} <= set(node)
    assert "mem" in {t["name"] for t in doc["tables"]}
    assert doc["shards"] and all(s["leader"] == me for s in doc["shards"])
    assert doc["procedures"] == [] and doc["compaction_nodes"] == []


def test_cluster_view_needs_sign_in_when_auth_is_on(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    root = tmp_path_factory.mktemp("console-http-auth")
    data = root / "data"
    admin(data, "users", "create", ROOT[0], "--password", ROOT[1], "--superuser")
    running = start_standalone(data, root / "server.log", "--auth", "true")
    try:
        status, _, _ = running.request("GET", "/api/cluster")
        assert status == 401
        status, _, _ = running.request("GET", "/api/cluster", None, {"Authorization": "x"})
        assert status == 401
        status, _, body = running.request(
            "GET", "/api/cluster", None, {"Authorization": basic(*ROOT)}
        )
        assert status == 200 and json.loads(body)["mode"] == "standalone"
        # The page itself is open: it asks for the credentials.
        status, _, _ = running.request("GET", "/dashboard")
        assert status == 200
    finally:
        running.server.stop()
