"""Backend-agnostic contract tests of :class:`gnomon.wal.api.Wal`.

A backend runs them by subclassing :class:`WalContract` in a test module (a ``Test*`` name, so
pytest collects it) and providing a ``wal_factory`` fixture: a callable returning a new Wal over
the same persistent storage on every call, so the tests can close a WAL and reopen the data.
Every test closes the WALs it opens. ``tests/wal/test_disk.py`` is the example::

    class TestDiskWalContract(WalContract):
        pass
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import pytest

from gnomon.errors import Closed, Conflict, InvalidArgument, NotFound
from gnomon.wal.api import Wal, WalRecord

WalFactory = Callable[[], Wal]
W = TypeVar("W", bound=Wal)

REGION = 7


@contextmanager
def opened(factory: Callable[[], W], *regions: int) -> Iterator[W]:
    """A WAL from ``factory`` with ``regions`` (default: REGION) open, closed on exit."""
    wal = factory()
    try:
        for region in regions or (REGION,):
            wal.open_region(region)
        yield wal
    finally:
        wal.close()


def seqs(wal: Wal, table_id: int, from_seq: int = 0, region: int = REGION) -> list[int]:
    return [record.seq for record in wal.read(region, table_id, from_seq)]


def payload(table_id: int, seq: int) -> bytes:
    """A payload that names its record, so reads can be checked against writes."""
    return f"table {table_id} record {seq}".encode()


class WalContract:
    def test_seqs_start_at_one_and_increase_per_table(self, wal_factory: WalFactory) -> None:
        with opened(wal_factory) as wal:
            assert wal.last_seq(REGION, 1) == 0
            assert [wal.write(REGION, 1, payload(1, n)) for n in range(1, 4)] == [1, 2, 3]
            assert wal.write(REGION, 2, payload(2, 1)) == 1
            assert wal.write(REGION, 1, payload(1, 4)) == 4
            assert wal.write(REGION, 2, payload(2, 2)) == 2
            assert wal.last_seq(REGION, 1) == 4
            assert wal.last_seq(REGION, 2) == 2
            assert wal.last_seq(REGION, 3) == 0

    def test_read_returns_records_in_order_from_any_seq(self, wal_factory: WalFactory) -> None:
        with opened(wal_factory) as wal:
            for n in range(1, 51):
                wal.write(REGION, 1, payload(1, n))
                wal.write(REGION, 2, payload(2, n))
            assert list(wal.read(REGION, 1, 1)) == [
                WalRecord(1, n, payload(1, n)) for n in range(1, 51)
            ]
            assert seqs(wal, 1, 0) == list(range(1, 51))
            assert seqs(wal, 2, 37) == list(range(37, 51))
            assert seqs(wal, 2, 50) == [50]
            assert seqs(wal, 2, 51) == []
            assert seqs(wal, 3, 1) == []

    def test_write_is_readable_once_acknowledged(self, wal_factory: WalFactory) -> None:
        with opened(wal_factory) as wal:
            for n in range(1, 21):
                seq = wal.write(REGION, 1, payload(1, n))
                assert list(wal.read(REGION, 1, seq)) == [WalRecord(1, seq, payload(1, n))]

    def test_reopen_keeps_records_and_seqs(self, wal_factory: WalFactory) -> None:
        with opened(wal_factory) as wal:
            for n in range(1, 31):
                wal.write(REGION, 1, payload(1, n))
            wal.write(REGION, 2, payload(2, 1))
        with opened(wal_factory) as wal:
            assert wal.last_seq(REGION, 1) == 30
            assert wal.last_seq(REGION, 2) == 1
            assert [r.payload for r in wal.read(REGION, 1, 1)] == [
                payload(1, n) for n in range(1, 31)
            ]
            assert wal.write(REGION, 1, payload(1, 31)) == 31
            assert wal.write(REGION, 2, payload(2, 2)) == 2
        with opened(wal_factory) as wal:
            assert seqs(wal, 1) == list(range(1, 32))
            assert seqs(wal, 2) == [1, 2]

    def test_close_region_keeps_data_and_reopens(self, wal_factory: WalFactory) -> None:
        with opened(wal_factory) as wal:
            wal.write(REGION, 1, payload(1, 1))
            wal.close_region(REGION)
            with pytest.raises(NotFound):
                wal.write(REGION, 1, payload(1, 2))
            wal.open_region(REGION)
            assert seqs(wal, 1) == [1]
            assert wal.write(REGION, 1, payload(1, 2)) == 2

    def test_open_region_twice_is_a_no_op(self, wal_factory: WalFactory) -> None:
        with opened(wal_factory) as wal:
            wal.write(REGION, 1, payload(1, 1))
            wal.open_region(REGION)
            assert wal.write(REGION, 1, payload(1, 2)) == 2
            assert seqs(wal, 1) == [1, 2]

    def test_open_region_at_an_epoch(self, wal_factory: WalFactory) -> None:
        wal = wal_factory()
        try:
            wal.open_region(REGION, 3)
            wal.write(REGION, 1, payload(1, 1))
            wal.open_region(REGION, 3)  # the same epoch: a no-op
            with pytest.raises(Conflict, match="epoch 3"):
                wal.open_region(REGION, 4)
            assert wal.write(REGION, 1, payload(1, 2)) == 2
            for bad in (-1, 1 << 64, "4", True, None):
                with pytest.raises(InvalidArgument, match="epoch"):
                    wal.open_region(REGION + 1, bad)  # type: ignore[arg-type]
            wal.close_region(REGION)
            # A later epoch after closing: the region and its records carry over.
            wal.open_region(REGION, 4)
            assert seqs(wal, 1) == [1, 2]
            assert wal.write(REGION, 1, payload(1, 3)) == 3
        finally:
            wal.close()

    def test_mark_deleted_hides_records(self, wal_factory: WalFactory) -> None:
        with opened(wal_factory) as wal:
            for n in range(1, 11):
                wal.write(REGION, 1, payload(1, n))
                wal.write(REGION, 2, payload(2, n))
            wal.mark_deleted(REGION, 1, 6)
            assert seqs(wal, 1) == [7, 8, 9, 10]
            assert seqs(wal, 1, 3) == [7, 8, 9, 10]
            assert seqs(wal, 1, 9) == [9, 10]
            assert seqs(wal, 2) == list(range(1, 11))
            assert wal.last_seq(REGION, 1) == 10
            assert wal.write(REGION, 1, payload(1, 11)) == 11

    def test_mark_deleted_persists_across_reopen(self, wal_factory: WalFactory) -> None:
        with opened(wal_factory) as wal:
            for n in range(1, 11):
                wal.write(REGION, 1, payload(1, n))
            wal.mark_deleted(REGION, 1, 4)
        with opened(wal_factory) as wal:
            assert seqs(wal, 1) == [5, 6, 7, 8, 9, 10]
            assert wal.last_seq(REGION, 1) == 10
            wal.mark_deleted(REGION, 1, 10)
            assert seqs(wal, 1) == []
        with opened(wal_factory) as wal:
            assert seqs(wal, 1) == []
            assert wal.last_seq(REGION, 1) == 10
            assert wal.write(REGION, 1, payload(1, 11)) == 11
            assert seqs(wal, 1) == [11]

    def test_mark_deleted_never_lowers_the_floor(self, wal_factory: WalFactory) -> None:
        with opened(wal_factory) as wal:
            for n in range(1, 11):
                wal.write(REGION, 1, payload(1, n))
            wal.mark_deleted(REGION, 1, 8)
            wal.mark_deleted(REGION, 1, 3)
            wal.mark_deleted(REGION, 1, 0)
            assert seqs(wal, 1) == [9, 10]

    def test_seqs_continue_above_a_floor_without_records(self, wal_factory: WalFactory) -> None:
        with opened(wal_factory) as wal:
            wal.mark_deleted(REGION, 1, 100)
            assert wal.last_seq(REGION, 1) == 100
            assert seqs(wal, 1) == []
        with opened(wal_factory) as wal:
            assert wal.last_seq(REGION, 1) == 100
            assert wal.write(REGION, 1, payload(1, 101)) == 101
            wal.write(REGION, 2, payload(2, 1))
            # Floors above the last record also move the next seq, even on a table with data.
            wal.mark_deleted(REGION, 2, 500)
            assert wal.write(REGION, 2, payload(2, 501)) == 501
        with opened(wal_factory) as wal:
            assert seqs(wal, 1) == [101]
            assert seqs(wal, 2) == [501]
            assert wal.write(REGION, 1, payload(1, 102)) == 102
            assert wal.write(REGION, 2, payload(2, 502)) == 502

    def test_concurrent_writers_get_unique_gap_free_seqs(self, wal_factory: WalFactory) -> None:
        threads, writes, tables = 8, 60, 3
        acked: list[list[tuple[int, int, bytes]]] = [[] for _ in range(threads)]
        errors: list[BaseException] = []
        start = threading.Barrier(threads)

        def writer(index: int) -> None:
            try:
                start.wait()
                for n in range(writes):
                    table_id = (index + n) % tables + 1
                    data = f"writer {index} write {n}".encode()
                    acked[index].append((table_id, wal.write(REGION, table_id, data), data))
            except BaseException as e:
                errors.append(e)

        with opened(wal_factory) as wal:
            workers = [threading.Thread(target=writer, args=(i,)) for i in range(threads)]
            for worker in workers:
                worker.start()
            for worker in workers:
                worker.join(timeout=60)
            assert not errors
            assert not any(worker.is_alive() for worker in workers)
            for index in range(threads):
                # Each writer's own writes were acknowledged in order, so their seqs ascend.
                for table_id in range(1, tables + 1):
                    mine = [seq for t, seq, _ in acked[index] if t == table_id]
                    assert mine == sorted(mine)
            expected = {(t, seq): data for writes_of in acked for t, seq, data in writes_of}
            assert len(expected) == threads * writes
            for table_id in range(1, tables + 1):
                count = sum(1 for t, _ in expected if t == table_id)
                records = list(wal.read(REGION, table_id, 1))
                assert [r.seq for r in records] == list(range(1, count + 1))
                assert all(r.payload == expected[(table_id, r.seq)] for r in records)
                assert wal.last_seq(REGION, table_id) == count
        with opened(wal_factory) as wal:
            for table_id in range(1, tables + 1):
                assert {(table_id, r.seq): r.payload for r in wal.read(REGION, table_id, 1)} == {
                    key: data for key, data in expected.items() if key[0] == table_id
                }

    def test_reads_run_alongside_writes(self, wal_factory: WalFactory) -> None:
        stop = threading.Event()
        acked = [0]
        problems: list[str] = []

        def reader(wal: Wal) -> None:
            while not stop.is_set():
                floor = acked[0]
                got = seqs(wal, 1)
                if got != list(range(1, len(got) + 1)) or len(got) < floor:
                    problems.append(f"read {len(got)} records after {floor} were acknowledged")
                # A reader spinning on the GIL would only slow the writer down.
                time.sleep(0.001)

        with opened(wal_factory) as wal:
            thread = threading.Thread(target=reader, args=(wal,))
            thread.start()
            try:
                for n in range(1, 201):
                    acked[0] = wal.write(REGION, 1, payload(1, n))
            finally:
                stop.set()
                thread.join(timeout=60)
            assert not problems
            assert seqs(wal, 1) == list(range(1, 201))

    def test_empty_payload(self, wal_factory: WalFactory) -> None:
        with opened(wal_factory) as wal:
            assert wal.write(REGION, 1, b"") == 1
            assert wal.write(REGION, 1, b"x") == 2
            assert wal.write(REGION, 1, b"") == 3
        with opened(wal_factory) as wal:
            assert [r.payload for r in wal.read(REGION, 1, 1)] == [b"", b"x", b""]

    def test_large_payload(self, wal_factory: WalFactory) -> None:
        big = bytes(range(256)) * (3 * 4096 + 17)
        with opened(wal_factory) as wal:
            assert wal.write(REGION, 1, b"before") == 1
            assert wal.write(REGION, 1, big) == 2
            assert wal.write(REGION, 1, b"after") == 3
            assert [r.payload for r in wal.read(REGION, 1, 2)] == [big, b"after"]
        with opened(wal_factory) as wal:
            assert [r.payload for r in wal.read(REGION, 1, 1)] == [b"before", big, b"after"]

    def test_regions_are_isolated(self, wal_factory: WalFactory) -> None:
        with opened(wal_factory, 1, 2) as wal:
            assert wal.write(1, 5, b"one") == 1
            assert wal.write(2, 5, b"two") == 1
            assert wal.write(2, 5, b"two again") == 2
            wal.mark_deleted(1, 5, 1)
            assert [r.payload for r in wal.read(2, 5, 1)] == [b"two", b"two again"]
            assert seqs(wal, 5, region=1) == []
            assert wal.last_seq(1, 5) == 1
            assert wal.last_seq(2, 5) == 2
        with opened(wal_factory, 2) as wal:
            assert seqs(wal, 5, region=2) == [1, 2]
            with pytest.raises(NotFound):
                wal.write(1, 5, b"region 1 is not open")

    def test_unopened_region_is_not_found(self, wal_factory: WalFactory) -> None:
        with opened(wal_factory) as wal:
            with pytest.raises(NotFound):
                wal.write(REGION + 1, 1, b"x")
            with pytest.raises(NotFound):
                wal.read(REGION + 1, 1, 1)
            with pytest.raises(NotFound):
                wal.last_seq(REGION + 1, 1)
            with pytest.raises(NotFound):
                wal.mark_deleted(REGION + 1, 1, 1)

    def test_invalid_arguments(self, wal_factory: WalFactory) -> None:
        with opened(wal_factory) as wal:
            with pytest.raises(InvalidArgument):
                wal.write(REGION, -1, b"x")
            with pytest.raises(InvalidArgument):
                wal.write(REGION, 1, "not bytes")  # type: ignore[arg-type]
            with pytest.raises(InvalidArgument):
                wal.read(REGION, 1, -1)
            with pytest.raises(InvalidArgument):
                wal.mark_deleted(REGION, 1, -1)
            with pytest.raises(InvalidArgument):
                wal.open_region(-1)
            # A rejected request takes no seq.
            assert wal.write(REGION, 1, b"x") == 1

    def test_closed_after_close(self, wal_factory: WalFactory) -> None:
        wal = wal_factory()
        wal.open_region(REGION)
        wal.write(REGION, 1, b"x")
        wal.close()
        with pytest.raises(Closed):
            wal.write(REGION, 1, b"y")
        with pytest.raises(Closed):
            wal.read(REGION, 1, 1)
        with pytest.raises(Closed):
            wal.mark_deleted(REGION, 1, 1)
        with pytest.raises(Closed):
            wal.last_seq(REGION, 1)
        with pytest.raises(Closed):
            wal.open_region(REGION)
        with pytest.raises(Closed):
            wal.close_region(REGION)
        wal.close()
        with opened(wal_factory) as wal:
            assert seqs(wal, 1) == [1]
