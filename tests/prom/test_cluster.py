"""Prometheus remote write, PromQL and remote read on a running cluster (real etcd, broker,
S3 server, meta and three `gnomon node` processes): a request posted to any node reaches the
owners of its metrics, and every node answers PromQL and remote read over all of them."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import pytest

from gnomon.proto import prometheus_pb2
from gnomon_app.devcluster.cluster import DevCluster
from node.prom.wire import snappy, unsnappy
from tests.cluster.support import owners, post
from tests.prom.conftest import write_request

pytestmark = pytest.mark.cluster

METRICS = [f"pc_{i}" for i in range(6)]
T0 = 1_700_000_000_000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    with DevCluster(tmp_path_factory.mktemp("prom-cluster"), nodes=3, shards=6) as running:
        yield running


@pytest.fixture(scope="module")
def written(cluster: DevCluster) -> dict[str, str]:
    """Every node took one remote write holding a sample of each metric; their owners."""
    for i, node in enumerate(cluster.node_endpoints):
        body = write_request(
            [({"__name__": m, "node": f"n{i}"}, [(T0 + i, float(i))]) for m in METRICS]
        )
        assert post(node.http, "/api/v1/write", snappy(body)) == (204, None)
    return owners(cluster, METRICS)


def _query(endpoint: str, query: str) -> Any:
    params = urlencode({"query": query, "time": str(T0 / 1000 + 1)})
    with urllib.request.urlopen(f"http://{endpoint}/api/v1/query?{params}", timeout=30) as r:
        return json.loads(r.read())["data"]["result"]


def test_writes_reach_owners_and_every_node_answers_promql(
    cluster: DevCluster, written: dict[str, str]
) -> None:
    assert len(set(written.values())) > 1  # the metrics live on several nodes
    for node in cluster.node_endpoints:
        for metric in METRICS:
            counts = _query(node.http, f"count({metric})")
            assert [s["value"][1] for s in counts] == ["3"], (node.http, metric)
        sums = _query(node.http, "sum(pc_0) + sum(pc_5)")
        assert sums[0]["value"][1] == "6"


def test_remote_read_through_any_node(cluster: DevCluster, written: dict[str, str]) -> None:
    del written
    LM = prometheus_pb2.LabelMatcher
    req = prometheus_pb2.ReadRequest(
        queries=[
            prometheus_pb2.Query(
                start_timestamp_ms=T0,
                end_timestamp_ms=T0 + 10,
                matchers=[LM(name="__name__", value="pc_3"), LM(name="node", value="n2")],
            )
        ]
    )
    for node in cluster.node_endpoints:
        http = urllib.request.Request(
            f"http://{node.http}/api/v1/read", data=snappy(req.SerializeToString()), method="POST"
        )
        with urllib.request.urlopen(http, timeout=30) as r:
            resp = prometheus_pb2.ReadResponse.FromString(unsnappy(r.read(), 1 << 30))
        (series,) = resp.results[0].timeseries
        assert [(s.timestamp, s.value) for s in series.samples] == [(T0 + 2, 2.0)]
