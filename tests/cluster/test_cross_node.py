"""Cross-node queries on a running cluster: two tables on different nodes joined and unioned
through every node (a query node, owning no shard, too), over HTTP /sql and gRPC SqlQuery,
the remote table read with its columns and filter pushed to its owner."""

from __future__ import annotations

import json
import re
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from click.testing import CliRunner

from gnomon.flight.client import FlightClient
from gnomon.proto import meta_pb2 as pb
from gnomon_app.cli import main
from gnomon_app.devcluster.cluster import DevCluster
from meta.client import MetaClient
from tests.cluster.support import grpc_rows, grpc_write, http_sql

pytestmark = pytest.mark.cluster

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
    with DevCluster(
        tmp_path_factory.mktemp("cross-node"), nodes=3, shards=6, query_nodes=1
    ) as running:
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


def _every_node(cluster: DevCluster) -> list[Any]:
    return [*cluster.node_endpoints, *cluster.query_endpoints]


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
    for node in _every_node(cluster):
        for query, rows in _expected(a, b).items():
            assert _settled_sql(node.http, query)["rows"] == rows, (node.name, query)


def test_join_and_union_across_nodes_from_every_node_over_grpc(
    cluster: DevCluster, tables: dict[str, str]
) -> None:
    a, b = tables
    for node in _every_node(cluster):
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
    for node in _every_node(cluster):
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
    for node in _every_node(cluster):
        _settled_sql(node.http, query)  # its routes and schemas fetched, shards settled
        before = _planning(node.http)
        for _ in range(runs):
            status, body = http_sql(node.http, query)
            assert status == 200, body
        after = _planning(node.http)
        assert after["plans"] - before["plans"] == runs, node.name
        assert after["remote_describes"] == before["remote_describes"], node.name


def test_a_query_node_owns_no_shard_and_answers_for_the_data_nodes(
    cluster: DevCluster, tables: dict[str, str]
) -> None:
    (query_node,) = cluster.query_endpoints
    with MetaClient(cluster.meta) as client:
        (registered,) = [n for n in client.nodes() if n.name == query_node.grpc]
        assert registered.kind == pb.QUERY and registered.live
        assert registered.leader_shards == registered.follower_shards == 0
        assert all(s.leader != query_node.grpc for s in client.shards())
    listed = (
        CliRunner()
        .invoke(main, ["admin", "nodes", "--meta", cluster.meta], terminal_width=250)
        .output
    )
    (row,) = [line for line in listed.splitlines() if query_node.grpc in line]
    assert "query" in row, listed

    # Every node lists the database's tables, served there or not.
    shown = [
        sorted(_settled_sql(n.http, "SHOW TABLES")["rows"], key=str) for n in _every_node(cluster)
    ]
    assert all(s == shown[0] for s in shown), shown
    assert set(tables) <= {r["Tables"] for r in shown[0]}

    # Writes through it land at the owner: SQL, and the HoraeDB SDK's gRPC Write.
    a = next(iter(tables))
    _settled_sql(
        query_node.http, f"INSERT INTO {a} (host, v, ts) VALUES ('q1', 9.5, 1700000009000)"
    )
    assert grpc_write(query_node.grpc, a, "q2", 8.5, 1700000009001) == 1
    owner = next(n for n in cluster.node_endpoints if n.grpc == tables[a])
    rows = _settled_sql(
        owner.http, f"SELECT host, v FROM {a} WHERE host IN ('q1', 'q2') ORDER BY host"
    )
    assert rows["rows"] == [{"host": "q1", "v": 9.5}, {"host": "q2", "v": 8.5}]


def test_a_partition_table_made_elsewhere_is_read_at_once_through_the_query_node(
    cluster: DevCluster, tables: dict[str, str]
) -> None:
    """The query node meets the table first as the query plans: the query's timestamps
    (integers, read as such for a timestamp column) and its split over the sub-tables need
    the table known, so it is found again with it."""
    entry = cluster.node_endpoints[0].http
    _settled_sql(
        entry,
        "CREATE TABLE pt (host string TAG, v double, ts timestamp NOT NULL, TIMESTAMP KEY(ts)) "
        "PARTITION BY KEY(host) PARTITIONS 3",
    )
    values = ", ".join(f"('h{i}', {i}.5, {1700000000000 + i})" for i in range(6))
    _settled_sql(entry, f"INSERT INTO pt (host, v, ts) VALUES {values}")
    (query_node,) = cluster.query_endpoints
    query = (
        "SELECT count(*) AS n, max(v) AS m FROM pt WHERE ts BETWEEN 1700000000001 AND 1700000000004"
    )
    assert _settled_sql(query_node.http, query)["rows"] == [{"n": 4, "m": 4.5}]


def test_every_node_finds_the_same_table_for_a_name(
    cluster: DevCluster, tables: dict[str, str]
) -> None:
    """A quoted name in other letters finds the table as the owner does (gnomon's folding
    rule) through every node, not a table of its own elsewhere."""
    a = next(iter(tables))
    nodes = _every_node(cluster)
    for i, node in enumerate(nodes):
        _settled_sql(
            node.http,
            f'INSERT INTO "{a.upper()}" (host, v, ts) '
            f"VALUES ('fold{i}', 1.0, {1700000100000 + i})",
        )
    (row,) = _settled_sql(nodes[0].http, f"SELECT count(*) AS n FROM {a} WHERE host LIKE 'fold%'")[
        "rows"
    ]
    assert row == {"n": len(nodes)}
    shown = {r["Tables"] for r in _settled_sql(nodes[-1].http, "SHOW TABLES")["rows"]}
    assert a.upper() not in shown and a in shown
