"""Every kind of procedure, with the meta process made to exit right after one of its steps
(the ``GNOMON_META_CRASH_AFTER`` seam): a restarted instance resumes the persisted procedure
and finishes it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import pytest

from meta.client import MetaClient
from meta.runner import CRASH_EXIT_CODE
from testkit.wait import wait_until

from .conftest import WAIT_S, Cluster, MetaProcess

pytestmark = pytest.mark.integration

#: Nodes that must outlive the meta restart get a lease longer than it takes, on a loaded
#: machine too. No wait here is counted from a survivor's lease.
SURVIVOR_TTL_S = 20


def settled(client: MetaClient) -> bool:
    return all(s.status == "ready" for s in client.shards())


def balanced(client: MetaClient, nodes: list[str]) -> bool:
    """Settled with the 4 shards led 2 and 2 by ``nodes``."""
    return settled(client) and Counter(s.leader for s in client.shards()) == dict.fromkeys(nodes, 2)


def restart(meta: MetaProcess) -> None:
    assert meta.exit_code() == CRASH_EXIT_CODE
    meta.start()


def crash_in_assign(cluster: Cluster, meta: MetaProcess, client: MetaClient) -> None:
    node = cluster.node(0)
    restart(meta)
    wait_until("assignment finished", lambda: settled(client), timeout_s=WAIT_S)
    assert {s.leader for s in client.shards()} == {node.name}


def crash_in_failover(cluster: Cluster, meta: MetaProcess, client: MetaClient) -> None:
    a, b = cluster.node(0), cluster.node(1, ttl_s=SURVIVOR_TTL_S)
    wait_until("assigned 2/2", lambda: balanced(client, [a.name, b.name]), timeout_s=WAIT_S)
    epochs = {s.id: s.epoch for s in client.shards() if s.leader == a.name}
    a.stop()
    restart(meta)
    wait_until(
        f"{a.name}'s shards failed over",
        lambda: settled(client) and a.name not in {s.leader for s in client.shards()},
        timeout_s=WAIT_S,
    )
    after = {s.id: s for s in client.shards()}
    assert {i: (after[i].leader, after[i].epoch) for i in epochs} == {
        i: (b.name, e + 1) for i, e in epochs.items()
    }


def crash_in_rebalance(cluster: Cluster, meta: MetaProcess, client: MetaClient) -> None:
    a = cluster.node(0, ttl_s=SURVIVOR_TTL_S)
    wait_until(
        "all on a", lambda: {s.leader for s in client.shards()} == {a.name}, timeout_s=WAIT_S
    )
    b = cluster.node(1, ttl_s=SURVIVOR_TTL_S)
    restart(meta)
    wait_until(
        "rebalanced 2/2",
        lambda: (
            settled(client) and Counter(s.leader for s in client.shards()) == {a.name: 2, b.name: 2}
        ),
        timeout_s=WAIT_S,
    )


def _admin(
    op: Callable[[Cluster, MetaClient], int], check: Callable[[MetaClient, int], bool]
) -> Callable[[Cluster, MetaProcess, MetaClient], None]:
    """``op`` crashed in and resumed; ``check`` is given the first shard's epoch before it
    (a node joining late has its shards moved to it by a rebalance: epoch 2 already)."""

    def run(cluster: Cluster, meta: MetaProcess, client: MetaClient) -> None:
        nodes = [cluster.node(i, ttl_s=SURVIVOR_TTL_S).name for i in range(2)]
        wait_until("assigned 2/2", lambda: balanced(client, nodes), timeout_s=WAIT_S)
        for i in range(4):
            client.create_table(f"t{i}")
        epoch = client.shards()[0].epoch
        proc_id = op(cluster, client)
        restart(meta)
        assert client.wait_procedure(proc_id, timeout_s=30).status == "done"
        assert settled(client) and check(client, epoch)

    return run


def _migrate(cluster: Cluster, client: MetaClient) -> int:
    shard = client.shards()[0]
    target = next(a.name for a in cluster.agents if a.name != shard.leader)
    return client.migrate(shard.id, target).id


def _switch_role(cluster: Cluster, client: MetaClient) -> int:
    shard = client.shards()[0]
    other = next(a.name for a in cluster.agents if a.name != shard.leader)
    assert client.wait_procedure(client.add_follower(shard.id, other).id).status == "done"
    return client.switch_role(shard.id, other).id


def _split(cluster: Cluster, client: MetaClient) -> int:
    shard = max(client.shards(), key=lambda s: s.tables)
    return client.split(shard.id).id


def _merge(cluster: Cluster, client: MetaClient) -> int:
    first, second = client.shards()[:2]
    return client.merge(first.id, second.id).id


CASES: dict[str, Callable[[Cluster, MetaProcess, MetaClient], None]] = {
    "assign:0": crash_in_assign,
    "failover:1": crash_in_failover,
    "rebalance:1": crash_in_rebalance,
    "migrate:1": _admin(_migrate, lambda c, epoch: c.shards()[0].epoch == epoch + 1),
    "switch_role:0": _admin(
        _switch_role,
        lambda c, epoch: c.shards()[0].epoch == epoch + 1 and len(c.shards()[0].followers) == 1,
    ),
    "split:1": _admin(
        _split, lambda c, _: len(c.shards()) == 5 and sum(s.tables for s in c.shards()) == 4
    ),
    "merge:1": _admin(
        _merge, lambda c, _: len(c.shards()) == 3 and sum(s.tables for s in c.shards()) == 4
    ),
}


@pytest.mark.parametrize("crash_after", list(CASES))
def test_procedure_resumes_after_a_crash(cluster: Cluster, crash_after: str) -> None:
    meta = cluster.meta(shards=4, crash_after=crash_after)
    client = cluster.client()
    CASES[crash_after](cluster, meta, client)
    assert meta.starts == 2
