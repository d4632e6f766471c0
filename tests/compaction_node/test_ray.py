"""The Ray executor end to end: a compaction node started with ``--executor ray`` (a local Ray,
started once for this module's cluster) merges a data node's offloaded task as a Ray task; the
outputs are installed and every row is there once."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gnomon_app.devcluster.cluster import DevCluster
from testkit.wait import wait_until
from tests.compaction_node.support import (
    WAIT_S,
    check_rows,
    compacted,
    create_table,
    outcome,
    status,
    write,
)

pytestmark = pytest.mark.cluster

pytest.importorskip("ray")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    with DevCluster(
        tmp_path_factory.mktemp("ray"),
        nodes=1,
        shards=1,
        compaction_nodes=1,
        compaction_flags=("--executor=ray", "--slots=1"),
    ) as running:
        yield running


def test_the_ray_executor_merges_an_offloaded_task(cluster: DevCluster) -> None:
    node = cluster.compaction_endpoints[0].grpc
    assert status(node).executor == "ray"
    create_table(cluster, "r1")
    write(cluster, "r1")
    wait_until("r1 compacted", lambda: compacted(cluster, "r1"), timeout_s=WAIT_S)
    assert outcome(cluster, "offloaded") == 1
    assert status(node).tasks_done == 1
    check_rows(cluster, "r1")
