"""Procedures and the leader's core on a SQLite store (fast, no etcd): each step commits with
the procedure's progress, stale plans are skipped, a fenced leader cannot write, and a new core
resumes what an earlier one left running."""

from __future__ import annotations

from pathlib import Path

import pytest

from gnomon.errors import NotLeader
from gnomon.store.sqlite import SqliteStore
from meta.core import MetaCore, MetaSettings
from meta.model import NodeKind, ProcedureStatus, ShardStatus
from meta.planner import Move
from meta.store import ClusterStore


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


def open_core(path: Path, leases: MemoryLeases, shards: int = 4) -> MetaCore:
    store = ClusterStore(SqliteStore(str(path)))
    return MetaCore(store, leases, MetaSettings(shards=shards))


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
