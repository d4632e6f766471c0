"""Spark on a 3-node dev cluster (real etcd, broker, S3 server, meta and ``gnomon node``
processes) and a real local Spark: a job writing a partition table through one node stages
each sub-table's rows at its owner (each owner holds exactly the rows the key sends there),
and a read through another node plans at every owner and each task reads from its owner: the
owners' scan statistics show each served its sub-table's rows. Spark here has no s3a
filesystem, so every row is read over Flight. A plain table written through a node that does
not own it lands at its owner. On a cluster whose every shard has a follower, a read allowing
follower reads is served by the followers alone. On a cluster whose nodes keep their SSTs in
one directory they and Spark share (NFS, EFS), Spark reads every flushed SST itself."""

from __future__ import annotations

import logging
import os
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest

import gnomon_app.spark
from gnomon.errors import NotFound
from gnomon.flight.client import FlightClient
from gnomon.flight.ticket import ScanSpec
from gnomon_app.devcluster.cluster import DevCluster, NodeEndpoints
from gnomon_app.spark import planning
from gnomon_app.spark.session import local_session
from meta.client import MetaClient
from node.partition.rule import KeyRule
from testkit.wait import wait_until
from tests.cluster.support import http_sql

pytestmark = pytest.mark.cluster

PARTITIONS = 3
HOSTS = 30
ROWS_PER_HOST = 200
#: Tries of a statement that meets a shard moving (a young cluster rebalances), a second apart.
TRIES = 30


def _settled(what: str, call: Any) -> Any:
    for _ in range(TRIES):
        status, body = call()
        if status != 503:
            break
        time.sleep(1)
    assert status in (200, 204), f"{what}: {status} {body}"
    return body


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    with DevCluster(tmp_path_factory.mktemp("spark"), nodes=3, shards=6) as running:
        yield running


@pytest.fixture(scope="module")
def followed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    """A cluster whose every shard has a follower."""
    with DevCluster(tmp_path_factory.mktemp("followed"), nodes=3, shards=3, followers=1) as running:
        yield running


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    """A cluster whose nodes keep their SSTs in one shared directory."""
    root = tmp_path_factory.mktemp("shared")
    flags = (f"--store=file://{root / 'sst'}",)
    with DevCluster(root / "cluster", nodes=3, shards=3, node_flags=flags) as running:
        yield running


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    session = local_session("gnomon-cluster-tests")
    yield session
    session.stop()


def _rows_at(owner: str, table: str) -> int:
    """The rows of ``table`` at ``owner`` (which scans only tables it serves)."""
    with FlightClient(owner) as c:
        return c.read_all(ScanSpec(table=table)).num_rows


def _frame(spark: Any) -> Any:
    from pyspark.sql import functions as F

    return spark.range(HOSTS * ROWS_PER_HOST, numPartitions=2).select(
        F.format_string("host_%03d", F.col("id") % HOSTS).alias("host"),
        (F.col("id") * 0.5).alias("v"),
        F.timestamp_millis(
            F.lit(1_700_000_000_000) + (F.col("id") / HOSTS).cast("long") * 1000
        ).alias("ts"),
    )


def _partitioned(node: NodeEndpoints, table: str, options: str = "") -> None:
    """A partition table of ``PARTITIONS`` sub-tables by host, made through ``node``."""
    _settled(
        "create",
        lambda: http_sql(
            node.http,
            f"CREATE TABLE {table} (host string TAG, v double, ts timestamp NOT NULL, "
            f"TIMESTAMP KEY(ts)) PARTITION BY KEY(host) PARTITIONS {PARTITIONS} {options}",
        ),
    )


def _rows(frame: Any) -> list[tuple[Any, ...]]:
    """The rows of ``frame`` as (host, v, ts), sorted: a table made by CREATE TABLE lists its
    key columns first, so a read's columns come in another order than the test frame's."""
    return sorted(tuple(r) for r in frame.select("host", "v", "ts").collect())


def _written(spark: Any, endpoint: str, table: str) -> list[tuple[Any, ...]]:
    """The test rows, written to ``table`` by a Spark job through ``endpoint``; sorted."""
    frame = _frame(spark)
    frame.write.format("gnomon").option("endpoint", endpoint).option("table", table).mode(
        "append"
    ).save()
    return _rows(frame)


def test_partition_table_written_and_read_at_every_owner(
    cluster: DevCluster, spark: Any, caplog: pytest.LogCaptureFixture
) -> None:
    nodes = cluster.node_endpoints
    _partitioned(nodes[0], "sp")
    with MetaClient(cluster.meta) as client:
        (route,) = client.route(["sp"])
    owners = {p.table: p.endpoints["flight"] for p in route.partitions}
    assert len(set(owners.values())) == 3  # one sub-table per node

    # Written through node 1: each sub-table's rows staged at its owner, one revision each.
    frame = _frame(spark)
    frame.write.format("gnomon").option("endpoint", nodes[1].flight).option("table", "sp").mode(
        "append"
    ).save()
    rows = frame.collect()
    hosts = sorted({r.host for r in rows})
    parts = KeyRule(("host",), PARTITIONS).of({"host": pa.array(hosts)}, len(hosts))
    want = {f"__sp_{i}": 0 for i in range(PARTITIONS)}
    for host, part in zip(hosts, parts, strict=True):
        want[f"__sp_{part}"] += sum(1 for r in rows if r.host == host)
    for sub, owner in owners.items():
        assert _rows_at(owner, sub) == want[sub], sub

    # Read through node 2: planned at every owner, each task reading from its owner.
    scan_id = uuid.uuid4().hex
    with caplog.at_level(logging.WARNING, logger="gnomon_app.spark"):
        got = gnomon_app.spark.read(spark, "sp", endpoint=nodes[2].flight, scan_id=scan_id)
        gnomon_app.spark.read(spark, "sp", endpoint=nodes[0].flight)
    # The store is S3 and this Spark has no s3a: said once, every row read over Flight.
    said = [r for r in caplog.records if "cannot read the SSTs" in r.getMessage()]
    assert len(said) == 1
    assert _rows(got) == _rows(frame)
    served = {}
    for sub, owner in owners.items():
        with FlightClient(owner) as c:
            served[sub] = c.scan_stats(f"{scan_id}/{sub}")["rows_returned"]
    assert served == want


def test_plain_table_lands_at_its_owner(cluster: DevCluster, spark: Any) -> None:
    nodes = cluster.node_endpoints
    _settled(
        "create",
        lambda: http_sql(
            nodes[0].http,
            "CREATE TABLE plain (host string TAG, v double, ts timestamp NOT NULL, "
            "TIMESTAMP KEY(ts))",
        ),
    )
    where = planning.route(nodes[0].flight, "plain")
    ((_, owner),) = where.parts
    other = next(n.flight for n in nodes if n.flight != owner)
    frame = _frame(spark)
    frame.write.format("gnomon").option("endpoint", other).option("table", "plain").mode(
        "append"
    ).save()
    assert _rows_at(owner, "plain") == HOSTS * ROWS_PER_HOST
    back = gnomon_app.spark.read(spark, "plain", endpoint=other, columns=["v"]).collect()
    assert sorted(r.v for r in back) == sorted(r.v for r in frame.collect())


def test_follower_reads_are_served_by_followers(followed: DevCluster, spark: Any) -> None:
    nodes = followed.node_endpoints
    _partitioned(nodes[0], "fr")
    rows = _written(spark, nodes[0].flight, "fr")
    where = planning.route(nodes[1].flight, "fr")
    assert all(len(where.followers[sub]) == 1 for sub, _ in where.parts), where
    # Each follower takes the leader's new manifest version, and a new table, a moment after
    # it is published; until then a part is planned at its leader (with a warning), so the
    # read is tried again until every part was served by its follower.
    scan_id = ""

    def served_at(endpoint: str, sub: str) -> bool:
        with FlightClient(endpoint) as c:
            try:
                c.scan_stats(f"{scan_id}/{sub}")
            except NotFound:
                return False
        return True

    def followers_have_it() -> bool:
        nonlocal scan_id
        scan_id = uuid.uuid4().hex
        got = gnomon_app.spark.read(spark, "fr", endpoint=nodes[1].flight, read="follower",
                                scan_id=scan_id)  # fmt: skip
        if _rows(got) != rows:
            return False
        return all(served_at(where.followers[sub][0], sub) for sub, _ in where.parts)

    wait_until("the followers serve the job's rows", followers_have_it, timeout_s=90)
    served = 0
    for sub, leader in where.parts:
        (follower,) = where.followers[sub]
        assert follower != leader
        with FlightClient(follower) as c:
            served += c.scan_stats(f"{scan_id}/{sub}")["rows_returned"]
        with FlightClient(leader) as c, pytest.raises(NotFound):
            c.scan_stats(f"{scan_id}/{sub}")  # the leader served nothing of it
    assert served == len(rows)
    # Its snapshots: one at each follower it reads, and the same version at each leader,
    # whose garbage collection would otherwise delete the files under the followers' feet.
    held = planning.plan(nodes[1].flight, ScanSpec(table="fr", lease_ms=60_000), follower=True)
    assert sorted(h.owner for h in held.held) == sorted(
        [
            *(leader for _, leader in where.parts),
            *(f for fs in where.followers.values() for f in fs),
        ]
    )
    assert {s.owner for s in held.splits} <= {f for fs in where.followers.values() for f in fs}
    planning.release(held.held)
    # The format("gnomon") path takes the option too.
    back = (
        spark.read.format("gnomon").option("endpoint", nodes[2].flight).option("table", "fr")
        .option("read", "follower").load()
    )  # fmt: skip
    assert _rows(back) == rows


def test_a_shared_file_store_is_read_natively(shared: DevCluster, spark: Any) -> None:
    nodes = shared.node_endpoints
    # APPEND: the two tasks' SSTs of a sub-table overlap without shadowing each other.
    _partitioned(nodes[0], "sh", "WITH (update_mode='append')")
    rows = _written(spark, nodes[1].flight, "sh")
    # Every row is in SSTs needing no merge, at file: URIs Spark opens: no task reads a node.
    plan = planning.plan(nodes[2].flight, ScanSpec(table="sh", lease_ms=60_000, native=["file"]))
    planning.release(plan.held)
    assert plan.stores == {"file"}
    assert plan.native_rows == len(rows) and not plan.splits
    got = gnomon_app.spark.read(spark, "sh", endpoint=nodes[2].flight)
    assert _rows(got) == rows
