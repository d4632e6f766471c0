"""The disk WAL: the shared contract plus format, recovery, group commit and crash tests."""

from __future__ import annotations

import contextlib
import errno
import functools
import logging
import os
import random
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gnomon.errors import Closed, Corrupted, InvalidArgument, Unavailable
from gnomon.wal.api import MAX_U64, Ticket, Wal
from node.wal.disk import DiskWal
from node.wal.record import (
    HEADER_SIZE,
    Record,
    RecordScanner,
    ScanEnd,
    decode_at,
    encode,
)
from node.wal.segment import (
    EXTENT,
    MAGIC,
    MAGIC_SIZE,
    Segment,
    parse_segment_name,
    segment_name,
)

from .contract import REGION, WalContract, opened, seqs
from .crash import CRASH_REGION, crash_payload, run_and_kill

pytestmark = pytest.mark.integration

SEGMENT_SIZE = 64 * 1024


@pytest.fixture
def wal_root(tmp_path: Path) -> str:
    return str(tmp_path / "wal")


@pytest.fixture
def wal_factory(wal_root: str) -> Callable[[], Wal]:
    return lambda: DiskWal(wal_root, segment_size=SEGMENT_SIZE)


class TestDiskWalContract(WalContract):
    pass


def region_dir(root: str, region: int = REGION) -> Path:
    return Path(root) / f"region_{region}"


def segment_paths(root: str, region: int = REGION) -> list[Path]:
    directory = region_dir(root, region)
    return sorted(p for p in directory.iterdir() if parse_segment_name(p.name) is not None)


def write_n(wal: Wal, table_id: int, count: int, size: int = 100) -> None:
    for n in range(1, count + 1):
        wal.write(REGION, table_id, bytes([n % 251 + 1]) * size)


def patch_file(path: Path, offset: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)


def record_offset(index: int, size: int) -> int:
    """Offset of the ``index``-th (0-based) record in a segment of ``size``-byte payloads."""
    return MAGIC_SIZE + index * (HEADER_SIZE + size)


# -- codec -----------------------------------------------------------------------------------

u64 = st.integers(min_value=0, max_value=MAX_U64)
seq64 = st.integers(min_value=1, max_value=MAX_U64)
entries = st.lists(st.tuples(u64, seq64, st.binary(max_size=300)), min_size=1, max_size=12)


@given(table_id=u64, seq=seq64, value=st.binary(max_size=5000))
def test_record_round_trip(table_id: int, seq: int, value: bytes) -> None:
    data = encode(table_id, seq, value)
    assert len(data) == HEADER_SIZE + len(value)
    assert data[0] == 1
    assert decode_at(data, 0, len(data)) == Record(table_id, seq, value)


@given(entries=entries, padding=st.integers(min_value=0, max_value=64))
def test_scanner_walks_records_up_to_the_zero_fill(
    entries: list[tuple[int, int, bytes]], padding: int
) -> None:
    encoded = [encode(*entry) for entry in entries]
    buf = b"".join(encoded) + bytes(padding)
    scanner = RecordScanner(buf, 0, len(buf), check_tail=True)
    found = list(scanner)
    assert [record for _, record in found] == [Record(*entry) for entry in entries]
    assert [offset for offset, _ in found] == [
        sum(map(len, encoded[:i])) for i in range(len(encoded))
    ]
    assert scanner.end is ScanEnd.CLEAN
    assert scanner.end_offset == len(buf) - padding


@given(entries=entries, data=st.data())
def test_scanner_reports_a_cut_last_record_as_torn(
    entries: list[tuple[int, int, bytes]], data: st.DataObject
) -> None:
    encoded = b"".join(encode(*entry) for entry in entries)
    last = len(encoded) - HEADER_SIZE - len(entries[-1][2])
    # Cutting off only zeros would leave the record intact once the zero fill follows.
    nonzero_end = len(encoded.rstrip(b"\x00"))
    cut = data.draw(st.integers(min_value=last + 1, max_value=nonzero_end - 1))
    zeros = data.draw(st.integers(min_value=0, max_value=100))
    buf = encoded[:cut] + bytes(zeros)
    scanner = RecordScanner(buf, 0, len(buf), check_tail=True)
    assert len(list(scanner)) == len(entries) - 1
    assert scanner.end is ScanEnd.TORN
    assert scanner.end_offset == last


@given(entries=entries, data=st.data())
def test_scanner_tells_torn_from_corrupt(
    entries: list[tuple[int, int, bytes]], data: st.DataObject
) -> None:
    encoded = [encode(*entry) for entry in entries]
    victim = data.draw(st.integers(min_value=0, max_value=len(entries) - 1))
    start = sum(map(len, encoded[:victim]))
    # Any byte after the version byte: the crc covers all of them.
    position = start + data.draw(st.integers(min_value=1, max_value=len(encoded[victim]) - 1))
    flip = data.draw(st.integers(min_value=1, max_value=255))
    buf = bytearray(b"".join(encoded) + bytes(50))
    buf[position] ^= flip
    scanner = RecordScanner(bytes(buf), 0, len(buf), check_tail=True)
    assert len(list(scanner)) == victim
    assert scanner.end_offset == start
    assert scanner.end is (ScanEnd.TORN if victim == len(entries) - 1 else ScanEnd.CORRUPT)


def test_scanner_never_takes_an_unknown_version_for_a_torn_tail() -> None:
    buf = encode(1, 1, b"ok") + b"\x02" + encode(1, 2, b"newer format")[1:] + bytes(10)
    scanner = RecordScanner(buf, 0, len(buf), check_tail=True)
    assert len(list(scanner)) == 1
    assert scanner.end is ScanEnd.CORRUPT
    assert "version 2" in scanner.detail


def test_scanner_checks_bytes_after_the_end_marker_only_when_asked() -> None:
    valid = encode(1, 1, b"ok")
    garbage = valid + bytes(20) + b"\xff\xfe\x07" + bytes(20)
    hidden = valid + bytes(20) + encode(1, 2, b"after a hole")
    for buf, checked in ((garbage, ScanEnd.TORN), (hidden, ScanEnd.CORRUPT)):
        unchecked = RecordScanner(buf, 0, len(buf))
        assert len(list(unchecked)) == 1
        assert unchecked.end is ScanEnd.CLEAN
        scanner = RecordScanner(buf, 0, len(buf), check_tail=True)
        assert len(list(scanner)) == 1
        assert (scanner.end, scanner.end_offset) == (checked, len(valid))


def test_encode_rejects_out_of_range_ids() -> None:
    with pytest.raises(InvalidArgument):
        encode(-1, 1, b"")
    with pytest.raises(InvalidArgument):
        encode(1, MAX_U64 + 1, b"")
    with pytest.raises(InvalidArgument):
        encode(1, 0, b"")


def test_segment_names_sort_like_ids() -> None:
    assert segment_name(1) == "seg_00000000000000000001"
    names = [segment_name(i) for i in (1, 9, 10, 100, 2**64 - 1)]
    assert sorted(names) == names
    assert [parse_segment_name(n) for n in names] == [1, 9, 10, 100, 2**64 - 1]
    assert parse_segment_name("seg_1") is None
    assert parse_segment_name(segment_name(3) + ".tmp") is None


# -- segments --------------------------------------------------------------------------------


def test_new_segments_start_with_magic_and_are_preallocated(wal_root: str) -> None:
    with opened(lambda: DiskWal(wal_root, segment_size=SEGMENT_SIZE)):
        pass
    [path] = segment_paths(wal_root)
    assert path.name == segment_name(1)
    assert path.stat().st_size == SEGMENT_SIZE
    assert path.read_bytes()[:MAGIC_SIZE] == MAGIC


def test_segments_grow_an_extent_at_a_time_up_to_the_segment_size(wal_root: str) -> None:
    mib = b"m" * (1 << 20)
    size = 3 * EXTENT
    with opened(lambda: DiskWal(wal_root, segment_size=size, sync="never")) as wal:
        [first] = segment_paths(wal_root)
        assert first.stat().st_size == EXTENT
        for _ in range(5):
            wal.write(REGION, 1, mib)
        assert first.stat().st_size == 2 * EXTENT
        for _ in range(8):
            wal.write(REGION, 1, mib)
        # Eleven records fill the first segment to its size; the rest start a second.
        paths = segment_paths(wal_root)
        assert [p.stat().st_size for p in paths] == [size, EXTENT]
    with opened(lambda: DiskWal(wal_root, segment_size=size)) as wal:
        assert [len(r.payload) for r in wal.read(REGION, 1, 0)] == [len(mib)] * 13
        assert wal.write(REGION, 1, b"after") == 14
    with opened(lambda: DiskWal(wal_root, segment_size=size)) as wal:
        assert seqs(wal, 1) == list(range(1, 15))


def test_reopening_with_every_record_deleted_frees_the_active_segment(wal_root: str) -> None:
    size = 2 * EXTENT
    with opened(lambda: DiskWal(wal_root, segment_size=size)) as wal:
        write_n(wal, 1, 10, size=500_000)
        write_n(wal, 2, 1)
        wal.mark_deleted(REGION, 1, 10)
        [active] = segment_paths(wal_root)
        assert active.stat().st_size == size
    # Table 2's record is live: the segment stays.
    with opened(lambda: DiskWal(wal_root, segment_size=size)) as wal:
        assert segment_paths(wal_root) == [active]
        wal.mark_deleted(REGION, 2, 1)
    with opened(lambda: DiskWal(wal_root, segment_size=size)) as wal:
        [fresh] = segment_paths(wal_root)
        assert fresh.name == segment_name(2)
        assert fresh.stat().st_size == EXTENT
        assert (wal.last_seq(REGION, 1), wal.last_seq(REGION, 2)) == (10, 1)
        assert wal.write(REGION, 1, b"next") == 11
    with opened(lambda: DiskWal(wal_root, segment_size=size)) as wal:
        assert segment_paths(wal_root) == [fresh]
        assert seqs(wal, 1) == [11]
        assert seqs(wal, 2) == []


def test_a_crash_between_fresh_segment_and_deletion_leaves_a_dead_segment_for_later(
    wal_root: str,
) -> None:
    with opened(lambda: DiskWal(wal_root, segment_size=SEGMENT_SIZE)) as wal:
        write_n(wal, 1, 5)
        wal.mark_deleted(REGION, 1, 5)
        [old] = segment_paths(wal_root)
    # The state a crash leaves after the fresh segment is durably named, before the old one
    # is deleted.
    fresh = old.with_name(segment_name(2))
    fresh.write_bytes(MAGIC + bytes(SEGMENT_SIZE - MAGIC_SIZE))
    with opened(lambda: DiskWal(wal_root, segment_size=SEGMENT_SIZE)) as wal:
        assert segment_paths(wal_root) == [fresh]
        assert wal.write(REGION, 1, b"next") == 6
    with opened(lambda: DiskWal(wal_root, segment_size=SEGMENT_SIZE)) as wal:
        assert seqs(wal, 1) == [6]


def test_no_room_for_a_fresh_segment_keeps_writing_in_the_old_one(
    wal_root: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    with opened(lambda: DiskWal(wal_root, segment_size=SEGMENT_SIZE)) as wal:
        write_n(wal, 1, 5)
        wal.mark_deleted(REGION, 1, 5)
        [old] = segment_paths(wal_root)

    def no_space(*args: object) -> Segment:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Segment, "create", no_space)
    with (
        caplog.at_level(logging.WARNING, logger="gnomon.wal"),
        opened(lambda: DiskWal(wal_root, segment_size=SEGMENT_SIZE)) as wal,
    ):
        assert wal.write(REGION, 1, b"next") == 6
    assert "cannot start a fresh segment" in caplog.text
    assert segment_paths(wal_root) == [old]
    monkeypatch.undo()
    with opened(lambda: DiskWal(wal_root, segment_size=SEGMENT_SIZE)) as wal:
        assert seqs(wal, 1) == [6]


def test_roll_over_and_dead_segment_removal(wal_root: str) -> None:
    with opened(lambda: DiskWal(wal_root, segment_size=4096)) as wal:
        wal.write(REGION, 2, b"table 2 lives in the first segment")
        write_n(wal, 1, 100, size=200)
        paths = segment_paths(wal_root)
        assert len(paths) >= 5
        assert all(p.stat().st_size == 4096 for p in paths)
        wal.mark_deleted(REGION, 1, 100)
        # The first segment still holds table 2 and the last one is active: both stay.
        assert segment_paths(wal_root) == [paths[0], paths[-1]]
        wal.mark_deleted(REGION, 2, 1)
        assert segment_paths(wal_root) == [paths[-1]]
        assert wal.write(REGION, 1, b"next") == 101
    with opened(lambda: DiskWal(wal_root, segment_size=4096)) as wal:
        assert seqs(wal, 1) == [101]
        assert seqs(wal, 2) == []
        assert wal.last_seq(REGION, 2) == 1


def test_partially_deleted_segments_stay(wal_root: str) -> None:
    with opened(lambda: DiskWal(wal_root, segment_size=4096)) as wal:
        write_n(wal, 1, 60, size=200)
        before = segment_paths(wal_root)
        wal.mark_deleted(REGION, 1, 30)
        after = segment_paths(wal_root)
        assert len(after) < len(before)
        assert seqs(wal, 1) == list(range(31, 61))
    with opened(lambda: DiskWal(wal_root, segment_size=4096)) as wal:
        assert seqs(wal, 1, 40) == list(range(40, 61))


def test_record_larger_than_a_segment_gets_its_own(wal_root: str) -> None:
    big = os.urandom(10_000)
    with opened(lambda: DiskWal(wal_root, segment_size=4096)) as wal:
        wal.write(REGION, 1, b"small")
        wal.write(REGION, 1, big)
        wal.write(REGION, 1, b"small again")
        sizes = [p.stat().st_size for p in segment_paths(wal_root)]
        assert sizes == [4096, MAGIC_SIZE + HEADER_SIZE + len(big), 4096]
    with opened(lambda: DiskWal(wal_root, segment_size=4096)) as wal:
        assert [r.payload for r in wal.read(REGION, 1, 0)] == [b"small", big, b"small again"]


def test_a_read_sees_the_log_as_of_its_call(wal_root: str) -> None:
    with opened(lambda: DiskWal(wal_root, segment_size=4096)) as wal:
        write_n(wal, 1, 80, size=200)
        records = wal.read(REGION, 1, 1)
        assert next(records).seq == 1
        before = len(segment_paths(wal_root))
        wal.mark_deleted(REGION, 1, 79)
        wal.write(REGION, 1, b"after the read began")
        assert len(segment_paths(wal_root)) < before
        assert [r.seq for r in records] == list(range(2, 81))
        assert seqs(wal, 1) == [80, 81]


def test_writes_reads_and_deletions_race_safely(wal_root: str) -> None:
    stop = threading.Event()
    problems: list[str] = []

    def writer(table_id: int) -> None:
        try:
            while not stop.is_set():
                wal.write(REGION, table_id, b"w" * 150)
        except BaseException as e:
            problems.append(f"writer: {e!r}")

    def deleter() -> None:
        try:
            while not stop.is_set():
                for table_id in (1, 2):
                    wal.mark_deleted(REGION, table_id, max(0, wal.last_seq(REGION, table_id) - 20))
                time.sleep(0.002)
        except BaseException as e:
            problems.append(f"deleter: {e!r}")

    def reader() -> None:
        try:
            while not stop.is_set():
                for table_id in (1, 2):
                    got = seqs(wal, table_id)
                    if got != list(range(got[0], got[0] + len(got))) if got else False:
                        problems.append(f"reader: gap in {got}")
        except BaseException as e:
            problems.append(f"reader: {e!r}")

    with opened(lambda: DiskWal(wal_root, segment_size=4096)) as wal:
        threads = [threading.Thread(target=writer, args=(t,)) for t in (1, 1, 2, 2)]
        threads += [threading.Thread(target=deleter), threading.Thread(target=reader)]
        for thread in threads:
            thread.start()
        time.sleep(1)
        stop.set()
        for thread in threads:
            thread.join(timeout=30)
        assert not problems, problems[:5]
        assert len(segment_paths(wal_root)) < 10
        final = {t: (wal.last_seq(REGION, t), seqs(wal, t)) for t in (1, 2)}
    with opened(lambda: DiskWal(wal_root, segment_size=4096)) as wal:
        for table_id, (last, live) in final.items():
            assert live == list(range(live[0], last + 1)) if live else last > 0
            assert seqs(wal, table_id) == live
            assert wal.last_seq(REGION, table_id) == last


def test_unfinished_read_fails_closed_after_close(wal_root: str) -> None:
    wal = DiskWal(wal_root, segment_size=4096)
    wal.open_region(REGION)
    write_n(wal, 1, 80, size=200)
    records = wal.read(REGION, 1, 1)
    next(records)
    wal.close()
    with pytest.raises(Closed):
        list(records)


# -- recovery --------------------------------------------------------------------------------


def reopen_with_warning(
    wal_root: str, caplog: pytest.LogCaptureFixture, segment: Path, offset: int
) -> DiskWal:
    caplog.clear()
    wal = DiskWal(wal_root, segment_size=SEGMENT_SIZE)
    with caplog.at_level(logging.WARNING, logger="gnomon.wal"):
        wal.open_region(REGION)
    warnings = [r for r in caplog.records if r.name == "gnomon.wal" and r.levelname == "WARNING"]
    assert len(warnings) == 1, caplog.text
    assert str(segment) in warnings[0].getMessage()
    assert f"offset {offset}" in warnings[0].getMessage()
    return wal


def assert_recovered(wal_root: str, caplog: pytest.LogCaptureFixture, wal: DiskWal) -> None:
    """After a repaired torn tail: nine records left, writes go on, the next open is clean."""
    try:
        assert wal.last_seq(REGION, 1) == 9
        assert seqs(wal, 1) == list(range(1, 10))
        assert wal.write(REGION, 1, b"tenth, take two") == 10
        assert wal.write(REGION, 1, b"eleventh") == 11
    finally:
        wal.close()
    caplog.clear()
    with (
        caplog.at_level(logging.WARNING, logger="gnomon.wal"),
        opened(lambda: DiskWal(wal_root, segment_size=SEGMENT_SIZE)) as reopened,
    ):
        assert [r.payload for r in reopened.read(REGION, 1, 9)][1:] == [
            b"tenth, take two",
            b"eleventh",
        ]
    assert not caplog.records


def test_torn_tail_cut_mid_record_is_truncated(
    wal_root: str, caplog: pytest.LogCaptureFixture
) -> None:
    with opened(lambda: DiskWal(wal_root, segment_size=SEGMENT_SIZE)) as wal:
        write_n(wal, 1, 10)
    [segment] = segment_paths(wal_root)
    tenth = record_offset(9, 100)
    os.truncate(segment, tenth + 40)
    wal = reopen_with_warning(wal_root, caplog, segment, tenth)
    assert_recovered(wal_root, caplog, wal)


def test_torn_tail_with_damaged_last_record_is_truncated(
    wal_root: str, caplog: pytest.LogCaptureFixture
) -> None:
    with opened(lambda: DiskWal(wal_root, segment_size=SEGMENT_SIZE)) as wal:
        write_n(wal, 1, 10)
    [segment] = segment_paths(wal_root)
    tenth = record_offset(9, 100)
    patch_file(segment, tenth + HEADER_SIZE + 50, b"\x00" * 50)
    wal = reopen_with_warning(wal_root, caplog, segment, tenth)
    assert_recovered(wal_root, caplog, wal)
    assert segment.stat().st_size == SEGMENT_SIZE


def test_leftovers_after_the_end_marker_are_zeroed(
    wal_root: str, caplog: pytest.LogCaptureFixture
) -> None:
    with opened(lambda: DiskWal(wal_root, segment_size=SEGMENT_SIZE)) as wal:
        write_n(wal, 1, 10)
    [segment] = segment_paths(wal_root)
    tenth = record_offset(9, 100)
    # The tenth record's first page never reached the disk, a later page did.
    patch_file(segment, tenth, bytes(HEADER_SIZE + 100))
    patch_file(segment, tenth + 4000, b"\xaa" * 300)
    wal = reopen_with_warning(wal_root, caplog, segment, tenth)
    assert_recovered(wal_root, caplog, wal)
    assert segment.read_bytes()[tenth + 4000 : tenth + 4300] != b"\xaa" * 300


def corruption_on_open(wal_root: str, segment_size: int = SEGMENT_SIZE) -> str:
    """The message of the Corrupted that opening the region raises."""
    wal = DiskWal(wal_root, segment_size=segment_size)
    with pytest.raises(Corrupted) as raised:
        wal.open_region(REGION)
    wal.close()
    return raised.value.message


def test_corrupted_record_before_valid_ones_is_corrupted(wal_root: str) -> None:
    with opened(lambda: DiskWal(wal_root, segment_size=SEGMENT_SIZE)) as wal:
        write_n(wal, 1, 10)
    [segment] = segment_paths(wal_root)
    fifth = record_offset(4, 100)
    patch_file(segment, fifth + HEADER_SIZE + 3, b"\xff")
    for _ in range(2):
        message = corruption_on_open(wal_root)
        assert str(segment) in message
        assert f"offset {fifth}" in message


def test_bad_record_in_an_older_segment_is_corrupted(wal_root: str) -> None:
    with opened(lambda: DiskWal(wal_root, segment_size=4096)) as wal:
        write_n(wal, 1, 40, size=200)
    first = segment_paths(wal_root)[0]
    per_segment = (4096 - MAGIC_SIZE) // (HEADER_SIZE + 200)
    last = record_offset(per_segment - 1, 200)
    patch_file(first, last + HEADER_SIZE, b"\x00" * 200)
    message = corruption_on_open(wal_root, segment_size=4096)
    assert str(first) in message
    assert f"offset {last}" in message


def test_bad_magic_is_corrupted(wal_root: str) -> None:
    with opened(lambda: DiskWal(wal_root, segment_size=SEGMENT_SIZE)) as wal:
        write_n(wal, 1, 3)
    [segment] = segment_paths(wal_root)
    patch_file(segment, 0, b"NOTAWAL!")
    assert "magic" in corruption_on_open(wal_root)


def test_seqs_going_backwards_are_corrupted(wal_root: str) -> None:
    directory = region_dir(wal_root)
    directory.mkdir(parents=True)
    (directory / segment_name(1)).write_bytes(
        MAGIC + encode(1, 2, b"two") + encode(1, 1, b"one") + bytes(100)
    )
    assert "seq 1" in corruption_on_open(wal_root)


def test_damaged_marks_file_is_corrupted(wal_root: str) -> None:
    with opened(lambda: DiskWal(wal_root, segment_size=SEGMENT_SIZE)) as wal:
        write_n(wal, 1, 3)
        wal.mark_deleted(REGION, 1, 2)
    marks = region_dir(wal_root) / "marks"
    patch_file(marks, marks.stat().st_size - 1, b"\x00" if marks.read_bytes()[-1] else b"\x01")
    assert "marks" in corruption_on_open(wal_root)


def test_temporaries_of_an_interrupted_operation_are_removed(wal_root: str) -> None:
    with opened(lambda: DiskWal(wal_root, segment_size=SEGMENT_SIZE)) as wal:
        write_n(wal, 1, 3)
    directory = region_dir(wal_root)
    (directory / (segment_name(2) + ".tmp")).write_bytes(b"half a segment")
    (directory / "marks.tmp").write_bytes(b"half a marks file")
    with opened(lambda: DiskWal(wal_root, segment_size=SEGMENT_SIZE)) as wal:
        assert seqs(wal, 1) == [1, 2, 3]
        assert wal.write(REGION, 1, b"four") == 4
    assert sorted(p.name for p in directory.iterdir()) == ["LOCK", segment_name(1)]


# -- group commit, sync policy, locking ------------------------------------------------------


def test_group_commit_shares_syncs(wal_root: str) -> None:
    threads, writes = 8, 200
    start = threading.Barrier(threads)
    errors: list[BaseException] = []

    def writer(table_id: int) -> None:
        try:
            start.wait()
            for _ in range(writes):
                wal.write(REGION, table_id, b"m" * 64)
        except BaseException as e:
            errors.append(e)

    with opened(lambda: DiskWal(wal_root, segment_size=1 << 20, sync="always")) as wal:
        workers = [threading.Thread(target=writer, args=(t % 4,)) for t in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(timeout=60)
        assert not errors
        total = threads * writes
        assert sum(wal.last_seq(REGION, t) for t in range(4)) == total
        assert wal.sync_count < total // 2, f"{wal.sync_count} syncs for {total} writes"


def _held_fdatasync(monkeypatch: pytest.MonkeyPatch) -> tuple[threading.Event, threading.Event]:
    """Make fdatasync signal ``entered`` and wait for ``go`` (bounded) before syncing."""
    real_fdatasync = os.fdatasync
    entered, go = threading.Event(), threading.Event()

    def held(fd: int) -> None:
        entered.set()
        assert go.wait(10)
        real_fdatasync(fd)

    monkeypatch.setattr(os, "fdatasync", held)
    return entered, go


def _syncing(wal: DiskWal, ticket: Ticket) -> threading.Thread:
    """A writer leading the sync of ``ticket`` on a thread of its own (its error, if any,
    is the ticket's, which the test checks)."""

    def sync() -> None:
        with contextlib.suppress(Unavailable):
            wal.sync_to(REGION, ticket)

    thread = threading.Thread(target=sync, daemon=True)
    thread.start()
    return thread


def test_appends_go_on_while_a_sync_runs_and_settle_once_covered(
    wal_root: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with opened(lambda: DiskWal(wal_root, segment_size=SEGMENT_SIZE)) as wal:
        entered, go = _held_fdatasync(monkeypatch)
        first = wal.append(REGION, 1, b"first")
        leader = _syncing(wal, first)
        assert entered.wait(10)
        # The sync of the first record is running: the next appends do not wait for it.
        second = wal.append(REGION, 1, b"second")
        third = wal.append(REGION, 2, b"third")
        assert (first.seq, second.seq, third.seq) == (1, 2, 1)
        assert not (first.settled or second.settled or third.settled)
        # Not durable, not readable.
        assert seqs(wal, 1) == []
        go.set()
        leader.join(10)
        assert first.settled and not (second.settled or third.settled)
        # The next writer to wait syncs both records appended while the first round ran.
        assert wal.sync_to(REGION, third) == 1
        assert [t.wait() for t in (first, second, third)] == [1, 2, 1]
        assert seqs(wal, 1) == [1, 2] and seqs(wal, 2) == [1]
        assert wal.sync_count == 2


def test_a_failed_sync_fails_the_records_appended_while_it_ran(
    wal_root: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    entered, go = threading.Event(), threading.Event()

    def failing(fd: int) -> None:
        entered.set()
        assert go.wait(10)
        raise OSError(errno.EIO, "injected I/O error")

    with opened(lambda: DiskWal(wal_root, segment_size=SEGMENT_SIZE)) as wal:
        monkeypatch.setattr(os, "fdatasync", failing)
        first = wal.append(REGION, 1, b"first")
        leader = _syncing(wal, first)
        assert entered.wait(10)
        second = wal.append(REGION, 1, b"second")
        go.set()
        leader.join(10)
        for ticket in (first, second):
            with pytest.raises(Unavailable, match="reopen"):
                ticket.wait()
        with pytest.raises(Unavailable, match="reopen"):
            wal.append(REGION, 1, b"refused")
        monkeypatch.undo()


def test_close_makes_appended_records_durable_first(
    wal_root: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    wal = DiskWal(wal_root, segment_size=SEGMENT_SIZE)
    wal.open_region(REGION)
    entered, go = _held_fdatasync(monkeypatch)
    tickets = [wal.append(REGION, 1, b"a")]
    leader = _syncing(wal, tickets[0])
    assert entered.wait(10)
    tickets.append(wal.append(REGION, 1, b"b"))
    closer = threading.Thread(target=wal.close)
    closer.start()
    go.set()
    closer.join(10)
    leader.join(10)
    assert not closer.is_alive()
    assert [t.wait() for t in tickets] == [1, 2]
    monkeypatch.undo()
    with opened(lambda: DiskWal(wal_root, segment_size=SEGMENT_SIZE)) as reopened:
        assert seqs(reopened, 1) == [1, 2]


def test_failed_sync_fails_the_whole_group(wal_root: str, monkeypatch: pytest.MonkeyPatch) -> None:
    real_fdatasync = os.fdatasync
    entered = threading.Event()

    def failing_fdatasync(fd: int) -> None:
        entered.set()
        time.sleep(0.2)  # long enough for the other writers to queue behind this group
        raise OSError(errno.EIO, "injected I/O error")

    errors: list[BaseException] = []

    def writer(table_id: int) -> None:
        try:
            wal.write(REGION, table_id, b"doomed")
        except BaseException as e:
            errors.append(e)

    with opened(lambda: DiskWal(wal_root, segment_size=SEGMENT_SIZE)) as wal:
        assert wal.write(REGION, 1, b"durable") == 1
        monkeypatch.setattr(os, "fdatasync", failing_fdatasync)
        first = threading.Thread(target=writer, args=(1,))
        first.start()
        assert entered.wait(10)
        others = [threading.Thread(target=writer, args=(t,)) for t in (1, 2, 2, 3)]
        for worker in others:
            worker.start()
        for worker in [first, *others]:
            worker.join(timeout=10)
        assert not any(worker.is_alive() for worker in [first, *others])
        assert len(errors) == 5
        assert all(isinstance(e, Unavailable) for e in errors)
        monkeypatch.setattr(os, "fdatasync", real_fdatasync)
        # Until reopened the region refuses writes: what the failed group left is unknown.
        with pytest.raises(Unavailable, match="reopen"):
            wal.write(REGION, 1, b"refused")
        assert [r.payload for r in wal.read(REGION, 1, 1)] == [b"durable"]
        wal.close_region(REGION)
        wal.open_region(REGION)
        last = wal.last_seq(REGION, 1)
        assert wal.write(REGION, 1, b"after reopen") == last + 1
        assert seqs(wal, 1)[0] == 1


def test_sync_never_skips_syncs_but_keeps_data(wal_root: str) -> None:
    wal = DiskWal(wal_root, segment_size=SEGMENT_SIZE, sync="never")
    wal.open_region(REGION)
    write_n(wal, 1, 50)
    assert wal.sync_count == 0
    wal.close()
    assert wal.sync_count == 1
    with opened(lambda: DiskWal(wal_root, segment_size=SEGMENT_SIZE, sync="never")) as reopened:
        assert seqs(reopened, 1) == list(range(1, 51))


def test_sync_always_syncs_every_lone_write(wal_root: str) -> None:
    with opened(lambda: DiskWal(wal_root, segment_size=SEGMENT_SIZE)) as wal:
        write_n(wal, 1, 5)
        assert wal.sync_count == 5


def test_region_lock_keeps_a_second_wal_out(wal_root: str) -> None:
    first = DiskWal(wal_root, segment_size=SEGMENT_SIZE)
    second = DiskWal(wal_root, segment_size=SEGMENT_SIZE)
    try:
        first.open_region(REGION)
        with pytest.raises(Unavailable, match="lock"):
            second.open_region(REGION)
        second.open_region(REGION + 1)
        first.close_region(REGION)
        second.open_region(REGION)
        assert second.write(REGION, 1, b"x") == 1
    finally:
        first.close()
        second.close()


def test_a_table_out_of_seqs_fails_alone(wal_root: str) -> None:
    with opened(lambda: DiskWal(wal_root, segment_size=SEGMENT_SIZE)) as wal:
        wal.mark_deleted(REGION, 1, MAX_U64)
        with pytest.raises(InvalidArgument, match="no seq left"):
            wal.write(REGION, 1, b"x")
        assert wal.write(REGION, 2, b"y") == 1


def test_constructor_rejects_bad_options(wal_root: str) -> None:
    with pytest.raises(InvalidArgument):
        DiskWal(wal_root, sync="sometimes")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        DiskWal(wal_root, segment_size=16)


# -- crash -----------------------------------------------------------------------------------


@pytest.mark.long
def test_sigkill_loses_no_acknowledged_write(wal_root: str) -> None:
    rng = random.Random()
    open_wal = functools.partial(DiskWal, wal_root, segment_size=8 * 1024)
    acked: dict[int, int] = {}
    for _ in range(3):
        # Killed at a random moment after the first acknowledgements.
        killed = run_and_kill(
            open_wal, acked_before_kill=300, timeout_s=5, extra_delay_s=rng.uniform(0, 0.4)
        )
        for table_id, seq in killed.items():
            acked[table_id] = max(acked.get(table_id, 0), seq)
        with opened(open_wal, CRASH_REGION) as wal:
            for table_id, seq in acked.items():
                records = list(wal.read(CRASH_REGION, table_id, 1))
                assert [r.seq for r in records] == list(range(1, len(records) + 1))
                assert len(records) >= seq
                assert all(r.payload == crash_payload(table_id, r.seq) for r in records)
