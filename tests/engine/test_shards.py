"""Shards on an engine: each a WAL region with its own tables, opened and closed on demand,
fenced by epoch so a deposed owner can neither commit nor acknowledge.

Two engines here share what a cluster shares (catalog and manifests, SSTs, the WAL regions)
and stand for two nodes; a real cluster puts the WAL on Kafka and the SSTs on S3."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from gnomon.errors import Closed, Conflict, Fenced, NotFound, NotOwner, Unavailable
from gnomon.store.sqlite import SqliteStore
from gnomon.wal.api import Ticket
from gnomon_app.devcluster.brokers import Broker, running_tansu
from node.engine.config import EngineConfig
from node.engine.engine import Engine
from node.engine.fences import ShardFences
from node.engine.options import TableOptions, UpdateMode
from node.engine.placement import Placed
from node.wal.disk import DiskWal
from objectstore.local import LocalObjectStore
from wal_kafka import KafkaWal

from .conftest import CPU, cpu_batch, shared_node

pytestmark = pytest.mark.integration


def _ids(engine: Engine, table: str, *, follower: bool = False) -> list[float]:
    got = engine.read_all(table, columns=["usage"], follower=follower)
    return sorted(got.column("usage").to_pylist())


def test_tables_live_in_their_shards_region(nodes: tuple[Engine, Engine]) -> None:
    a, _ = nodes
    a.open_shard(1, epoch=1)
    a.open_shard(2, epoch=1)
    a.create_table("one", CPU, shard_id=1, table_id=101)
    a.create_table("two", CPU, shard_id=2, table_id=102)
    a.write("one", cpu_batch(["h"], [1], [1.0]))
    a.write("two", cpu_batch(["h"], [1], [2.0]))
    assert a.shards() == {1: 1, 2: 1}
    assert (a.shard_of("one"), a.shard_of("two")) == (1, 2)
    assert a.describe("one").table_id == 101
    with pytest.raises(NotOwner, match="shard 3 is not open"):
        a.create_table("three", CPU, shard_id=3)


def test_a_closed_shard_refuses_writes_and_reopens_elsewhere(
    nodes: tuple[Engine, Engine],
) -> None:
    a, b = nodes
    a.open_shard(1, epoch=1)
    a.create_table("cpu", CPU, shard_id=1, table_id=7)
    a.write("cpu", cpu_batch(["h", "i"], [1, 2], [1.0, 2.0]))
    table = a.table("cpu")
    assert a.close_shard(1)
    assert not a.close_shard(1)
    with pytest.raises((NotOwner, Closed)):
        table.write(cpu_batch(["h"], [3], [3.0]))
    with pytest.raises(NotFound):
        a.write("cpu", cpu_batch(["h"], [3], [3.0]))
    assert b.open_shard(1, epoch=2, table_ids=[7]) == ["cpu"]
    assert _ids(b, "cpu") == [1.0, 2.0]
    b.write("cpu", cpu_batch(["h"], [3], [3.0]))
    assert _ids(b, "cpu") == [1.0, 2.0, 3.0]


def test_a_deposed_owner_cannot_commit_and_replays_nothing_twice(tmp_path: Path) -> None:
    """A loses shard 1 without knowing (a pause): B opens it at a later epoch and replays the
    WAL region from a real Kafka-protocol broker; A's flush must fail at the manifest, and B
    keeps exactly one copy."""
    with _kafka_nodes(tmp_path) as nodes:
        _deposed(nodes.a, nodes.b)


def _deposed(a: Engine, b: Engine) -> None:
    a.open_shard(1, epoch=1)
    a.create_table("cpu", CPU, shard_id=1, table_id=7)
    a.write("cpu", cpu_batch(["h"], [1], [1.0]))
    b.open_shard(1, epoch=2, table_ids=[7])
    with pytest.raises(Fenced, match="epoch 2"):
        a.flush("cpu")
    b.flush("cpu")
    assert _ids(b, "cpu") == [1.0]
    with pytest.raises(Fenced, match="held at epoch 2"):
        a.close_shard(1) and a.open_shard(1, epoch=1)


def test_a_lapsed_lease_stops_acknowledgements(nodes: tuple[Engine, Engine]) -> None:
    a, _ = nodes
    lease = [True]
    a.open_shard(1, epoch=1, lease=lambda: lease[0])
    a.create_table("cpu", CPU, shard_id=1, table_id=7)
    assert a.write("cpu", cpu_batch(["h"], [1], [1.0])) == 1
    lease[0] = False
    with pytest.raises(Fenced, match="lease"):
        a.write("cpu", cpu_batch(["h"], [2], [2.0]))
    lease[0] = True
    assert a.write("cpu", cpu_batch(["h"], [3], [3.0])) == 1


def test_a_lapsed_lease_sends_leader_reads_elsewhere(nodes: tuple[Engine, Engine]) -> None:
    """Its shard may have a new leader that acknowledged writes this copy lacks: a read
    answered from it would miss them. Follower reads, a moment behind by contract, go on."""
    a, _ = nodes
    lease = [True]
    a.open_shard(1, epoch=1, lease=lambda: lease[0])
    a.create_table("cpu", CPU, shard_id=1, table_id=7)
    a.write("cpu", cpu_batch(["h"], [1], [1.0]))
    lease[0] = False
    with pytest.raises(NotOwner, match="lease"):
        a.read_all("cpu")
    assert _ids(a, "cpu", follower=True) == [1.0]
    lease[0] = True
    assert _ids(a, "cpu") == [1.0]


def test_reopening_needs_the_same_epoch_or_a_close(nodes: tuple[Engine, Engine]) -> None:
    a, _ = nodes
    a.open_shard(1, epoch=3)
    assert a.open_shard(1, epoch=3) == []
    a.catalog.create("late", CPU, TableOptions(), table_id=40)
    a.manifest.create_table(40)
    assert a.open_shard(1, epoch=3, table_ids=[40]) == ["late"]
    assert a.open_shard(1, epoch=3, table_ids=[40]) == []
    assert a.shard_of("late") == 1
    with pytest.raises(Conflict, match="close it"):
        a.open_shard(1, epoch=4)


def test_a_shard_open_already_is_logged_as_opened_once(
    nodes: tuple[Engine, Engine], caplog: pytest.LogCaptureFixture
) -> None:
    a, _ = nodes
    with caplog.at_level(logging.INFO, logger="gnomon.engine"):
        for _ in range(3):  # as the keeper's passes do
            a.open_shard(1, epoch=3)
        a.catalog.create("late", CPU, TableOptions(), table_id=40)
        a.manifest.create_table(40)
        a.open_shard(1, epoch=3, table_ids=[40])
        a.open_shard(1, epoch=3, table_ids=[40])
    messages = [r.getMessage() for r in caplog.records if r.name == "gnomon.engine"]
    assert messages.count("opened shard") == 1
    assert messages.count("opened tables in shard") == 1


class _StaleRoutes:
    """A placer whose cache still places table 7 in shard 1, which it left for shard 2 on
    another node; asked afresh, it knows better."""

    def __init__(self) -> None:
        self.fresh = 0

    def place(self, name: str, schema: object, options: object) -> Placed:
        raise AssertionError("nothing is created here")

    def unplace(self, name: str) -> None:
        return None

    def locate(self, name: str, *, fresh: bool = False) -> Placed | None:
        if name != "cpu":
            return None
        self.fresh += fresh
        return Placed(2, 7, "node-b") if fresh else Placed(1, 7, "node-a")


def test_a_stale_route_to_a_shard_open_here_never_opens_the_table_in_it(
    tmp_path: Path,
) -> None:
    placer = _StaleRoutes()
    data_dir = tmp_path / "a"
    os.makedirs(data_dir)
    a = Engine(
        EngineConfig(data_dir=str(data_dir), compaction_threads=0, gc_interval_s=0),
        meta=SqliteStore(str(tmp_path / "catalog.db")),
        wal=DiskWal(str(tmp_path / "wal")),
        store=LocalObjectStore(str(tmp_path / "sst")),
        placer=placer,
    )
    try:
        a.open_shard(1, epoch=1)
        a.catalog.create("cpu", CPU, TableOptions(), table_id=7)
        a.manifest.create_table(7)
        with pytest.raises(NotOwner, match="shard 2, served by node-b") as moved:
            a.write("cpu", cpu_batch(["h"], [1], [1.0]))
        assert moved.value.owner == "node-b"
        assert placer.fresh == 1
        assert a.list_tables() == []
    finally:
        a.close()


def test_fences_only_rise(tmp_path: Path) -> None:
    fences = ShardFences(SqliteStore(str(tmp_path / "f.db")))
    fences.take(5, 2)
    fences.take(5, 2)
    fences.take(5, 9)
    assert fences.held(5) == 9
    with pytest.raises(Fenced):
        fences.take(5, 8)
    assert fences.held(5) == 9


class _HeldWal(DiskWal):
    """A disk WAL whose next append, once armed, logs its record and then waits for a go."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.armed = False
        self.logged = threading.Event()
        self.go = threading.Event()

    def append(self, region_id: int, table_id: int, payload: bytes) -> Ticket:
        ticket = super().append(region_id, table_id, payload)
        if self.armed:
            self.armed = False
            self.logged.set()
            self.go.wait(timeout=30)
        return ticket


def test_a_shard_lost_while_a_write_is_logged_fails_it_as_unknown_not_as_not_owner(
    tmp_path: Path,
) -> None:
    """The write's record is in the log when the shard goes, so the next owner replays it:
    the write is refused (never acknowledged by a node that lost the shard), but not with
    NotOwner, which tells servers that nothing was written and the owner can take the write
    instead (it would then be stored twice)."""
    wal = _HeldWal(str(tmp_path / "wal"))
    a, b = shared_node(tmp_path, "a", wal), shared_node(tmp_path, "b")
    try:
        a.open_shard(1, epoch=1)
        a.create_table("cpu", CPU, shard_id=1, table_id=7)
        errors: list[BaseException] = []

        def write() -> None:
            try:
                a.write("cpu", cpu_batch(["h"], [1], [1.0]))
            except BaseException as e:
                errors.append(e)

        wal.armed = True
        writer = threading.Thread(target=write)
        writer.start()
        assert wal.logged.wait(timeout=30)
        a.table("cpu").guard.close()  # what close_shard does first
        wal.go.set()
        writer.join(timeout=30)
        assert len(errors) == 1
        assert isinstance(errors[0], Unavailable)
        assert not isinstance(errors[0], NotOwner)
        assert "may or may not" in str(errors[0])
        a.close_shard(1)
        assert b.open_shard(1, epoch=2, table_ids=[7]) == ["cpu"]
        assert _ids(b, "cpu") == [1.0]
    finally:
        a.close()
        b.close()


class _FencedSyncWal(DiskWal):
    """A disk WAL whose next sync, once armed, answers that a newer owner fenced the region
    (its record appended, and applied by the table, already)."""

    armed = False

    def sync_to(self, region_id: int, ticket: Ticket) -> int:
        if self.armed:
            self.armed = False
            raise Fenced("a newer owner opened the region", shard_id=region_id)
        return super().sync_to(region_id, ticket)


def test_a_write_whose_sync_is_fenced_fails_as_unknown_not_as_not_owner(
    tmp_path: Path,
) -> None:
    """The WAL answered "fenced" after the record was appended and the memtable took it: the
    rows may be in the log and are in the memtable, which the next flush commits. Answered
    NotOwner, servers would write them again at the new owner (the chaos test found rows
    stored twice so); answered unknown, nobody writes them again."""
    wal = _FencedSyncWal(str(tmp_path / "wal"))
    a = shared_node(tmp_path, "a", wal)
    try:
        a.open_shard(1, epoch=1)
        a.create_table("cpu", CPU, shard_id=1, table_id=7)
        wal.armed = True
        with pytest.raises(Unavailable, match="may or may not") as failed:
            a.write("cpu", cpu_batch(["h"], [1], [1.0]))
        assert not isinstance(failed.value, NotOwner)
        a.flush("cpu")
        assert _ids(a, "cpu") == [1.0]
    finally:
        a.close()


def test_a_deposed_owner_closing_its_shard_cannot_commit_its_flush(tmp_path: Path) -> None:
    """The flush on close runs after the shard's tables left the engine's registry; the
    epoch fence must still hold it: B, which opened the shard since and replayed the row
    (a shared log in a cluster; each its own here), would otherwise read it twice, from its
    memtable and from A's late SST."""
    a = shared_node(tmp_path, "a")
    b = shared_node(tmp_path, "b", DiskWal(str(tmp_path / "wal-b")))
    try:
        a.open_shard(1, epoch=1)
        a.create_table("cpu", CPU, shard_id=1, table_id=7)
        a.write("cpu", cpu_batch(["h"], [1], [1.0]))
        b.open_shard(1, epoch=2, table_ids=[7])
        assert a.close_shard(1)
        assert b.manifest.current(7).files == ()
    finally:
        a.close()
        b.close()


def test_a_closed_tables_late_flush_cannot_commit_after_its_shard_reopens_here(
    tmp_path: Path,
) -> None:
    """A's flush on close was fenced (B held the shard), so its memtable stays queued for
    the background flusher's retries; A later gets the shard back at a newer epoch and
    replays those rows into a new instance of the table. The old instance's retry must not
    commit with the new epoch's fence: the rows would be stored twice."""
    a = shared_node(tmp_path, "a")
    b = shared_node(tmp_path, "b", DiskWal(str(tmp_path / "wal-b")))
    try:
        a.open_shard(1, epoch=1)
        a.create_table("cpu", CPU, shard_id=1, table_id=7)
        a.write("cpu", cpu_batch(["h"], [1], [1.0]))
        old = a.table("cpu")
        b.open_shard(1, epoch=2, table_ids=[7])
        assert a.close_shard(1)
        assert old.pending_flushes() == 1
        assert b.close_shard(1)
        assert a.open_shard(1, epoch=3, table_ids=[7]) == ["cpu"]
        assert not old.flush_next()
        assert a.manifest.current(7).files == ()
    finally:
        a.close()
        b.close()


def test_a_follower_reading_behind_a_flush_applies_no_row_twice(tmp_path: Path) -> None:
    """A follower copy that took the leader's manifest after a flush, then reads records the
    flush holds (it reads the log behind the leader), keeps each row once: in the SSTs."""
    with _kafka_nodes(tmp_path) as nodes:
        a, b = nodes.a, nodes.b
        a.open_shard(1, epoch=1)
        append = TableOptions(update_mode=UpdateMode.APPEND)
        a.create_table("cpu", CPU, append, shard_id=1, table_id=7)
        a.write("cpu", cpu_batch(["h", "i"], [1, 2], [1.0, 2.0]))
        b.follow_shard(1, table_ids=[7], leader="a")
        _caught_up(b, 1)
        copy = b.follower_table("cpu")
        records = list(nodes.a_wal.read(1, 7, 1))
        assert records
        a.flush("cpu")
        copy.catch_up()
        for record in records:  # as a follower behind the flush reads them
            copy.follow(record.seq, record.payload)
        rows = b.read_all("cpu", columns=["usage"], follower=True)
        assert sorted(rows.column("usage").to_pylist()) == [1.0, 2.0]


def test_a_follower_copy_serves_reads_only_once_caught_up(tmp_path: Path) -> None:
    """A copy that has not read its leader's log to the end would answer as if acknowledged
    rows did not exist: reads go to the leader until it has, and its lag counts the time."""
    with _kafka_nodes(tmp_path) as nodes:
        a, b, broker = nodes.a, nodes.b, nodes.broker
        a.open_shard(1, epoch=1)
        a.create_table("cpu", CPU, shard_id=1, table_id=7)
        a.write("cpu", cpu_batch(["h"], [1], [1.0]))
        broker.server.kill(signal.SIGSTOP)
        try:
            b.follow_shard(1, table_ids=[7], leader="a")
            with pytest.raises(NotOwner, match="not caught up") as behind:
                b.follower_table("cpu")
            assert behind.value.owner == "a"
            followed = b.followed()[1]
            deadline = time.monotonic() + 5
            while followed.lag()[1] < 0.2 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert followed.lag()[1] >= 0.2
        finally:
            broker.server.kill(signal.SIGCONT)
        _caught_up(b, 1)
        copy = b.follower_table("cpu")
        assert copy.name == "cpu"
        assert b.read_all("cpu", columns=["usage"], follower=True).num_rows == 1


def _caught_up(engine: Engine, shard_id: int, timeout_s: float = 30.0) -> None:
    """Until the copies of ``shard_id`` followed by ``engine`` have read the log to its end."""
    deadline = time.monotonic() + timeout_s
    while not engine.followed()[shard_id].ready:
        assert time.monotonic() < deadline, f"shard {shard_id} not caught up in {timeout_s}s"
        time.sleep(0.05)


@dataclass(frozen=True)
class _KafkaNodes:
    broker: Broker
    a: Engine
    b: Engine
    #: The WAL of ``a``: what it logged, read back.
    a_wal: KafkaWal


@contextlib.contextmanager
def _kafka_nodes(tmp_path: Path) -> Iterator[_KafkaNodes]:
    """Two engines sharing a real Kafka-protocol broker's WAL regions (and the rest)."""
    with running_tansu(tmp_path) as broker, contextlib.ExitStack() as stack:
        namespace = f"ns{uuid.uuid4().hex[:6]}"
        wals = [KafkaWal(broker.bootstrap, namespace=namespace) for _ in range(2)]
        a, b = (
            stack.enter_context(contextlib.closing(shared_node(tmp_path, n, wal)))
            for n, wal in zip(("a", "b"), wals, strict=True)
        )
        yield _KafkaNodes(broker, a, b, wals[0])
