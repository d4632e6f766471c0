"""The console's cluster page on a small dev cluster (two data nodes, each shard followed on
the other, and a compaction node): every node and every shard the meta service knows, as any
node shows them."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from playwright.sync_api import expect

from gnomon_app.devcluster.cluster import DevCluster
from meta.client import MetaClient
from tests.console.conftest import Watched

pytestmark = pytest.mark.cluster

SHARDS = 4


def _sql(endpoint: str, query: str) -> None:
    request = urllib.request.Request(
        f"http://{endpoint}/sql",
        json.dumps({"query": query}).encode(),
        {"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        assert answer.status == 200


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    root = tmp_path_factory.mktemp("console-cluster")
    with DevCluster(root, nodes=2, shards=SHARDS, followers=1, compaction_nodes=1) as running:
        http = running.node_endpoints[0].http
        for table in ("cpu", "mem"):
            for query in (
                f"CREATE TABLE {table} (host string TAG, v double, ts timestamp NOT NULL, "
                "TIMESTAMP KEY(ts))",
                f"INSERT INTO {table} (host, v, ts) VALUES ('a', 1.5, 1700000000000)",
            ):
                _sql(http, query)
        yield running


def test_cluster_page_shows_every_node_and_shard(
    cluster: DevCluster, open_page: Callable[[str], Watched], screenshots: Path
) -> None:
    with MetaClient(cluster.meta, peer=cluster.peer) as meta:
        deadline = time.monotonic() + 60
        while True:
            shards = meta.shards()
            if all(len(s.followers) == 1 for s in shards) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
    assert len(shards) == SHARDS
    assert all(len(s.followers) == 1 for s in shards)
    origin = f"http://{cluster.node_endpoints[1].http}"
    watched = open_page(origin)
    page = watched.page
    page.goto(f"{origin}/dashboard")
    page.get_by_role("link", name="Cluster").click()
    nodes = page.locator("#cluster-nodes tbody tr")
    expect(nodes).to_have_count(len(cluster.node_endpoints))
    for node in cluster.node_endpoints:
        row = page.locator("#cluster-nodes tbody tr", has_text=node.grpc)
        expect(row).to_have_count(1)
        expect(row).to_contain_text("live")
    rows = page.locator("#cluster-shards tbody tr")
    expect(rows).to_have_count(SHARDS)
    for shard in shards:
        row = rows.filter(has=page.locator("td:first-child", has_text=str(shard.id)))
        expect(row).to_contain_text(shard.leader)
        expect(row).to_contain_text(str(shard.epoch))
        expect(row.locator("td").nth(2)).to_contain_text(shard.followers[0])
    compaction = page.locator("#cluster-compaction tbody tr")
    expect(compaction).to_have_count(len(cluster.compaction_endpoints))
    expect(compaction.first).to_contain_text(cluster.compaction_endpoints[0].grpc)
    expect(page.locator("#cluster-procedures")).to_contain_text("No procedure is running")
    page.screenshot(path=str(screenshots / "console-cluster.png"))
    watched.check_clean()
