"""Follower shards on a running cluster (real etcd, broker, S3 server, meta and ``gnomon node``
processes): a follower reads its leader's log into a read-only copy that serves follower reads,
reports its lag, and is promoted when the leader dies, replaying only what it had not applied,
with no acknowledged row lost.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gnomon_app.devcluster.cluster import DevCluster, NodeEndpoints
from meta.client import MetaClient
from testkit.wait import wait_until
from tests.cluster.support import http_sql, post
from tests.cluster.test_failover import (
    LEASE_TTL_S,
    SETTLE_S,
    Writer,
    assert_acked_once,
    create_tables,
    grpc_write,
)

pytestmark = pytest.mark.cluster

TABLE = "fol_t"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[DevCluster]:
    with DevCluster(tmp_path / "cluster", nodes=3, shards=3, lease_ttl_s=LEASE_TTL_S) as running:
        yield running


def _follow(cluster: DevCluster, table: str) -> tuple[NodeEndpoints, NodeEndpoints, int]:
    """Give ``table``'s shard a follower: (leader, follower, shard id)."""
    leader = cluster.node_endpoints[cluster.leader_of(table)]
    follower = next(n for n in cluster.node_endpoints if n.grpc != leader.grpc)
    with MetaClient(cluster.meta) as client:
        (route,) = client.route([table])
        proc = client.add_follower(route.shard_id, follower.grpc)
        assert client.wait_procedure(proc.id, timeout_s=SETTLE_S).status == "done"
    return leader, follower, route.shard_id


def _sst_rows(node: NodeEndpoints) -> float:
    """The rows of :data:`TABLE` in ``node``'s SSTs, by its metrics."""
    with urllib.request.urlopen(f"http://{node.http}/metrics", timeout=10) as resp:
        flushed = [
            line for line in resp.read().decode().splitlines()
            if line.startswith(f'gnomon_table_ssts{{table="{TABLE}",unit="rows"}}')
        ]  # fmt: skip
    return float(flushed[0].split()[-1]) if flushed else 0.0


def _follower_count(node: NodeEndpoints, table: str) -> int | None:
    status, body = post(
        node.http,
        "/sql",
        json.dumps({"query": f"SELECT count(*) AS n FROM {table}", "read": "follower"}).encode(),
    )
    assert status == 200, body
    rows: list[dict[str, Any]] = body["rows"]
    return int(rows[0]["n"])


def test_a_follower_serves_reads_of_what_its_leader_acknowledged(cluster: DevCluster) -> None:
    # APPEND keeps every copy of a row, so a row read from both an SST and a memtable would
    # count twice; a 1 KiB write buffer makes the leader flush on every write.
    status, body = http_sql(
        cluster.node_endpoints[0].http,
        f"CREATE TABLE {TABLE} (w string TAG, id bigint, ts timestamp NOT NULL, "
        "TIMESTAMP KEY(ts)) WITH (update_mode='APPEND', write_buffer_size='1kb')",
    )
    assert status == 200, body
    leader, follower, shard = _follow(cluster, TABLE)
    for start in range(0, 200, 50):
        code, error = grpc_write(leader.grpc, TABLE, list(range(start, start + 50)))
        assert code == 200, error
    wait_until(
        "the follower reads the acknowledged rows",
        lambda: _follower_count(follower, TABLE) == 200,
        timeout_s=SETTLE_S,
    )
    # The leader flushes them as they come (compaction may merge its SSTs meanwhile).
    wait_until("the leader flushes", lambda: _sst_rows(leader) >= 100, timeout_s=SETTLE_S)
    time.sleep(1.0)  # a few catch-up rounds with the leader's flushes: still no row twice
    assert _follower_count(follower, TABLE) == 200

    # A write sent to the follower goes to the leader; routes name the follower.
    code, error = grpc_write(follower.grpc, TABLE, list(range(200, 210)))
    assert code == 200, error
    with urllib.request.urlopen(f"http://{follower.http}/route/{TABLE}", timeout=10) as resp:
        route = json.load(resp)
    assert [f["grpc"] for f in route["followers"]] == [follower.grpc]
    with urllib.request.urlopen(f"http://{follower.http}/metrics", timeout=10) as resp:
        metrics = resp.read().decode()
    assert f'gnomon_follower_lag{{shard="{shard}",unit="records"}}' in metrics

    # Served by the copy: with the leader stopped, a follower read still answers.
    wait_until(
        "the follower catches up",
        lambda: _follower_count(follower, TABLE) == 210,
        timeout_s=SETTLE_S,
    )
    cluster.pause_node(cluster.node_index(leader.grpc))
    try:
        assert _follower_count(follower, TABLE) == 210
    finally:
        cluster.resume_node(cluster.node_index(leader.grpc))


def test_a_killed_leaders_shard_goes_to_its_follower(cluster: DevCluster, tmp_path: Path) -> None:
    create_tables(cluster, [TABLE])
    leader, follower, shard = _follow(cluster, TABLE)
    writer = Writer(cluster, [TABLE], tmp_path, batch=10)
    try:
        writer.wait_progress(5)
        victim = cluster.node_index(leader.grpc)
        cluster.kill_node(victim)
        with MetaClient(cluster.meta) as client:
            wait_until(
                "the follower leads the shard",
                lambda: next(s for s in client.shards() if s.id == shard).leader == follower.grpc,
                timeout_s=SETTLE_S,
            )
        writer.wait_progress(5)
    finally:
        writer.stop()
    assert_acked_once(cluster, writer.snapshot(), down={victim})
