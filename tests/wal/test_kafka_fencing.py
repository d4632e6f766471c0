"""Fencing of Kafka WAL regions by epoch, against a real broker (tansu, as in test_kafka.py).

Each KafkaWal stands for one node. A shard's owner is deposed when the meta service opens the
shard elsewhere at a later epoch; the deposed owner may still append (it was paused, its lease
check comes later), and those records must never be replayed.
"""

from __future__ import annotations

import itertools
import logging
import struct
import uuid
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gnomon.errors import Conflict, Corrupted, Fenced, Unavailable
from gnomon.store.sqlite import SqliteStore
from gnomon.wal.api import WalRecord
from gnomon_app.devcluster.brokers import Broker, running_tansu
from node.engine.config import EngineConfig
from node.engine.engine import Engine
from objectstore.local import LocalObjectStore
from wal_kafka import KafkaWal
from wal_kafka.frame import Fence, decode, decode_record, encode_group, encode_marker
from wal_kafka.meta import RegionMeta

from .contract import REGION, payload, seqs

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    with running_tansu(tmp_path_factory.mktemp("tansu")) as running:
        yield running


@pytest.fixture
def nodes(broker: Broker) -> Iterator[Callable[..., KafkaWal]]:
    """Makes KafkaWals ("nodes") sharing one fresh namespace; closes them all at the end."""
    namespace = f"f{uuid.uuid4().hex[:16]}"
    made: list[KafkaWal] = []

    def make(**options: Any) -> KafkaWal:
        options.setdefault("timeout_s", 10.0)
        options.setdefault("clean_interval_s", 3600)
        wal = KafkaWal(broker.bootstrap, namespace=namespace, **options)
        made.append(wal)
        return wal

    yield make
    for wal in made:
        wal.close()


def records(wal: KafkaWal, table_id: int) -> list[WalRecord]:
    return list(wal.read(REGION, table_id, 1))


# -- formats ----------------------------------------------------------------------------------


def test_records_carry_their_epoch_and_markers_have_no_entries() -> None:
    group = encode_group([(1, 1, b"a"), (2, 5, b"bc")], 4096, epoch=7)
    record = decode(group.records[0], "here")
    assert (record.epoch, record.marker) == (7, False)
    assert [(f.table_id, f.seq, bytes(f.data)) for f in record.fragments] == [
        (1, 1, b"a"),
        (2, 5, b"bc"),
    ]
    marker = decode(encode_marker(9), "here")
    assert (marker.epoch, marker.marker, marker.fragments) == (9, True, [])
    flipped = encode_marker(9)
    with pytest.raises(Corrupted, match="crc"):
        decode(flipped[:-1] + bytes([flipped[-1] ^ 1]), "here")


def test_version_1_records_read_as_epoch_0() -> None:
    body = struct.pack("<QQQQI", 3, 4, 2, 0, 2) + b"xy"
    head = struct.pack("<I", 1)
    old = struct.pack("<BI", 1, zlib.crc32(body, zlib.crc32(head))) + head + body
    record = decode(old, "here")
    assert (record.epoch, record.marker) == (0, False)
    assert [(f.table_id, f.seq, bytes(f.data)) for f in decode_record(old, "here")] == [
        (3, 4, b"xy")
    ]


def test_fence_rule() -> None:
    fence = Fence()
    log = [
        decode(encode_group([(1, 1, b"a")], 4096, epoch=1).records[0], "a1"),
        decode(encode_marker(2), "m2"),
        decode(encode_group([(1, 2, b"late")], 4096, epoch=1).records[0], "late"),
        decode(encode_group([(1, 2, b"b")], 4096, epoch=2).records[0], "b2"),
        decode(encode_marker(1), "old marker"),  # never lowers the fence
        decode(encode_group([(1, 3, b"later")], 4096, epoch=1).records[0], "later"),
    ]
    assert [fence.admit(record) for record in log] == [True, False, False, True, False, False]
    assert (fence.epoch, fence.stale) == (2, 2)


def test_snapshot_keeps_its_fences_and_old_snapshots_still_read() -> None:
    meta = RegionMeta(4, end=100)
    meta.table(1).apply(1, 10, 10, 1)
    assert meta.raise_fence(5, 2) and meta.raise_fence(40, 3)
    assert not meta.raise_fence(60, 3)
    back = RegionMeta.decode(meta.encode(1 << 20), 4, "here")
    assert back == meta and back.epoch == 3
    assert [back.fence_at(o) for o in (0, 5, 6, 40, 41, 99)] == [0, 0, 2, 2, 3, 3]
    body = struct.pack("<QQI", 4, 77, 0)
    old = struct.pack("<BI", 1, zlib.crc32(body)) + body
    assert RegionMeta.decode(old, 4, "here") == RegionMeta(4, end=77)
    bad = RegionMeta(4, end=10, fences=[(20, 2)])  # a fence past the snapshot's end
    with pytest.raises(Corrupted, match="fence"):
        RegionMeta.decode(bad.encode(1 << 20), 4, "here")


# -- against the broker -----------------------------------------------------------------------


def test_deposed_writer_late_record_is_never_replayed(
    nodes: Callable[..., KafkaWal], caplog: pytest.LogCaptureFixture
) -> None:
    a = nodes()
    a.open_region(REGION, 1)
    acked_a = [a.write(REGION, 1, payload(1, n)) for n in range(1, 4)]
    assert acked_a == [1, 2, 3]
    assert a.write(REGION, 2, payload(2, 1)) == 1

    b = nodes()
    b.open_region(REGION, 2)
    assert records(b, 1) == [WalRecord(1, n, payload(1, n)) for n in range(1, 4)]
    assert b.last_seq(REGION, 1) == 3

    # A resumes: its stale state gives the late record seq 4, which B is about to assign too.
    produced = a.records_produced
    with pytest.raises(Fenced, match="epoch 2"):
        a.write(REGION, 1, b"late from A")
    assert a.records_produced == produced + 1  # it did land in the topic
    with pytest.raises(Fenced):
        a.write(REGION, 1, b"later from A")
    with pytest.raises(Fenced):
        a.mark_deleted(REGION, 1, 1)
    assert a.last_seq(REGION, 1) == 4  # nothing of the late write was applied past the seq

    assert [b.write(REGION, 1, payload(1, n)) for n in (4, 5)] == [4, 5]
    assert b.write(REGION, 2, payload(2, 2)) == 2
    assert [r.seq for r in records(b, 1)] == [1, 2, 3, 4, 5]

    # B crashes (it is simply left behind): C replays the log from B's opening snapshot.
    c = nodes()
    with caplog.at_level(logging.WARNING, logger="gnomon.wal.kafka"):
        c.open_region(REGION, 3)
    assert c.recovery_info(REGION).stale_records == 1
    assert any("deposed owners" in r.getMessage() for r in caplog.records)
    got = records(c, 1)
    assert got == [WalRecord(1, n, payload(1, n)) for n in range(1, 6)]
    assert all(x.seq < y.seq for x, y in itertools.pairwise(got))
    assert records(c, 2) == [WalRecord(2, 1, payload(2, 1)), WalRecord(2, 2, payload(2, 2))]
    assert c.write(REGION, 1, payload(1, 6)) == 6


def test_late_record_after_the_new_owner_wrote_is_skipped_by_reads_and_replay(
    nodes: Callable[..., KafkaWal],
) -> None:
    a = nodes()
    a.open_region(REGION, 1)
    for n in range(1, 3):
        a.write(REGION, 1, payload(1, n))
    b = nodes()
    b.open_region(REGION, 2)
    b.write(REGION, 1, payload(1, 3))
    with pytest.raises(Fenced):
        a.write(REGION, 1, b"late from A")  # seq 3 again, after B's seq 3
    # B's next write lands behind A's stale record: B notices it is stale and goes on.
    assert b.write(REGION, 1, payload(1, 4)) == 4
    assert records(b, 1) == [WalRecord(1, n, payload(1, n)) for n in range(1, 5)]
    c = nodes()
    c.open_region(REGION, 3)
    assert records(c, 1) == [WalRecord(1, n, payload(1, n)) for n in range(1, 5)]
    assert c.recovery_info(REGION).stale_records == 1


def test_opening_below_the_region_epoch_is_fenced(nodes: Callable[..., KafkaWal]) -> None:
    a = nodes()
    a.open_region(REGION, 5)
    a.write(REGION, 1, payload(1, 1))
    a.close_region(REGION)
    for earlier in (4, 0):
        with pytest.raises(Fenced, match="epoch 5"):
            a.open_region(REGION, earlier)
    a.open_region(REGION, 5)  # the same owner again
    assert seqs(a, 1) == [1]
    with pytest.raises(Conflict):
        a.open_region(REGION, 6)


def test_opener_deposed_while_recovering_is_fenced(nodes: Callable[..., KafkaWal]) -> None:
    # B took the region at epoch 7 while an opener at 6 was still on its way (its marker
    # lands after B's): the opener finds B's marker before its own and gives up.
    b = nodes()
    b.open_region(REGION, 7)
    b.write(REGION, 1, payload(1, 1))
    a = nodes()
    with pytest.raises(Fenced, match="epoch 7"):
        a.open_region(REGION, 6)
    assert b.write(REGION, 1, payload(1, 2)) == 2


def test_deposed_writer_snapshot_is_passed_over(nodes: Callable[..., KafkaWal]) -> None:
    a = nodes()
    a.open_region(REGION, 1)
    for n in range(1, 11):
        a.write(REGION, 1, payload(1, n))
    b = nodes()
    b.open_region(REGION, 2)
    b.mark_deleted(REGION, 1, 8)  # B's snapshot, at epoch 2
    # A's cleaner or flush writes a snapshot of its stale state after B's: A stops there.
    with pytest.raises(Fenced, match="epoch 2"):
        a.mark_deleted(REGION, 1, 2)
    with pytest.raises(Fenced):
        a.write(REGION, 1, b"late from A")
    c = nodes()
    c.open_region(REGION, 3)
    # C recovered from B's snapshot (B's floor holds), not from A's newer stale one.
    assert seqs(c, 1) == [9, 10]
    assert c.last_seq(REGION, 1) == 10


def test_second_writer_at_the_same_epoch_stops_the_region(nodes: Callable[..., KafkaWal]) -> None:
    a, b = nodes(), nodes()
    a.open_region(REGION, 4)
    b.open_region(REGION, 4)  # misuse: epochs are unique per owner
    b.write(REGION, 1, payload(1, 1))
    with pytest.raises(Unavailable, match="second writer"):
        a.write(REGION, 1, payload(1, 1))


def test_engine_opens_the_shard_region_at_the_shard_epoch(
    nodes: Callable[..., KafkaWal], tmp_path: Path
) -> None:
    wal = nodes()
    engine = Engine(
        EngineConfig(data_dir=str(tmp_path / "node"), compaction_threads=0, gc_interval_s=0),
        meta=SqliteStore(str(tmp_path / "catalog.db")),
        wal=wal,
        store=LocalObjectStore(str(tmp_path / "sst")),
    )
    try:
        engine.open_shard(REGION, epoch=4, table_ids=[])
        wal.open_region(REGION, 4)  # open at that epoch already: a no-op
        with pytest.raises(Conflict, match="epoch 4"):
            wal.open_region(REGION, 5)
        engine.close_shard(REGION)
        with pytest.raises(Fenced, match="epoch 4"):
            wal.open_region(REGION, 3)
    finally:
        engine.close()
