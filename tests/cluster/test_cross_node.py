"""Cross-node queries on a running cluster: two tables on different nodes joined and unioned
through every node, over HTTP /sql and gRPC SqlQuery, the remote table read with its
columns and filter pushed to its owner."""

from __future__ import annotations

import json
import re
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from gnomon.devcluster.cluster import DevCluster
from gnomon.flight.client import FlightClient
from meta.client import MetaClient
from tests.cluster.support import grpc_rows, http_sql

#: Tables made until two land on different nodes (the meta service spreads them).
CANDIDATES = 8
#: Tries of a query that meets a shard moving (the meta service rebalances a young cluster).
TRIES = 15
DDL = (
    "CREATE TABLE IF NOT EXISTS {} "
    "(host string TAG, v double, ts timestamp NOT NULL, TIMESTAMP KEY(ts))"
)
JOIN = (
    "SELECT a.host, a.v AS av, b.v AS bv FROM {a} a JOIN {b} b ON a.host = b.host "
    "AND a.ts = b.ts WHERE b.v > 1 ORDER BY a.host"
)
UNION = (
    "SELECT host, v FROM {a} WHERE host <> 'h0' UNION ALL "
    "SELECT host, v FROM {b} WHERE host IN ('h0', 'h2') ORDER BY v"
)


def _settled_sql(endpoint: str, query: str) -> Any:
    """The answer to ``query``, asked again while a shard it reads is moving (503)."""
    for _ in range(TRIES):
        status, body = http_sql(endpoint, query)
        if status != 503:
            break
        time.sleep(1)
    assert status == 200, body
    return body


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    with DevCluster(tmp_path_factory.mktemp("cross-node"), nodes=3, shards=6) as running:
        yield running


@pytest.fixture(scope="module")
def tables(cluster: DevCluster) -> dict[str, str]:
    """Two tables served by different nodes, their rows written: name -> owner (gRPC)."""
    entry = cluster.node_endpoints[0].http
    owners: dict[str, str] = {}
    with MetaClient(cluster.meta) as client:
        for i in range(CANDIDATES):
            name = f"xn_{i}"
            _settled_sql(entry, DDL.format(name))
            (route,) = client.route([name])
            if route.endpoint not in owners.values():
                owners[name] = route.endpoint
            if len(owners) == 2:
                break
    assert len(owners) == 2, "every table landed on one node"
    a, b = owners
    for name, scale in ((a, 1.0), (b, 2.0)):
        values = ", ".join(f"('h{i}', {i * scale}, {1700000000000 + i})" for i in range(4))
        _settled_sql(entry, f"INSERT INTO {name} (host, v, ts) VALUES {values}")
    return owners


def _expected(a: str, b: str) -> dict[str, list[dict[str, Any]]]:
    return {
        JOIN.format(a=a, b=b): [
            {"host": "h1", "av": 1.0, "bv": 2.0},
            {"host": "h2", "av": 2.0, "bv": 4.0},
            {"host": "h3", "av": 3.0, "bv": 6.0},
        ],
        UNION.format(a=a, b=b): [
            {"host": "h0", "v": 0.0},
            {"host": "h1", "v": 1.0},
            {"host": "h2", "v": 2.0},
            {"host": "h3", "v": 3.0},
            {"host": "h2", "v": 4.0},
        ],
    }


def test_join_and_union_across_nodes_from_every_node_over_http(
    cluster: DevCluster, tables: dict[str, str]
) -> None:
    a, b = tables
    for node in cluster.node_endpoints:
        for query, rows in _expected(a, b).items():
            assert _settled_sql(node.http, query)["rows"] == rows, (node.name, query)


def test_join_and_union_across_nodes_from_every_node_over_grpc(
    cluster: DevCluster, tables: dict[str, str]
) -> None:
    a, b = tables
    for node in cluster.node_endpoints:
        for query, rows in _expected(a, b).items():
            assert grpc_rows(node.grpc, query) == rows, (node.name, query)


def test_the_owner_sends_only_the_columns_and_rows_asked_for(
    cluster: DevCluster, tables: dict[str, str]
) -> None:
    a, b = tables
    remote, reader = "", cluster.node_endpoints[0]
    for _ in range(TRIES):
        # The meta service rebalances a young cluster's shards: ask every node until one
        # reads b from another node (any node not serving b does).
        for reader in cluster.node_endpoints:
            body = _settled_sql(reader.http, "EXPLAIN ANALYZE " + JOIN.format(a=a, b=b))
            scans = [r["plan"] for r in body["rows"] if r["plan_type"] == "gnomon_scan"]
            remote = next((s for s in scans if f"table={b} " in s and "owner=" in s), "")
            if remote:
                break
        if remote:
            break
        time.sleep(1)
    at = remote.split("owner=")[1].split()[0]
    owner = next(n for n in cluster.node_endpoints if n.grpc == at)
    assert owner != reader
    assert "filter=(v > 1)" in remote
    projection = remote.split("projection=")[1].split(" filter=")[0]
    assert sorted(json.loads(projection.replace("'", '"'))) == ["host", "ts", "v"]
    # Three of b's four rows match v > 1: the owner sent those three.
    assert "rows_received=3" in remote
    scan_id = remote.split("scan_id=")[1].split()[0]
    with FlightClient(owner.flight) as c:
        assert c.scan_stats(scan_id)["rows_returned"] == 3


def test_a_query_of_one_table_is_answered_by_every_node(
    cluster: DevCluster, tables: dict[str, str]
) -> None:
    """A query of one node's tables alone is forwarded whole to that node over gRPC (the
    executor's side of that is in test_remote_tables.py)."""
    b = list(tables)[1]
    query = f"SELECT count(*) AS n FROM {b} WHERE v > 1"
    for node in cluster.node_endpoints:
        assert grpc_rows(node.grpc, query) == [{"n": 3}], node.name


def _planning(endpoint: str) -> dict[str, float]:
    """The node's ``gnomon_query_planning_total`` figures, by kind."""
    with urllib.request.urlopen(f"http://{endpoint}/metrics", timeout=10) as r:
        text = r.read().decode()
    found = re.findall(r'^gnomon_query_planning_total\{kind="(\w+)"\} (\S+)$', text, re.M)
    return {kind: float(n) for kind, n in found}


def test_a_join_across_nodes_plans_once_and_describes_each_table_once(
    cluster: DevCluster, tables: dict[str, str]
) -> None:
    """Every table of a query is found as DataFusion plans it, once: no plan fails on a
    table served elsewhere to be made again, and a remote table's schema is kept with its
    route instead of being asked for by every query."""
    a, b = tables
    query = JOIN.format(a=a, b=b)
    runs = 3
    for node in cluster.node_endpoints:
        _settled_sql(node.http, query)  # its routes and schemas fetched, shards settled
        before = _planning(node.http)
        for _ in range(runs):
            status, body = http_sql(node.http, query)
            assert status == 200, body
        after = _planning(node.http)
        assert after["plans"] - before["plans"] == runs, node.name
        assert after["remote_describes"] == before["remote_describes"], node.name
