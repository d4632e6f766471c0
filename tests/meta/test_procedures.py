"""Procedures and the leader's core on a SQLite store (fast, no etcd): each step commits with
the procedure's progress, stale plans are skipped, a fenced leader cannot write, and a new core
resumes what an earlier one left running."""

from __future__ import annotations

import threading
from collections.abc import Collection
from pathlib import Path

import pytest

from gnomon.errors import NotLeader, Unavailable
from gnomon.store.sqlite import SqliteStore
from meta.core import MetaCore, MetaSettings
from meta.model import NodeKind, ProcedureStatus, ShardStatus
from meta.planner import Move
from meta.store import ClusterStore

pytestmark = pytest.mark.unit


class MemoryLeases:
    """Liveness without etcd: leases never lapse unless a test says so."""

    def __init__(self) -> None:
        self.alive: dict[str, int] = {}
        self._next = 0

    def register(self, name: str, ttl_s: int) -> int:
        self._next += 1
        self.alive[name] = self._next
        return self._next

    def refresh(self, lease_id: int) -> bool:
        return lease_id in self.alive.values()

    def live(self) -> set[str]:
        return set(self.alive)


class RecordingNodes:
    """Data nodes that let go of what they are asked to, recording each request."""

    def __init__(self) -> None:
        self.released: list[tuple[str, int, int, list[int] | None]] = []

    def release(
        self, node: str, shard_id: int, epoch: int, table_ids: Collection[int] | None
    ) -> list[str]:
        self.released.append(
            (node, shard_id, epoch, None if table_ids is None else sorted(table_ids))
        )
        return []


def open_core(
    path: Path, leases: MemoryLeases, shards: int = 4, nodes: RecordingNodes | None = None
) -> MetaCore:
    store = ClusterStore(SqliteStore(str(path)))
    return MetaCore(store, leases, MetaSettings(shards=shards), nodes or RecordingNodes())


def test_rounds_assign_then_fail_over_with_epochs(tmp_path: Path) -> None:
    leases = MemoryLeases()
    core = open_core(tmp_path / "meta.db", leases)
    core.register_node("n1:1", NodeKind.DATA)
    core.register_node("n2:1", NodeKind.DATA)
    assert [p.reason for p in core.run_round().plans] == ["assign"]
    assert {s.leader for s, _, _ in core.shards()} == {"n1:1", "n2:1"}
    assert all(s.epoch == 1 and s.status is ShardStatus.READY for s, _, _ in core.shards())

    del leases.alive["n1:1"]
    assert [p.reason for p in core.run_round().plans] == ["failover"]
    shards = [s for s, _, _ in core.shards()]
    assert {s.leader for s in shards} == {"n2:1"}
    assert sorted(s.epoch for s in shards) == [1, 1, 2, 2]
    assert not next(n for n in core.nodes() if n.node.name == "n1:1").node.online


def test_a_stale_move_is_skipped(tmp_path: Path) -> None:
    leases = MemoryLeases()
    core = open_core(tmp_path / "meta.db", leases, shards=1)
    core.register_node("n1:1", NodeKind.DATA)
    core.register_node("n2:1", NodeKind.DATA)
    core.run_round()
    ((shard, _, _),) = core.shards()
    stale = Move(shard.id, shard.epoch - 1, "n2:1")
    proc = core.runner.start("migrate", {"moves": [stale.to_json()]})
    core.runner.run_all()
    done = core.runner.find(proc.id)
    assert done is not None and done.status is ProcedureStatus.DONE
    assert core.shards()[0][0] == shard


def test_a_new_leader_fences_the_old_one_and_resumes_its_procedures(tmp_path: Path) -> None:
    leases = MemoryLeases()
    old = open_core(tmp_path / "meta.db", leases)
    old.register_node("n1:1", NodeKind.DATA)
    old.run_round()
    old.create_table("t", b"s")
    proc = old.split(next(s.id for s, _, _ in old.shards() if s.leader))
    # The old leader persisted the procedure but never ran it; a new leader takes over.
    new = open_core(tmp_path / "meta.db", leases)
    assert new.term == old.term + 1
    with pytest.raises(NotLeader):
        old.create_table("u", b"s")
    new.runner.run_all()
    done = new.runner.find(proc.id)
    assert done is not None and done.status is ProcedureStatus.DONE
    assert len(new.shards()) == 5
    assert [t.name for t in new.tables()] == ["t"]


def test_a_migration_asks_the_live_leader_to_let_go_first(tmp_path: Path) -> None:
    leases, nodes = MemoryLeases(), RecordingNodes()
    core = open_core(tmp_path / "meta.db", leases, shards=1, nodes=nodes)
    core.register_node("n1:1", NodeKind.DATA)
    core.run_round()
    core.register_node("n2:1", NodeKind.DATA)
    ((shard, _, _),) = core.shards()
    core.migrate(shard.id, "n2:1")
    core.runner.run_all()
    assert nodes.released == [("n1:1", shard.id, shard.epoch, None)]
    ((moved, _, _),) = core.shards()
    assert (moved.leader, moved.epoch, moved.status) == ("n2:1", shard.epoch + 1, ShardStatus.READY)

    # A dead leader is not asked: the epoch fence keeps it out.
    del leases.alive["n2:1"]
    core.run_round()
    assert len(nodes.released) == 1
    assert core.shards()[0][0].leader == "n1:1"


class HangingNodes(RecordingNodes):
    """Data nodes whose release does not answer until the test lets it (a paused node)."""

    def __init__(self) -> None:
        super().__init__()
        self.answer = threading.Event()
        self.answered = False

    def release(
        self, node: str, shard_id: int, epoch: int, table_ids: Collection[int] | None
    ) -> list[str]:
        super().release(node, shard_id, epoch, table_ids)
        self.answer.wait(60)
        self.answered = True
        return []


def test_a_leader_whose_lease_lapses_while_it_lets_go_is_passed_over(tmp_path: Path) -> None:
    leases, nodes = MemoryLeases(), HangingNodes()
    core = open_core(tmp_path / "meta.db", leases, shards=1, nodes=nodes)
    core.register_node("n1:1", NodeKind.DATA)
    core.run_round()
    core.register_node("n2:1", NodeKind.DATA)
    ((shard, _, _),) = core.shards()
    core.migrate(shard.id, "n2:1")
    # The leader stops answering; its lease lapses in the lease store while it is asked
    # to let go (no round runs meanwhile to see it).
    lapse = threading.Timer(0.5, lambda: leases.alive.pop("n1:1"))
    lapse.start()
    try:
        core.runner.run_all()
        # Moved while the release still hangs: not held until it answers.
        assert not nodes.answered
        assert nodes.released == [("n1:1", shard.id, shard.epoch, None)]
        ((moved, _, _),) = core.shards()
        assert (moved.leader, moved.status) == ("n2:1", ShardStatus.READY)
    finally:
        nodes.answer.set()
        lapse.join()


def test_a_split_has_the_leader_let_go_of_the_moving_tables(tmp_path: Path) -> None:
    leases, nodes = MemoryLeases(), RecordingNodes()
    core = open_core(tmp_path / "meta.db", leases, shards=1, nodes=nodes)
    core.register_node("n1:1", NodeKind.DATA)
    core.run_round()
    ids = [core.create_table(name, b"s")[0].id for name in ("a", "b", "c", "d")]
    ((shard, _, _),) = core.shards()
    proc = core.split(shard.id)
    core.runner.run_all()
    done = core.runner.find(proc.id)
    assert done is not None and done.status is ProcedureStatus.DONE
    assert nodes.released == [("n1:1", shard.id, shard.epoch, ids[2:])]
    homes = {t.id: t.shard_id for t in core.tables()}
    assert {homes[i] for i in ids[:2]} == {shard.id}
    assert len({homes[i] for i in ids[2:]} - {shard.id}) == 1


class SilentNodes(RecordingNodes):
    def release(
        self, node: str, shard_id: int, epoch: int, table_ids: Collection[int] | None
    ) -> list[str]:
        raise Unavailable(f"node {node} cannot be reached")


def test_a_split_whose_leader_does_not_let_go_fails_and_moves_nothing(tmp_path: Path) -> None:
    leases = MemoryLeases()
    core = open_core(tmp_path / "meta.db", leases, shards=1, nodes=SilentNodes())
    core.register_node("n1:1", NodeKind.DATA)
    core.run_round()
    for name in ("a", "b"):
        core.create_table(name, b"s")
    ((shard, _, _),) = core.shards()
    proc = core.split(shard.id)
    core.runner.run_all()
    failed = core.runner.find(proc.id)
    assert failed is not None and failed.status is ProcedureStatus.FAILED
    assert "cannot be reached" in failed.error
    assert {t.shard_id for t in core.tables()} == {shard.id}
    assert all(s.status is not ShardStatus.BUSY for s, _, _ in core.shards())


def test_an_operators_migrate_holds_against_rebalancing(tmp_path: Path) -> None:
    leases = MemoryLeases()
    core = open_core(tmp_path / "meta.db", leases, shards=2)
    core.register_node("n1:1", NodeKind.DATA)
    core.register_node("n2:1", NodeKind.DATA)
    core.run_round()

    def placed() -> dict[int, tuple[str | None, bool]]:
        return {s.id: (s.leader, s.pinned) for s, _, _ in core.shards()}

    # The shard rebalancing would pick first to even the counts out again (the lowest id).
    shard, leader = min((i, leader) for i, (leader, _) in placed().items())
    target = "n2:1" if leader == "n1:1" else "n1:1"
    core.migrate(shard, target)
    core.runner.run_all()
    assert placed()[shard] == (target, True)
    # The next round evens the counts out with the other shard; the migrated one stays.
    assert [p.reason for p in core.run_round().plans] == ["rebalance"]
    assert placed() == {shard: (target, True), 1 - shard: (leader, False)}
    assert core.run_round().plans == ()
    # Persisted with the shard: the next leader of the meta service keeps it too.
    core = open_core(tmp_path / "meta.db", leases, shards=2)
    assert placed()[shard] == (target, True)
    # Losing its node ends the pin: the operator's choice is gone with it.
    del leases.alive[target]
    core.run_round()
    assert placed()[shard] == (leader, False)


def test_a_switch_of_roles_pins_the_shard_and_a_new_follower_does_not(tmp_path: Path) -> None:
    leases = MemoryLeases()
    core = open_core(tmp_path / "meta.db", leases, shards=1)
    core.register_node("n1:1", NodeKind.DATA)
    core.run_round()
    core.register_node("n2:1", NodeKind.DATA)
    ((shard, _, _),) = core.shards()
    core.add_follower(shard.id, "n2:1")
    core.runner.run_all()
    assert not core.shards()[0][0].pinned
    core.switch_role(shard.id, "n2:1")
    core.runner.run_all()
    ((switched, _, _),) = core.shards()
    assert (switched.leader, switched.followers, switched.pinned) == ("n2:1", ("n1:1",), True)
