"""A seeded random walk of shard moves and node faults under SDK writers (real etcd, broker,
S3 server, meta and ``gnomon node`` processes).

Two writers run throughout: the published HoraeDB SDK in Direct mode (each table's owner,
through routes it caches and that go stale with every move) and in Proxy mode (every request
through a query node, the stable front address a client may keep through data nodes'
faults), on APPEND and OVERWRITE tables and a partition table each. A driver picks each step
among split, merge, migrate (to a follower and to a node holding no copy),
add-follower, switch-role, SIGKILL of a data node (restarted after its failover), SIGSTOP past
its lease then SIGCONT, and a node joining. After each step every acknowledged row is read back
exactly once through the leaders and, once the followers have caught up, through the followers.

``GNOMON_CHAOS_STEPS`` sets the walk's length (a few steps in the suite; 300 for a long run,
with pytest's ``--timeout 0``: it takes longer than the suite's per-test limit) and
``GNOMON_CHAOS_SEED`` its seed; the figures are printed at the end.
"""

from __future__ import annotations

import os
import random
import signal
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import pytest

from gnomon.proto import meta_pb2 as pb
from gnomon_app.devcluster.cluster import DevCluster
from meta.client import MetaClient
from tests.cluster.test_failover import (
    LEASE_TTL_S,
    SETTLE_S,
    Writer,
    create_tables,
    stored_ids,
)

pytestmark = pytest.mark.cluster

STEPS = int(os.environ.get("GNOMON_CHAOS_STEPS", "6"))
SEED = int(os.environ.get("GNOMON_CHAOS_SEED", "41"))
#: Data nodes at most (joins stop there), and at least alive (kills and pauses wait).
MAX_NODES = 5
MIN_LIVE = 2


@dataclass
class Figures:
    steps: int = 0
    actions: Counter[str] = field(default_factory=Counter)
    #: Procedures the meta service ran to the end, and those it refused or failed (a shard
    #: busy with another, say).
    done: int = 0
    refused: list[str] = field(default_factory=list)
    #: Tables read back through a node following them (after each step, and at the end).
    follower_reads: int = 0
    acked: int = 0


def _following(cluster: DevCluster, client: MetaClient, table: str) -> set[int]:
    """The live nodes following a shard of ``table`` (of a sub-table, for a partition table):
    a node serves follower reads from its own copies only."""
    tables = client.tables()
    ids = {t.id for t in tables if t.name == table}
    shards = {
        t.shard_id
        for t in tables
        if t.HasField("shard_id") and (t.name == table or t.parent_id in ids)
    }
    live = {n.grpc for n in cluster.node_endpoints}
    return {
        cluster.node_index(f)
        for s in client.shards()
        if s.id in shards
        for f in s.followers
        if f in live
    }


def _check(cluster: DevCluster, client: MetaClient, acked: dict[str, list[int]], read: str) -> int:
    """Every id in ``acked`` stored exactly once, as read through the ``read`` copies (a
    follower a moment behind is waited for, bounded); follower reads go to a node following
    the table. Returns how many tables were read through a follower."""
    through_followers = 0
    for table, ids in acked.items():
        first = _following(cluster, client, table) if read == "follower" else set()
        through_followers += bool(first)
        deadline = time.monotonic() + SETTLE_S
        while True:
            stored = stored_ids(cluster, table, read=read, first=first)
            lost = [i for i in ids if stored[i] == 0]
            if not lost or read == "leader" or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        doubled = [i for i in ids if stored[i] > 1]
        assert not lost, f"{table} ({read}): {len(lost)} acknowledged ids lost, e.g. {lost[:10]}"
        assert not doubled, (
            f"{table} ({read}): ids stored twice, e.g. {doubled[:10]}; "
            f"{_twice_again(cluster, table, doubled[:10])}"
        )
    return through_followers


def _twice_again(cluster: DevCluster, table: str, doubled: list[int]) -> str:
    """Whether ids read twice are still read twice a moment later, through each node: a
    stored copy too many, or a read that saw one copy twice."""
    time.sleep(SETTLE_S / 4)
    seen = {}
    for i in range(len(cluster.node_endpoints)):
        try:
            stored = stored_ids(cluster, table, first=[i])
        except AssertionError as e:
            seen[i] = str(e)[:80]
            continue
        seen[i] = str([stored[d] for d in doubled])
    return f"read again through each node, their counts: {seen}"


class Driver:
    """Picks and runs one step at a time on ``cluster`` through ``client``."""

    def __init__(self, cluster: DevCluster, client: MetaClient, rng: random.Random) -> None:
        self.cluster, self.client, self.rng = cluster, client, rng
        self.figures = Figures()

    def step(self) -> str:
        shards = [s for s in self.client.shards() if s.status == "ready"]
        live = [n.grpc for n in self.cluster.node_endpoints]
        options: list[tuple[str, Callable[[], None]]] = []
        tables_of = Counter(t.shard_id for t in self.client.tables() if t.HasField("shard_id"))
        for s in shards:
            if tables_of[s.id] >= 2:
                options.append(("split", partial(self._split, s.id)))
            if s.followers:
                f = self.rng.choice(list(s.followers))
                options.append(("migrate-to-follower", partial(self._migrate, s.id, f)))
                options.append(("switch-role", partial(self._switch_role, s.id, f)))
            others = [n for n in live if n != s.leader and n not in s.followers]
            if others:
                o = self.rng.choice(others)
                options.append(("migrate-elsewhere", partial(self._migrate, s.id, o)))
                options.append(("add-follower", partial(self._add_follower, s.id, o)))
        if len(shards) > 2:
            a, b = self.rng.sample(shards, 2)
            options.append(("merge", partial(self._merge, a.id, b.id)))
        if len(live) > MIN_LIVE:
            options.append(("kill", self._kill))
            options.append(("pause", self._pause))
        if len(live) < MAX_NODES:
            options.append(("join", self._join))
        name, act = self.rng.choice(options)
        act()
        self.cluster.wait_settled(timeout_s=SETTLE_S)
        self.figures.steps += 1
        self.figures.actions[name] += 1
        return name

    def _procedure(self, proc: pb.ProcedureInfo) -> None:
        info = self.client.wait_procedure(proc.id, timeout_s=SETTLE_S)
        if info.status == "done":
            self.figures.done += 1
        else:
            self.figures.refused.append(f"{info.kind}: {info.status} {info.error}")

    def _split(self, shard_id: int) -> None:
        self._procedure(self.client.split(shard_id))

    def _merge(self, shard_id: int, other_id: int) -> None:
        self._procedure(self.client.merge(shard_id, other_id))

    def _migrate(self, shard_id: int, target: str) -> None:
        self._procedure(self.client.migrate(shard_id, target))

    def _switch_role(self, shard_id: int, follower: str) -> None:
        self._procedure(self.client.switch_role(shard_id, follower))

    def _add_follower(self, shard_id: int, node: str) -> None:
        self._procedure(self.client.add_follower(shard_id, node))

    def _victim(self) -> int:
        """A node leading some shard, so that the fault interrupts acknowledged work."""
        leaders = sorted({s.leader for s in self.client.shards() if s.leader})
        return self.cluster.node_index(self.rng.choice(leaders))

    def _kill(self) -> None:
        victim = self._victim()
        self.cluster.kill_node(victim, signal.SIGKILL)
        self.cluster.wait_settled(
            without={self.cluster.node_endpoints[victim].grpc}, timeout_s=SETTLE_S
        )
        self.cluster.start_node(victim)

    def _pause(self) -> None:
        victim = self._victim()
        self.cluster.pause_node(victim)
        try:
            self.cluster.wait_settled(
                without={self.cluster.node_endpoints[victim].grpc}, timeout_s=SETTLE_S
            )
        finally:
            self.cluster.resume_node(victim)

    def _join(self) -> None:
        self.cluster.add_node()


@pytest.mark.long
def test_random_moves_and_faults_lose_and_double_no_acknowledged_row(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    with DevCluster(
        tmp_path / "cluster",
        nodes=3,
        shards=4,
        followers=1,
        lease_ttl_s=LEASE_TTL_S,
        query_nodes=1,
    ) as cluster:
        create_tables(cluster, ["ch_a0", "ch_a1"])
        create_tables(cluster, ["ch_o0", "ch_o1"], mode="OVERWRITE")
        create_tables(cluster, ["ch_p0", "ch_p1"], partitions=3)
        (tmp_path / "direct").mkdir()
        (tmp_path / "proxy").mkdir()
        writers = [
            Writer(cluster, ["ch_a0", "ch_o0", "ch_p0"], tmp_path / "direct", batch=10),
            Writer(
                cluster,
                ["ch_a1", "ch_o1", "ch_p1"],
                tmp_path / "proxy",
                batch=10,
                mode="Proxy",
                # The stable front address: a query node, which no data node's fault takes.
                endpoints=[cluster.query_endpoints[0].grpc],
            ),
        ]
        with MetaClient(cluster.meta) as client:
            driver = Driver(cluster, client, rng)
            try:
                for w in writers:
                    w.wait_progress(2)
                for k in range(STEPS):
                    print(f"step {k}: {driver.step()}", flush=True)
                    for w in writers:
                        w.wait_progress(1)
                    acked = {t: ids for w in writers for t, ids in w.snapshot().items()}
                    _check(cluster, client, acked, "leader")
                    driver.figures.follower_reads += _check(cluster, client, acked, "follower")
            finally:
                for w in writers:
                    w.stop()
            acked = {t: ids for w in writers for t, ids in w.snapshot().items()}
            figures = driver.figures
            _check(cluster, client, acked, "leader")
            figures.follower_reads += _check(cluster, client, acked, "follower")
        figures.acked = sum(len(ids) for ids in acked.values())
        print(
            f"\nseed {SEED}: {figures.steps} steps {dict(figures.actions)}, "
            f"{figures.acked} rows acknowledged, none lost or stored twice (leader and "
            f"follower reads; {figures.follower_reads} tables read through a follower), "
            f"{sum(len(w.errors) for w in writers)} writes refused, {figures.done} procedures "
            f"done, {len(figures.refused)} refused {figures.refused[:3]}"
        )
        # A walk whose moves were mostly refused would have tested little.
        assert figures.done >= len(figures.refused), figures.refused
        assert figures.follower_reads > 0
