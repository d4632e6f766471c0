"""A running cluster, as `gnomon dev-cluster` starts it: real etcd, broker and S3 server, a
meta process and three `gnomon node` processes. The published HoraeDB SDK in Direct mode
(routes, then the owner) and Proxy mode (everything through one node, which forwards),
DDL through any node, and the forwarding loop guard."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from gnomon.proto import storage_pb2
from gnomon_app.devcluster.cluster import DevCluster
from meta.client import MetaClient
from node.cluster.forward import FORWARDED_FROM
from testkit.sdk import run_sdk
from tests.cluster.support import http_sql, owners

pytestmark = pytest.mark.cluster

TABLES = [f"dc_{i}" for i in range(8)]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    with DevCluster(tmp_path_factory.mktemp("dev-cluster"), nodes=3, shards=6) as running:
        yield running


def _write_and_count(mode: str, tables: list[str]) -> str:
    return f"""
        async def scenario(ctx):
            c = client({mode!r})
            t0 = 1700000000000
            tables = {tables!r}
            pts = [point(t, t0 + i, {{"host": V().string(f"h{{i % 3}}")}}, {{"v": V().double(i)}})
                   for t in tables for i in range(10)]
            w = await write(c, ctx, pts)
            counts = {{}}
            for t in tables:
                r = await query(c, ctx, [t], f"SELECT count(*) AS n, sum(v) AS s FROM {{t}}")
                counts[t] = [rows(r)[0]["n"][0], rows(r)[0]["s"][0]]
            return {{"write": w, "counts": counts}}
        """


def test_direct_mode_writes_and_reads_every_owner(cluster: DevCluster, tmp_path: Path) -> None:
    tables = TABLES[:4]
    out = run_sdk(cluster.node_endpoints[0].grpc, _write_and_count("Direct", tables), tmp_path)
    assert out["write"] == [40, 0]
    assert out["counts"] == {t: [10, 45.0] for t in tables}
    owned = owners(cluster, tables)
    # Auto-created on first write through one node, they spread over the cluster's nodes.
    assert set(owned) == set(tables)
    assert len(set(owned.values())) > 1


def test_proxy_mode_through_one_node_reaches_every_owner(
    cluster: DevCluster, tmp_path: Path
) -> None:
    tables = TABLES[4:]
    entry = cluster.node_endpoints[2].grpc
    out = run_sdk(entry, _write_and_count("Proxy", tables), tmp_path)
    assert out["write"] == [40, 0]
    assert out["counts"] == {t: [10, 45.0] for t in tables}
    assert any(owner != entry for owner in owners(cluster, tables).values())


def test_route_names_each_tables_owner(cluster: DevCluster) -> None:
    owned = owners(cluster, TABLES[:4])
    nodes = {n.grpc: n for n in cluster.node_endpoints}
    with MetaClient(cluster.meta) as client:
        for r in client.route(TABLES[:4]):
            owner = nodes[r.endpoint]
            assert dict(r.endpoints) == {"http": owner.http, "flight": owner.flight}
    for node in cluster.node_endpoints:
        with grpc.insecure_channel(node.grpc) as channel:
            req = storage_pb2.RouteRequest(tables=TABLES[:4])
            req.context.database = "public"
            resp = channel.unary_unary(
                "/storage.StorageService/Route",
                request_serializer=storage_pb2.RouteRequest.SerializeToString,
                response_deserializer=storage_pb2.RouteResponse.FromString,
            )(req, timeout=10)
        got = {r.table: f"{r.endpoint.ip}:{r.endpoint.port}" for r in resp.routes}
        assert got == owned


def test_ddl_through_any_node(cluster: DevCluster, tmp_path: Path) -> None:
    a, b, c = (n.grpc for n in cluster.node_endpoints)
    out = run_sdk(
        a,
        f"""
        async def scenario(ctx):
            def at(endpoint):
                b = Builder(endpoint, Mode.Proxy)
                b.set_default_database("public")
                return b.build()
            create = await query(at({a!r}), ctx, [], "CREATE TABLE dc_ddl (host string TAG, "
                                 "v double, ts timestamp NOT NULL, TIMESTAMP KEY(ts))")
            insert = await query(at({b!r}), ctx, [],
                                 "INSERT INTO dc_ddl (host, v, ts) VALUES ('x', 2.5, 1)")
            sel = await query(at({c!r}), ctx, [], "SELECT host, v FROM dc_ddl")
            drop = await query(at({c!r}), ctx, [], "DROP TABLE dc_ddl")
            gone = await error(query(at({a!r}), ctx, [], "SELECT * FROM dc_ddl"))
            return {{"create": create.affected_rows, "insert": insert.affected_rows,
                    "rows": rows(sel), "drop": drop.affected_rows, "gone": gone}}
        """,
        tmp_path,
    )
    assert out["create"] == 0 and out["insert"] == 1 and out["drop"] == 0
    assert out["rows"] == [{"host": ["x", "String"], "v": [2.5, "Double"]}]
    assert "does not exist" in out["gone"]


def test_a_forwarded_request_is_never_forwarded_again(cluster: DevCluster) -> None:
    """A write marked as forwarded that reaches a node not serving its table is refused,
    naming the owner, instead of travelling on."""
    owner = owners(cluster, TABLES[:1])[TABLES[0]]
    other = next(n.grpc for n in cluster.node_endpoints if n.grpc != owner)
    req = storage_pb2.WriteRequest()
    req.context.database = "public"
    t = req.table_requests.add(table=TABLES[0], tag_names=["host"], field_names=["v"])
    entry = t.entries.add()
    entry.tags.add(name_index=0).value.string_value = "h9"
    point = entry.field_groups.add(timestamp=1700000001000)
    point.fields.add(name_index=0).value.float64_value = 1.0
    with grpc.insecure_channel(other) as channel:
        resp = channel.unary_unary(
            "/storage.StorageService/Write",
            request_serializer=storage_pb2.WriteRequest.SerializeToString,
            response_deserializer=storage_pb2.WriteResponse.FromString,
        )(req, timeout=10, metadata=((FORWARDED_FROM, "127.0.0.1:1"),))
    assert resp.header.code != 200
    assert owner in resp.header.error


def test_sql_over_http_on_any_node(cluster: DevCluster) -> None:
    nodes = [n.http for n in cluster.node_endpoints]
    status, _ = http_sql(
        nodes[0],
        "CREATE TABLE dc_http (host string TAG, v double, ts timestamp NOT NULL, "
        "TIMESTAMP KEY(ts)) WITH (update_mode='APPEND')",
    )
    assert status == 200
    for i, node in enumerate(nodes):
        status, body = http_sql(
            node, f"INSERT INTO dc_http (host, v, ts) VALUES ('n{i}', {i}.5, {1000 + i})"
        )
        assert (status, body) == (200, {"affected_rows": 1})
    for node in nodes:
        status, body = http_sql(node, "SELECT host, v FROM dc_http ORDER BY host")
        assert status == 200
        assert body["rows"] == [{"host": f"n{i}", "v": i + 0.5} for i in range(len(nodes))]
    status, body = http_sql(nodes[1], "SELECT nosuch FROM dc_http")
    assert status == 400 and "nosuch" in body["message"]


def test_nodes_report_their_figures(cluster: DevCluster) -> None:
    """Heartbeats carry each node's figures; the meta service shows them to operators."""
    deadline = time.monotonic() + 30
    with MetaClient(cluster.meta) as client:
        while True:
            nodes = [n for n in client.nodes() if n.live]
            shards = {s.id for s in client.shards()}
            figures = [dict(n.figures) for n in nodes]
            if all(f for f in figures) and sum(f["shards"] for f in figures) == len(shards):
                break
            assert time.monotonic() < deadline, figures
            time.sleep(0.2)
    for f in figures:
        assert set(f) >= {"tables", "memtable_bytes", "rows_written_per_s", "queries_per_s", "cpu"}
        assert f["tables"] >= 0 and f["cpu"] >= 0
    out = subprocess.run(
        [sys.executable, "-m", "gnomon_app.cli", "admin", "nodes", "--meta", cluster.meta],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={**os.environ, "COLUMNS": "200"},
    ).stdout
    assert "rows/s" in out and "MiB" in out


def test_http_route_names_the_owner_on_every_node(cluster: DevCluster) -> None:
    owned = owners(cluster, TABLES[:4])
    nodes = {n.grpc: n for n in cluster.node_endpoints}
    for node in cluster.node_endpoints:
        for table in TABLES[:4]:
            owner = nodes[owned[table]]
            with urllib.request.urlopen(f"http://{node.http}/route/{table}", timeout=30) as r:
                assert json.loads(r.read()) == {
                    "table": table,
                    "grpc": owner.grpc,
                    "http": owner.http,
                    "flight": owner.flight,
                }
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(f"http://{node.http}/route/nosuch", timeout=30)
        assert missing.value.code == 404
