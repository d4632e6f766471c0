"""Offloaded compaction on a running cluster: real etcd, S3 server (moto), meta, one data node
offloading its merges, and two ``gnomon compaction-node`` processes.

The nodes hold each merged task's answer back a while (``GNOMON_HOLD_ANSWER_S``), so a task
stays in flight long enough to be seen, killed or timed out: node 0 past the data node's
offload timeout (its answers always come too late), node 1 well within it. The tests run in
order on one cluster; each leaves both compaction nodes running.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator

import pytest
from click.testing import CliRunner

from gnomon_app.cli import main
from gnomon_app.devcluster.cluster import DevCluster
from gnomon_app.devcluster.procs import how_it_ended
from meta.client import MetaClient
from testkit.wait import wait_until
from tests.compaction_node.support import (
    WAIT_S,
    check_rows,
    compacted,
    create_table,
    outcome,
    status,
    workspace,
    write,
)

pytestmark = pytest.mark.cluster

#: Leases of every node: a stopped compaction node stays live (by lease) this long, and meta
#: stops picking it after half of it.
LEASE_S = 20
TIMEOUT_S = 20
#: Answer holds: node 0 answers after the data node gave up, node 1 before.
HOLDS = {0: 40.0, 1: 4.0}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    with DevCluster(
        tmp_path_factory.mktemp("offload"),
        nodes=1,
        shards=2,
        lease_ttl_s=LEASE_S,
        node_flags=("--compaction-mode=offload", f"--compaction-timeout-s={TIMEOUT_S}"),
    ) as running:
        yield running


def _start(cluster: DevCluster, index: int) -> None:
    env = {"GNOMON_HOLD_ANSWER_S": str(HOLDS[index])}
    if index < len(cluster.compaction_endpoints):
        cluster.start_compaction_node(index, env)
    else:
        assert cluster.add_compaction_node(env) == index
    name = cluster.compaction_endpoints[index].grpc
    with MetaClient(cluster.meta) as client:
        wait_until(
            f"{name} registered",
            lambda: any(n.name == name for n in client.nodes()),
            timeout_s=WAIT_S,
        )


def _figure(cluster: DevCluster, index: int, figure: str) -> float:
    name = cluster.compaction_endpoints[index].grpc
    with MetaClient(cluster.meta) as client:
        node = next(n for n in client.nodes() if n.name == name)
    return float(node.figures.get(figure, -1.0))


@pytest.mark.long
def test_tasks_go_to_the_less_loaded_node_and_a_late_answer_is_discarded(
    cluster: DevCluster,
) -> None:
    _start(cluster, 0)
    slow = cluster.compaction_endpoints[0].grpc
    t1 = create_table(cluster, "t1")
    write(cluster, "t1")
    wait_until("t1's merge on node 0", lambda: status(slow).running == 1, timeout_s=WAIT_S)

    _start(cluster, 1)
    fast = cluster.compaction_endpoints[1].grpc
    # Meta knows node 0 is busy from its heartbeat, not from having sent it the task.
    wait_until(
        "node 0's heartbeat reporting the task",
        lambda: _figure(cluster, 0, "running") == 1,
        timeout_s=WAIT_S,
    )
    create_table(cluster, "t2")
    write(cluster, "t2")
    wait_until("t2 compacted", lambda: compacted(cluster, "t2"), timeout_s=WAIT_S)
    assert status(fast).tasks_done == 1
    assert status(slow).tasks_done == 0
    check_rows(cluster, "t2")

    # t1's node answers after the data node's timeout: t1 was merged locally, the late
    # answer's files are deleted and nothing is left in t1's workspace.
    wait_until("t1 compacted by the fallback", lambda: compacted(cluster, "t1"), timeout_s=WAIT_S)
    assert outcome(cluster, "fallback_timeout") == 1
    check_rows(cluster, "t1")
    wait_until(
        "node 0 discarding its late answer",
        lambda: status(slow).tasks_discarded == 1,
        timeout_s=WAIT_S,
    )
    assert workspace(cluster, t1) == []
    assert outcome(cluster, "offloaded") == 1


def test_a_compaction_node_killed_mid_task(cluster: DevCluster) -> None:
    t3 = create_table(cluster, "t3")
    write(cluster, "t3")
    nodes = [ep.grpc for ep in cluster.compaction_endpoints]
    busy: list[int] = []

    def running() -> bool:
        busy[:] = [i for i, n in enumerate(nodes) if status(n).running]
        return bool(busy)

    wait_until("t3's merge on a compaction node", running, timeout_s=WAIT_S)
    # Its outputs are written (a node holds the answer, not the merge): the kill leaves them
    # in the workspace for the data node to collect.
    wait_until(
        "t3's outputs in its workspace", lambda: bool(workspace(cluster, t3)), timeout_s=WAIT_S
    )
    cluster.signal_compaction_node(busy[0], signal.SIGKILL)
    wait_until("t3 compacted after the kill", lambda: compacted(cluster, "t3"), timeout_s=WAIT_S)
    check_rows(cluster, "t3")
    assert outcome(cluster, "fallback_node_unavailable") == 1
    assert workspace(cluster, t3) == []
    _start(cluster, busy[0])


def test_admin_lists_compaction_nodes_and_their_tasks(cluster: DevCluster) -> None:
    t5 = create_table(cluster, "t5")
    write(cluster, "t5")
    nodes = [ep.grpc for ep in cluster.compaction_endpoints]
    wait_until(
        "t5's merge on a node", lambda: any(status(n).running for n in nodes), timeout_s=WAIT_S
    )
    listed = CliRunner().invoke(
        main, ["admin", "compaction-nodes", "--meta", cluster.meta], terminal_width=250
    )
    assert listed.exit_code == 0, listed.output
    for n in nodes:
        assert n in listed.output
    task_rows = [line for line in listed.output.splitlines() if "│ running │" in line]
    assert len(task_rows) == 1 and f" {t5} " in task_rows[0], listed.output
    wait_until("t5 compacted", lambda: compacted(cluster, "t5"), timeout_s=WAIT_S)
    check_rows(cluster, "t5")


def test_a_node_whose_heartbeat_broke_is_never_picked(cluster: DevCluster) -> None:
    stopped, other = (ep.grpc for ep in cluster.compaction_endpoints)
    with MetaClient(cluster.meta) as client:

        def age() -> float:
            return next(n.heartbeat_age_s for n in client.nodes() if n.name == stopped)

        cluster.signal_compaction_node(0, signal.SIGSTOP)
        try:
            wait_until("a broken heartbeat", lambda: age() > LEASE_S / 2, timeout_s=WAIT_S)
            picks = [client.pick_compaction_node() for _ in range(6)]
            # Its lease still runs: liveness alone would still offer it.
            assert next(n.live for n in client.nodes() if n.name == stopped)
        finally:
            cluster.signal_compaction_node(0, signal.SIGCONT)
        assert picks == [other] * 6
        wait_until("its heartbeat back", lambda: 0 <= age() < LEASE_S / 2, timeout_s=WAIT_S)
        assert stopped in {client.pick_compaction_node() for _ in range(4)}


def test_with_meta_down_compaction_is_local(cluster: DevCluster) -> None:
    create_table(cluster, "t4")
    cluster.kill_meta(0)
    try:
        # The data node's lease outlasts these writes; its pick finds no meta.
        write(cluster, "t4")
        wait_until("t4 compacted", lambda: compacted(cluster, "t4"), timeout_s=WAIT_S)
        assert outcome(cluster, "fallback_meta_unreachable") == 1
        check_rows(cluster, "t4")
    finally:
        cluster.start_meta(0)


def test_a_node_stops_on_sigterm_with_its_meta_service_away(cluster: DevCluster) -> None:
    """A pass or heartbeat retrying the meta service that is gone must not hold a node's
    stop until the dev cluster's grace ends and it kills the node (SIGKILL: its memtables
    unflushed). The cluster is whole again afterwards."""
    cluster.kill_meta(0)
    try:
        # The keeper's next pass (every 2 s) and heartbeat (every third of the lease) begin
        # retrying the meta service, for up to 20 s.
        time.sleep(2.5)
        node = cluster.processes[cluster.node_endpoints[0].name]
        node.stop()
        assert node.proc.returncode == 0, how_it_ended(node.proc.returncode)
    finally:
        cluster.start_meta(0)
        cluster.start_node(0)
        cluster.wait_ready()
