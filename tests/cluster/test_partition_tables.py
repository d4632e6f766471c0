"""A partition table over three nodes (real etcd, broker, S3 server, meta and ``gnomon node``
processes, and a query node owning none): its sub-tables placed on different data nodes, its
rows written through every write path (SQL INSERT through the query node, gRPC Write, line
protocol) at different nodes, and a seeded random set of SELECTs asked through every node,
the query node too, answered exactly as DuckDB answers over the same rows (the
differential harness of tests/sql), before and after one sub-table's shard is migrated to
another node, and after two sub-tables' shards are merged and split again. DROP removes every
sub-table from its owner."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from typing import Any

import grpc
import pyarrow as pa
import pytest

from gnomon.proto import storage_pb2 as pb
from gnomon_app.devcluster.cluster import DevCluster
from meta.client import MetaClient
from tests.cluster.support import http_sql, write_lines
from tests.partition import differential
from tests.server.test_grpc import decode
from tests.sql import test_differential as diff

pytestmark = pytest.mark.cluster

#: Tries of a statement that meets a shard moving (the meta service rebalances a young
#: cluster), a second apart.
TRIES = 30


def _settled(what: str, call: Any) -> Any:
    for _ in range(TRIES):
        status, body = call()
        if status != 503:
            break
        time.sleep(1)
    assert status in (200, 204), f"{what}: {status} {body}"
    return body


def grpc_table(endpoint: str, query: str) -> pa.Table:
    """The answer of ``query`` through gRPC SqlQuery, as Arrow."""
    req = pb.SqlQueryRequest(tables=[], sql=query)
    req.context.database = "public"
    with grpc.insecure_channel(endpoint) as channel:
        resp = channel.unary_unary(
            "/storage.StorageService/SqlQuery",
            request_serializer=pb.SqlQueryRequest.SerializeToString,
            response_deserializer=pb.SqlQueryResponse.FromString,
        )(req, timeout=60)
    assert resp.header.code == 200, f"{resp.header.code} {resp.header.error}"
    return decode(resp.arrow)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    with DevCluster(
        tmp_path_factory.mktemp("partitions"), nodes=3, shards=6, query_nodes=1
    ) as running:
        yield running


@pytest.fixture(scope="module")
def loaded(cluster: DevCluster) -> Iterator[Any]:
    """The partition table made through node 0 and its rows written through the query node
    and two data nodes, by every write path; DuckDB holding the same rows."""
    nodes = cluster.node_endpoints
    (query_node,) = cluster.query_endpoints
    _settled("create", lambda: http_sql(nodes[0].http, differential.DDL))
    data = differential.rows(random.Random(diff.SEED))
    by_sql: list[diff.Row] = []
    by_grpc: list[diff.Row] = []
    by_lines: list[diff.Row] = []
    for i, r in enumerate(data):
        if all(r[n] is None for n in differential.FIELDS):
            by_sql.append(r)  # a row of no field has no line-protocol or Write form
        else:
            [by_sql, by_grpc, by_lines][i % 3].append(r)
    for statement in differential.inserts(by_sql):
        _settled("insert", lambda s=statement: http_sql(query_node.http, s))
    for i in range(0, len(by_grpc), 500):
        _settled("write", lambda i=i: differential.grpc_write(nodes[1].grpc, by_grpc[i : i + 500]))
    for i in range(0, len(by_lines), 500):
        text = "\n".join(differential.line(r) for r in by_lines[i : i + 500])
        _settled("lines", lambda text=text: write_lines(nodes[2].http, text))
    con = differential.duck(data)
    yield con
    con.close()


def _sub_table_owners(client: MetaClient) -> dict[str, tuple[int, str]]:
    (route,) = client.route(["t"])
    return {p.table: (p.shard_id, p.endpoint) for p in route.partitions}


def _ask_every_node(cluster: DevCluster) -> Any:
    nodes = [*cluster.node_endpoints, *cluster.query_endpoints]
    asked = iter(range(1_000_000))

    def ask(query: str) -> pa.Table:
        return grpc_table(nodes[next(asked) % len(nodes)].grpc, query)

    return ask


def test_sub_tables_on_three_nodes(cluster: DevCluster, loaded: Any) -> None:
    with MetaClient(cluster.meta) as client:
        owners = _sub_table_owners(client)
    assert sorted(owners) == [f"__t_{i}" for i in range(differential.PARTITIONS)]
    assert {endpoint for _, endpoint in owners.values()} == {n.grpc for n in cluster.node_endpoints}
    nodes = cluster.node_endpoints
    (shown,) = _settled("show", lambda: http_sql(nodes[1].http, "SHOW CREATE TABLE t"))["rows"]
    assert "PARTITION BY KEY(`host`) PARTITIONS 3" in shown["Create Table"]
    counted = grpc_table(nodes[2].grpc, "SELECT count(*) AS n FROM t").column("n")[0].as_py()
    assert counted == loaded.execute("SELECT count(*) FROM t").fetchone()[0]
    # EXPLAIN through the query node names the node running each sub-table's partial query.
    (query_node,) = cluster.query_endpoints
    plan = _settled(
        "explain", lambda: http_sql(query_node.http, "EXPLAIN SELECT count(*) AS n FROM t")
    )["rows"]
    named = [r["plan"] for r in plan if r["plan_type"] == "gnomon_partial"]
    assert {p.split("owner=")[1].split()[0] for p in named} == {e for _, e in owners.values()}


def test_random_queries_agree_with_duckdb(cluster: DevCluster, loaded: Any) -> None:
    failures = differential.disagreements(_ask_every_node(cluster), loaded)
    assert not failures, f"{len(failures)} queries differ:\n\n" + "\n\n".join(failures[:5])


def test_after_a_sub_table_moves(cluster: DevCluster, loaded: Any) -> None:
    """One sub-table's shard migrated to another node (``gnomon admin migrate``): queries
    through every node still agree with DuckDB, and writes reach the new owner."""
    with MetaClient(cluster.meta) as client:
        sub, (shard, owner) = sorted(_sub_table_owners(client).items())[0]
        target = next(n.grpc for n in cluster.node_endpoints if n.grpc != owner)
        _done(client, client.migrate(shard, target).id)
        assert _sub_table_owners(client)[sub] == (shard, target)
    failures = differential.disagreements(_ask_every_node(cluster), loaded, queries=60, seed=2)
    assert not failures, f"{len(failures)} queries differ:\n\n" + "\n\n".join(failures[:5])


def _one_partial_per_owner(cluster: DevCluster, client: MetaClient, loaded: Any) -> list[str]:
    """The sub-tables each node answered one partial query for (EXPLAIN ANALYZE through the
    query node), checked against where the meta service places them."""
    served: dict[str, list[str]] = {}
    for name, (_, endpoint) in sorted(_sub_table_owners(client).items()):
        served.setdefault(endpoint, []).append(name)
    want = sorted(f"sub_tables={','.join(subs)} owner={e}" for e, subs in served.items())
    (query_node,) = cluster.query_endpoints
    query = "EXPLAIN ANALYZE SELECT host, count(*) AS n FROM t GROUP BY host"
    for _ in range(TRIES):  # until the query node's routes have them where they are now
        plan = _settled("explain", lambda: http_sql(query_node.http, query))["rows"]
        ran = [r["plan"] for r in plan if r["plan_type"] == "gnomon_partial"]
        got = sorted(p.split(" rows_received=")[0] for p in ran)
        if got == want:
            break
        time.sleep(1)
    assert got == want
    # Each host's rows are in one sub-table: the partial groups add up to the answer's.
    counted = sum(int(p.split("rows_received=")[1].split()[0]) for p in ran)
    groups = loaded.execute("SELECT count(*) FROM (SELECT host FROM t GROUP BY host)")
    assert counted == groups.fetchone()[0]
    return got


def _done(client: MetaClient, proc_id: int) -> None:
    proc = client.wait_procedure(proc_id, timeout_s=90)
    assert proc.status == "done", f"{proc.kind}: {proc.status} {proc.error}"


def test_after_a_merge_and_a_split(cluster: DevCluster, loaded: Any) -> None:
    """Two sub-tables' shards merged into one (``gnomon admin merge``), then that shard
    split (``gnomon admin split``), which moves one of them to a new shard: queries through
    every node agree with DuckDB after each."""
    with MetaClient(cluster.meta) as client:
        (first, (keep, _)), (second, (other, _)) = sorted(_sub_table_owners(client).items())[:2]
        _done(client, client.merge(keep, other).id)
        owners = _sub_table_owners(client)
        assert owners[first][0] == owners[second][0] == keep
        # The node serving the merged shard answers one partial query over both.
        asked = _one_partial_per_owner(cluster, client, loaded)
        groups = [set(p.split()[0].removeprefix("sub_tables=").split(",")) for p in asked]
        assert any({first, second} <= g for g in groups), asked
        failures = differential.disagreements(_ask_every_node(cluster), loaded, queries=40, seed=3)
        assert not failures, f"{len(failures)} differ:\n\n" + "\n\n".join(failures[:5])
        _done(client, client.split(keep).id)
        owners = _sub_table_owners(client)
        assert owners[first][0] != owners[second][0]
    failures = differential.disagreements(_ask_every_node(cluster), loaded, queries=60, seed=4)
    assert not failures, f"{len(failures)} queries differ:\n\n" + "\n\n".join(failures[:5])


def test_drop_removes_every_sub_table(cluster: DevCluster, loaded: Any) -> None:
    nodes = cluster.node_endpoints
    _settled("drop", lambda: http_sql(nodes[2].http, "DROP TABLE t"))
    with MetaClient(cluster.meta) as client:
        assert client.route(["t"]) == []
        assert not [t.name for t in client.tables() if t.name.startswith("__t_")]

    def listed() -> set[str]:
        return {
            r["Tables"]
            for n in nodes
            for r in _settled("show", lambda n=n: http_sql(n.http, "SHOW TABLES"))["rows"]
        }

    deadline = time.monotonic() + 60
    while listed() & {"t", "__t_0", "__t_1", "__t_2"} and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not listed() & {"t", "__t_0", "__t_1", "__t_2"}
