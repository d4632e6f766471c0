"""The Kafka WAL against a real Kafka-protocol broker (tansu, in memory, on loopback): the shared
contract plus record and snapshot formats, recovery, group commit, crashes and the cleaner."""

from __future__ import annotations

import functools
import json
import logging
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic
from hypothesis import given, settings
from hypothesis import strategies as st

from gnomon.errors import Corrupted, InvalidArgument, TooLarge, Unavailable
from gnomon.wal.api import Wal
from gnomon_app.devcluster.brokers import Broker, running_tansu
from testkit.procs import free_port
from wal_kafka import KafkaWal
from wal_kafka import wal as wal_module
from wal_kafka.frame import Assembler, decode_record, encode_group
from wal_kafka.kafka import DeleteOutcome
from wal_kafka.meta import RegionMeta, TableMeta

from .contract import REGION, WalContract, opened, payload, seqs
from .crash import REPO, child_env, run_and_kill

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    with running_tansu(tmp_path_factory.mktemp("tansu")) as running:
        yield running


@pytest.fixture
def namespace() -> str:
    """A namespace of its own per test, so topics never collide on the shared broker."""
    return f"t{uuid.uuid4().hex[:16]}"


@pytest.fixture
def make_wal(broker: Broker, namespace: str) -> Callable[..., KafkaWal]:
    def make(**options: Any) -> KafkaWal:
        options.setdefault("timeout_s", 10.0)
        return KafkaWal(broker.bootstrap, namespace=namespace, **options)

    return make


@pytest.fixture
def wal_factory(make_wal: Callable[..., KafkaWal]) -> Callable[[], Wal]:
    # A short cleaner interval runs snapshots alongside every contract test.
    return lambda: make_wal(clean_interval_s=0.2)


class TestKafkaWalContract(WalContract):
    pass


def high_watermark(bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "gnomon-test"})
    try:
        return int(consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1])
    finally:
        consumer.close()


def produce_raw(bootstrap: str, topic: str, values: list[bytes]) -> None:
    """Records written behind the WAL's back, one per batch like the WAL's own."""
    producer = Producer({"bootstrap.servers": bootstrap, "batch.num.messages": 1})
    for value in values:
        producer.produce(topic, value=value, partition=0)
        assert producer.flush(10) == 0


# -- record format ---------------------------------------------------------------------------


def test_group_fits_one_record_when_small() -> None:
    group = encode_group([(1, 1, b"a"), (2, 1, b""), (1, 2, b"bc")], 4096)
    assert len(group.records) == 1
    assert group.spans == [(0, 0), (0, 0), (0, 0)]
    fragments = decode_record(group.records[0], "here")
    assert [(f.table_id, f.seq, bytes(f.data)) for f in fragments] == [
        (1, 1, b"a"),
        (2, 1, b""),
        (1, 2, b"bc"),
    ]


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(0, 20_000), min_size=1, max_size=12),
    limit=st.integers(4096, 9000),
)
def test_groups_split_and_reassemble(sizes: list[int], limit: int) -> None:
    entries = [(n % 3 + 1, n + 1, bytes([n % 251]) * size) for n, size in enumerate(sizes)]
    group = encode_group(entries, limit)
    assert all(len(record) <= limit for record in group.records)
    assembler = Assembler()
    found = []
    for offset, record in enumerate(group.records):
        for fragment in decode_record(record, "here"):
            entry = assembler.feed(100 + offset, fragment)
            if entry is not None:
                found.append(entry)
    assembler.finish()
    assert assembler.orphans == 0
    assert [(e.table_id, e.seq, e.payload) for e in found] == entries
    assert [(e.first_offset - 100, e.last_offset - 100) for e in found] == group.spans


def test_assembler_drops_unfinished_payloads() -> None:
    cut = encode_group([(1, 1, b"x" * 10_000)], 4096)
    whole = encode_group([(1, 1, b"y" * 10_000), (2, 7, b"z")], 4096)
    assembler = Assembler(table_id=1)
    found = []
    # The first record of a group that never finished, then the retried group.
    for offset, record in enumerate([cut.records[0], *whole.records]):
        for fragment in decode_record(record, "here"):
            entry = assembler.feed(offset, fragment)
            if entry is not None:
                found.append(entry)
    assert [(e.seq, e.payload) for e in found] == [(1, b"y" * 10_000)]
    assert assembler.orphans == 1
    # A continuation without its start is an orphan too.
    lone = Assembler()
    assert lone.feed(0, decode_record(cut.records[1], "here")[0]) is None
    assert lone.orphans == 1


def test_damaged_records_are_corrupted() -> None:
    record = encode_group([(1, 1, b"payload")], 4096).records[0]
    flipped = record[:-1] + bytes([record[-1] ^ 1])
    with pytest.raises(Corrupted, match="crc"):
        decode_record(flipped, "topic t offset 3")
    with pytest.raises(Corrupted, match="version"):
        decode_record(b"\x09" + record[1:], "here")
    with pytest.raises(Corrupted, match="shorter"):
        decode_record(record[:4], "here")


# -- region metadata -------------------------------------------------------------------------


def test_table_index_is_sparse_and_trimmed_by_floors() -> None:
    table = TableMeta()
    for seq in range(1, 101):
        table.apply(seq, seq * 2, seq * 2, index_interval=10)
    # An entry at offsets 2, 12, 22...: one per 10 offsets, every 5th seq.
    assert list(table.index_seqs) == list(range(1, 100, 5))
    assert table.start_offset(1) == 2
    assert table.start_offset(14) == 22  # the entry of seq 11, at or below 14
    assert not table.apply(50, 999, 999, index_interval=10)  # a duplicate changes nothing
    table.mark_deleted(57)
    assert table.index_seqs[0] == 56 and table.lowest_live_offset() == 112
    table.mark_deleted(20)  # never lowers the floor
    assert table.latest_marked_deleted == 57
    table.mark_deleted(100)
    assert table.lowest_live_offset() is None and len(table.index_seqs) == 0
    assert table.last_seq == 100


def test_lowest_live_offset_of_a_region() -> None:
    meta = RegionMeta(3, end=50)
    meta.table(1).apply(1, 10, 10, 1)
    meta.table(2).apply(1, 20, 22, 1)
    assert meta.lowest_live_offset() == 10
    meta.table(1).mark_deleted(1)
    assert meta.lowest_live_offset() == 20
    meta.table(2).mark_deleted(5)
    assert meta.lowest_live_offset() == 50


def test_snapshot_round_trip_and_checks() -> None:
    meta = RegionMeta(9, end=1234)
    for seq in range(1, 40):
        meta.table(5).apply(seq, seq, seq, 4)
    meta.table(5).mark_deleted(12)
    meta.table(6).mark_deleted(100)
    data = meta.encode(1 << 20)
    back = RegionMeta.decode(data, 9, "here")
    assert back == meta
    with pytest.raises(Corrupted, match="region 9, not 8"):
        RegionMeta.decode(data, 8, "here")
    with pytest.raises(Corrupted, match="crc"):
        RegionMeta.decode(data[:-1] + bytes([data[-1] ^ 1]), 9, "here")


def test_oversized_snapshot_thins_its_index() -> None:
    meta = RegionMeta(1, end=10_000)
    for seq in range(1, 2001):
        meta.table(1).apply(seq, seq, seq, 1)
    data = meta.encode(4096)
    assert len(data) <= 4096
    back = RegionMeta.decode(data, 1, "here").tables[1]
    assert back.index_seqs[0] == 1 and len(back.index_seqs) < 2000
    # Still a valid index: every seq starts at or before its own offset.
    assert all(back.start_offset(seq) <= seq for seq in range(1, 2001))
    many = RegionMeta(1, tables={t: TableMeta() for t in range(1, 500)})
    with pytest.raises(TooLarge):
        many.encode(4096)


# -- against the broker ----------------------------------------------------------------------


def test_recovery_from_snapshot_plus_tail_scan(
    make_wal: Callable[..., KafkaWal], broker: Broker
) -> None:
    first = make_wal(clean_interval_s=3600)
    try:
        first.open_region(REGION)
        assert first.recovery_info(REGION).snapshot_end is None
        for n in range(1, 31):
            first.write(REGION, 1, payload(1, n))
        for n in range(1, 6):
            first.write(REGION, 2, payload(2, n))
        first.mark_deleted(REGION, 1, 10)  # writes a snapshot covering offsets 0..34
        for n in range(31, 51):
            first.write(REGION, 1, payload(1, n))
        # A second WAL opens the region as a successor would after a crash of the first: it
        # loads the snapshot and scans only the 20 records after it.
        with opened(make_wal) as second:
            info = second.recovery_info(REGION)
            assert (info.snapshot_end, info.scanned_records, info.orphans) == (35, 20, 0)
            assert seqs(second, 1) == list(range(11, 51))
            assert [r.payload for r in second.read(REGION, 1, 49)] == [
                payload(1, 49),
                payload(1, 50),
            ]
            assert seqs(second, 2) == [1, 2, 3, 4, 5]
            assert second.last_seq(REGION, 1) == 50
    finally:
        first.close()  # snapshots the region on the way out
    with opened(make_wal) as third:
        info = third.recovery_info(REGION)
        assert (info.snapshot_end, info.scanned_records) == (55, 0)
        assert seqs(third, 1) == list(range(11, 51))
        assert third.write(REGION, 1, payload(1, 51)) == 51
        assert third.write(REGION, 2, payload(2, 6)) == 6
    data_topic = f"{first.namespace}-wal-{REGION}"
    assert high_watermark(broker.bootstrap, data_topic) == 57


def test_group_commit_batches_concurrent_writers(
    make_wal: Callable[..., KafkaWal], broker: Broker
) -> None:
    threads, writes = 8, 50
    start = threading.Barrier(threads)
    errors: list[BaseException] = []

    def writer(wal: KafkaWal, index: int) -> None:
        try:
            start.wait()
            for n in range(writes):
                wal.write(REGION, index % 2 + 1, f"{index}:{n}".encode())
        except BaseException as e:
            errors.append(e)

    with opened(make_wal) as wal:
        workers = [threading.Thread(target=writer, args=(wal, i)) for i in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(timeout=60)
        assert not errors
        produced = wal.records_produced
        assert produced < threads * writes
        data_topic, _ = wal.topics(REGION)
        assert high_watermark(broker.bootstrap, data_topic) == produced
        assert seqs(wal, 1) == list(range(1, threads * writes // 2 + 1))
        assert seqs(wal, 2) == list(range(1, threads * writes // 2 + 1))


def test_payloads_larger_than_a_record_span_records(make_wal: Callable[..., KafkaWal]) -> None:
    sizes = [0, 5000, 17, 30_000, 4000, 1]
    with opened(lambda: make_wal(max_record_bytes=4096, index_interval=2)) as wal:
        for n, size in enumerate(sizes, start=1):
            assert wal.write(REGION, 1, bytes([n]) * size) == n
            wal.write(REGION, 2, payload(2, n))
        assert wal.records_produced > 2 * len(sizes)
        for from_seq in range(1, len(sizes) + 1):
            got = list(wal.read(REGION, 1, from_seq))
            assert [len(r.payload) for r in got] == sizes[from_seq - 1 :]
    with opened(lambda: make_wal(max_record_bytes=4096)) as wal:
        assert [r.payload for r in wal.read(REGION, 1, 1)] == [
            bytes([n]) * size for n, size in enumerate(sizes, start=1)
        ]
        assert seqs(wal, 2) == list(range(1, len(sizes) + 1))


def test_unfinished_group_is_ignored_and_its_seq_reused(
    make_wal: Callable[..., KafkaWal], broker: Broker, caplog: pytest.LogCaptureFixture
) -> None:
    with opened(make_wal) as wal:
        wal.write(REGION, 1, b"one")
        data_topic, _ = wal.topics(REGION)
    # A writer died after the first record of a two-record group reached the broker.
    unfinished = encode_group([(1, 2, b"lost" * 2000)], 4096)
    produce_raw(broker.bootstrap, data_topic, unfinished.records[:1])
    with caplog.at_level(logging.WARNING, logger="gnomon.wal.kafka"), opened(make_wal) as wal:
        assert wal.recovery_info(REGION).orphans == 1
        assert wal.last_seq(REGION, 1) == 1
        assert wal.write(REGION, 1, b"two") == 2
        assert [r.payload for r in wal.read(REGION, 1, 1)] == [b"one", b"two"]
    assert any("never" in r.getMessage() and data_topic in r.getMessage() for r in caplog.records)


def test_damaged_record_in_the_log_is_corrupted(
    make_wal: Callable[..., KafkaWal], broker: Broker
) -> None:
    with opened(make_wal) as wal:
        wal.write(REGION, 1, b"one")
        data_topic, _ = wal.topics(REGION)
    record = encode_group([(1, 2, b"two")], 4096).records[0]
    produce_raw(broker.bootstrap, data_topic, [record[:-1] + b"?"])
    wal = make_wal()
    try:
        with pytest.raises(Corrupted, match=rf"topic {data_topic} offset 1: .*crc"):
            wal.open_region(REGION)
    finally:
        wal.close()


def test_topic_with_several_partitions_is_refused(
    make_wal: Callable[..., KafkaWal], broker: Broker, namespace: str
) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topic = f"{namespace}-wal-{REGION}"
    for future in admin.create_topics([NewTopic(topic, 3, -1)]).values():
        future.result(timeout=10)
    wal = make_wal()
    try:
        with pytest.raises(Corrupted, match="3 partitions"):
            wal.open_region(REGION)
    finally:
        wal.close()


def test_unreachable_broker_is_unavailable() -> None:
    bootstrap = f"127.0.0.1:{free_port()}"
    wal = KafkaWal(bootstrap, namespace="nowhere", timeout_s=1.0)
    try:
        started = time.monotonic()
        with pytest.raises(Unavailable, match=bootstrap):
            wal.open_region(REGION)
        assert time.monotonic() - started < 5
    finally:
        wal.close()


def test_broker_loss_fails_writes_within_the_timeout(tmp_path: Path) -> None:
    with running_tansu(tmp_path) as own:
        wal = KafkaWal(own.bootstrap, namespace="lost", timeout_s=1.0)
        try:
            wal.open_region(REGION)
            assert wal.write(REGION, 1, b"before") == 1
            own.server.kill()
            own.server.proc.wait(timeout=10)
            started = time.monotonic()
            with pytest.raises(Unavailable, match=own.bootstrap):
                wal.write(REGION, 1, b"lost")
            assert time.monotonic() - started < 5
            # Whether that group reached Kafka is unknown: no more writes until reopened.
            with pytest.raises(Unavailable, match="reopened"):
                wal.write(REGION, 1, b"refused")
            assert wal.last_seq(REGION, 1) == 2
        finally:
            started = time.monotonic()
            wal.close()
            assert time.monotonic() - started < 5


def test_a_stalled_broker_fails_writes_at_the_append_deadline(tmp_path: Path) -> None:
    """A broker that stops answering (SIGSTOP) but keeps its connections: a write waiting on
    its produce is answered at the append deadline, not when Kafka's own timeout runs out,
    with a retryable Unavailable saying it may or may not be stored; a write queued behind it
    is refused unsent. Once the broker is back the region takes writes again, and every
    acknowledged record reads back, before and after a reopen."""
    deadline_s = 1.0
    with running_tansu(tmp_path) as own:
        open_wal = functools.partial(
            KafkaWal, own.bootstrap, namespace="stalled", append_timeout_s=deadline_s
        )
        acked: dict[int, bytes] = {}
        wal = open_wal()
        try:
            wal.open_region(REGION)
            acked[wal.write(REGION, 1, b"before")] = b"before"
            own.server.kill(signal.SIGSTOP)
            try:
                started = time.monotonic()
                with pytest.raises(Unavailable, match="may or may not be stored") as late:
                    wal.write(REGION, 1, b"late")
                assert time.monotonic() - started < deadline_s + 1.5
                assert late.value.retryable
                started = time.monotonic()
                with pytest.raises(Unavailable, match="was not stored") as behind:
                    wal.write(REGION, 1, b"behind")
                assert time.monotonic() - started < deadline_s + 1.5
                assert behind.value.retryable
            finally:
                own.server.kill(signal.SIGCONT)
            for n in range(5):
                value = b"after %d" % n
                acked[wal.write(REGION, 1, value)] = value
            found = {r.seq: r.payload for r in wal.read(REGION, 1, 1)}
            # The late write landed once the broker woke (its seq taken), or never did.
            assert found == acked | ({2: b"late"} if len(found) > len(acked) else {})
            assert wal.last_seq(REGION, 1) == max(found)
        finally:
            wal.close()
        with opened(open_wal) as reopened:
            assert {r.seq: r.payload for r in reopened.read(REGION, 1, 1)} == found


def test_constructor_rejects_bad_options(broker: Broker) -> None:
    for options in (
        {"namespace": "has space"},
        {"namespace": ""},
        {"timeout_s": 0},
        {"append_timeout_s": 0},
        {"max_record_bytes": 100},
        {"index_interval": 0},
        {"replication_factor": 0},
        {"clean_interval_s": "often"},
        {"config": {"no.such.property": "1"}},
    ):
        with pytest.raises(InvalidArgument):
            KafkaWal(broker.bootstrap, **options)


def test_cleaner_degrades_when_the_broker_cannot_delete_records(
    make_wal: Callable[..., KafkaWal], broker: Broker, caplog: pytest.LogCaptureFixture
) -> None:
    def warnings() -> list[str]:
        return [
            r.getMessage()
            for r in caplog.records
            if r.name == "gnomon.wal.kafka" and r.levelno >= logging.WARNING
        ]

    with caplog.at_level(logging.WARNING, logger="gnomon.wal.kafka"):
        with opened(lambda: make_wal(clean_interval_s=0.05)) as wal:
            for n in range(1, 11):
                wal.write(REGION, 1, payload(1, n))
            # Everything is dead now: the cleaner wants to delete the whole log.
            wal.mark_deleted(REGION, 1, 10)
            deadline = time.monotonic() + 15
            while wal.delete_records_supported is None and time.monotonic() < deadline:
                time.sleep(0.05)
            assert wal.delete_records_supported is False
            # It stopped trying: more dead records and cleaner rounds add no warning.
            for n in range(11, 21):
                wal.write(REGION, 1, payload(1, n))
            wal.mark_deleted(REGION, 1, 15)
            time.sleep(0.5)
            assert seqs(wal, 1) == [16, 17, 18, 19, 20]
        assert len(warnings()) == 1
        assert "DeleteRecords" in warnings()[0]
    assert broker.server.proc.poll() is None
    with opened(make_wal) as wal:
        assert seqs(wal, 1) == [16, 17, 18, 19, 20]


def test_cleaner_deletes_nothing_when_told_the_broker_cannot(
    make_wal: Callable[..., KafkaWal],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """``delete_records=False`` (the dev cluster's broker): said once, as information, when
    the WAL opens; the cleaner then only marks records deleted, never calling DeleteRecords
    nor warning."""
    calls: list[str] = []

    def delete(admin: object, topic: str, offset: int, timeout_s: float) -> tuple[Any, str]:
        calls.append(topic)
        return DeleteOutcome.UNSUPPORTED, "not implemented"

    monkeypatch.setattr(wal_module, "delete_records_before", delete)
    with (
        caplog.at_level(logging.INFO, logger="gnomon.wal.kafka"),
        opened(lambda: make_wal(clean_interval_s=0.05, delete_records=False)) as wal,
    ):
        assert wal.delete_records_supported is False
        for n in range(1, 11):
            wal.write(REGION, 1, payload(1, n))
        wal.mark_deleted(REGION, 1, 6)
        time.sleep(0.5)  # cleaner rounds
        assert seqs(wal, 1) == [7, 8, 9, 10]
    said = [
        (r.levelno, r.getMessage())
        for r in caplog.records
        if r.name == "gnomon.wal.kafka" and "DeleteRecords" in r.getMessage()
    ]
    assert calls == []
    assert len(said) == 1 and said[0][0] == logging.INFO, said


def test_cleaner_deletes_below_the_lowest_live_offset(
    make_wal: Callable[..., KafkaWal], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The path a broker with DeleteRecords (Apache Kafka) takes, with the call recorded."""
    calls: list[tuple[str, int]] = []

    def delete(admin: object, topic: str, offset: int, timeout_s: float) -> tuple[Any, str]:
        calls.append((topic, offset))
        return DeleteOutcome.DELETED, ""

    monkeypatch.setattr(wal_module, "delete_records_before", delete)

    def wait_for(count: int) -> None:
        deadline = time.monotonic() + 10
        while len(calls) < count and time.monotonic() < deadline:
            time.sleep(0.02)

    with opened(lambda: make_wal(clean_interval_s=0.05, index_interval=4)) as wal:
        data_topic, _ = wal.topics(REGION)
        for n in range(1, 21):
            wal.write(REGION, 1, payload(1, n))  # offsets 0..19
        for n in range(1, 6):
            wal.write(REGION, 2, payload(2, n))  # offsets 20..24
        time.sleep(0.3)
        assert calls == []  # both tables are live from offset 0 and 20: nothing to delete
        wal.mark_deleted(REGION, 1, 13)
        wait_for(1)
        # Seq 14 lives at offset 13; the index entry at or below it is seq 13 at offset 12.
        assert calls == [(data_topic, 12)]
        wal.mark_deleted(REGION, 1, 20)
        wait_for(2)
        assert calls[1:] == [(data_topic, 20)]
        wal.mark_deleted(REGION, 2, 5)
        wait_for(3)
        assert calls[2:] == [(data_topic, 25)]
        assert wal.delete_records_supported is True
        time.sleep(0.3)
        assert len(calls) == 3  # nothing new to delete, nothing asked


def test_cleaner_stops_at_once_when_told_unsupported(
    make_wal: Callable[..., KafkaWal], monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []

    def delete(admin: object, topic: str, offset: int, timeout_s: float) -> tuple[Any, str]:
        calls.append(offset)
        return DeleteOutcome.UNSUPPORTED, "UNSUPPORTED_VERSION"

    monkeypatch.setattr(wal_module, "delete_records_before", delete)
    with opened(lambda: make_wal(clean_interval_s=0.05)) as wal:
        wal.write(REGION, 1, b"x")
        wal.mark_deleted(REGION, 1, 1)
        deadline = time.monotonic() + 10
        while wal.delete_records_supported is None and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.3)
    assert calls == [1]


# -- crash -----------------------------------------------------------------------------------

READER = """
import json, sys
from wal_kafka import KafkaWal

wal = KafkaWal(sys.argv[1], namespace=sys.argv[2])
wal.open_region(1)
found = {}
for table_id in range(1, 5):
    records = list(wal.read(1, table_id, 1))
    assert all(r.payload == f"{table_id}:{r.seq}:".encode() * 8 for r in records), table_id
    found[table_id] = [r.seq for r in records]
wal.close()
print(json.dumps(found))
"""


def test_sigkill_loses_no_acknowledged_write(broker: Broker, namespace: str) -> None:
    open_wal = functools.partial(
        KafkaWal, broker.bootstrap, namespace=namespace, clean_interval_s=0.2
    )
    acked: dict[int, int] = {}
    for _ in range(2):
        for table_id, seq in run_and_kill(open_wal, acked_before_kill=400, timeout_s=20).items():
            acked[table_id] = max(acked.get(table_id, 0), seq)
        # A new process reads everything back.
        reader = subprocess.run(
            [sys.executable, "-c", READER, broker.bootstrap, namespace],
            capture_output=True,
            cwd=REPO,
            env=child_env(),
            timeout=60,
        )
        assert reader.returncode == 0, reader.stderr.decode()[-3000:]
        found = {int(t): s for t, s in json.loads(reader.stdout.splitlines()[-1]).items()}
        for table_id, seq in acked.items():
            assert found[table_id] == list(range(1, len(found[table_id]) + 1))
            assert len(found[table_id]) >= seq
