"""Retention and garbage collection: versions expire by count and age (never inside the time
travel window), files only expired versions used are deleted after the grace period, and
orphans of failed writes are found and removed."""

from __future__ import annotations

import time

import pytest

from gnomon.errors import NotFound
from node.backends import open_standalone
from node.engine.engine import Engine
from node.engine.gc import keep_from
from node.engine.options import TableOptions

from .conftest import CPU, cpu_batch

pytestmark = pytest.mark.unit


def _open(data_dir: str, **kw: object) -> Engine:
    return open_standalone(data_dir, compaction_threads=0, gc_interval_s=0, **kw)


def _flushes(e: Engine, n: int) -> None:
    for i in range(n):
        e.write("cpu", cpu_batch(["a", "b"], [i, i], [float(i), float(i)]))
        e.flush()


def test_keep_from_combines_count_age_and_pins() -> None:
    versions = [(v, 1000 * v) for v in range(10)]  # version v made at 1000*v ms
    opts = TableOptions(max_versions=3, time_travel_ms=0)
    assert keep_from(versions, opts, now_ms=10_000, pinned=None) == 7
    # Time travel back to 4500 needs version 4 (current then) and everything after it.
    opts = TableOptions(max_versions=3, time_travel_ms=5_500)
    assert keep_from(versions, opts, now_ms=10_000, pinned=None) == 4
    assert keep_from(versions, opts, now_ms=10_000, pinned=2) == 2
    assert keep_from(versions[5:], TableOptions(max_versions=100), now_ms=0, pinned=None) == 5


def test_versions_expire_and_their_files_are_deleted(data_dir: str) -> None:
    e = _open(data_dir, gc_grace_ms=0)
    try:
        opts = TableOptions(max_versions=2, time_travel_ms=0, compaction_min_threshold=2)
        e.create_table("cpu", CPU, opts)
        _flushes(e, 4)
        tid = e.describe("cpu").table_id
        old_files = {f.path for f in e.manifest.current(tid).files}
        e.compact("cpu")
        head = e.manifest.current(tid).version
        assert len(e.manifest.versions(tid)) == head + 1
        report = e.gc("cpu")
        assert report.versions_expired == head + 1 - 2
        assert [v.version for v in e.manifest.versions(tid)] == [head - 1, head]
        with pytest.raises(NotFound):
            e.read_all("cpu", version=1)
        # Version head-1 (the last flush) still refers to the compacted files.
        assert report.files_deleted == 0
        e.write("cpu", cpu_batch(["c"], [9], [9.0]))
        e.flush()
        report = e.gc("cpu")
        assert report.files_deleted == len(old_files) and report.bytes_deleted > 0
        store = e.table("cpu").store
        left = {o.key for o in store.list(f"tables/{tid}/")}
        assert not left & old_files
        assert left == e.manifest.referenced_paths(tid)
        assert len(e.read_all("cpu")) == 9
        at = e.manifest.versions(tid)[0]
        assert len(e.read_all("cpu", timestamp_ms=at.timestamp_ms)) == 8
    finally:
        e.close()


def test_time_travel_window_and_grace_period_protect(data_dir: str) -> None:
    e = _open(data_dir, gc_grace_ms=3_600_000)
    try:
        e.create_table("cpu", CPU, TableOptions(max_versions=1, compaction_min_threshold=2))
        _flushes(e, 3)
        e.compact("cpu")
        tid = e.describe("cpu").table_id
        n = len(e.manifest.versions(tid))
        # Every version is younger than the default one-hour time travel window.
        report = e.gc("cpu")
        assert report.versions_expired == 0 and report.files_deleted == 0
        assert len(e.manifest.versions(tid)) == n
        assert len(e.read_all("cpu", version=1)) == 2
        e.alter_table("cpu", options={"time_travel": "0ms"})
        report = e.gc("cpu")
        assert report.versions_expired == n - 1
        # The files are unreferenced now, but younger than the grace period.
        assert report.files_deleted == 0
    finally:
        e.close()


def test_orphans_of_failed_writes_are_removed(data_dir: str) -> None:
    e = _open(data_dir, gc_grace_ms=0)
    try:
        e.create_table("cpu", CPU)
        _flushes(e, 1)
        tid = e.describe("cpu").table_id
        store = e.table("cpu").store
        orphan = f"tables/{tid}/0/deadbeef.parquet"
        store.put(orphan, b"left by a flush that died before its commit")
        assert e.gc().files_deleted == 1
        with pytest.raises(NotFound):
            store.head(orphan)
        assert len(e.read_all("cpu")) == 2
    finally:
        e.close()


def test_background_gc_runs(data_dir: str) -> None:
    e = open_standalone(data_dir, compaction_threads=0, gc_interval_s=0.05, gc_grace_ms=0)
    try:
        e.create_table("cpu", CPU)
        tid = e.describe("cpu").table_id
        store = e.table("cpu").store
        store.put(f"tables/{tid}/0/orphan.parquet", b"x")
        deadline = time.monotonic() + 10
        while list(store.list(f"tables/{tid}/")) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not list(store.list(f"tables/{tid}/"))
    finally:
        e.close()
