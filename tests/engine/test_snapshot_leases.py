"""Snapshots held for outside readers (node/engine/leases.py): a held snapshot scans as it was
planned (memtable rows included, nothing flushed) after writes, a compaction and garbage
collection, which keeps its version and files while still deleting what only older versions
used; a released or run-out lease is gone."""

from __future__ import annotations

import time

import pytest

from gnomon.errors import NotFound
from node.backends import open_standalone
from node.engine.leases import SnapshotLeases
from node.engine.options import TableOptions
from node.engine.scan import ScanRequest

from .conftest import CPU, cpu_batch, rows

pytestmark = pytest.mark.unit


def test_held_snapshot_survives_compaction_and_gc(data_dir: str) -> None:
    e = open_standalone(data_dir, compaction_threads=0, gc_interval_s=0, gc_grace_ms=0)
    try:
        opts = TableOptions(max_versions=1, time_travel_ms=0, compaction_min_threshold=2)
        e.create_table("cpu", CPU, opts)
        for i in range(3):
            e.write("cpu", cpu_batch(["a", "b"], [i, i], [float(i), float(i)]))
            e.flush()
        e.write("cpu", cpu_batch(["c"], [7], [7.0]))  # stays in the memtable
        tid = e.describe("cpu").table_id
        before = rows(e.read_all("cpu"))
        key = e.leases.hold(tid, e.pin("cpu"), 60_000)
        held = e.leases.get(key, tid).version.version
        for i in range(3):
            e.write("cpu", cpu_batch(["a"], [i], [100.0 + i]))
            e.flush()
        e.compact("cpu")
        e.gc("cpu")
        assert e.manifest.versions(tid)[0].version == held  # kept, nothing older
        table = e.table("cpu")
        scan = table.scan(ScanRequest("cpu"), e.leases.get(key, tid))
        assert rows(scan.to_table()) == before
        assert e.leases.oldest(tid) == held
        assert e.leases.release(key)
        e.gc("cpu")
        assert [v.version for v in e.manifest.versions(tid)] == [e.manifest.current(tid).version]
    finally:
        e.close()


def test_lease_runs_out_unless_renewed() -> None:
    from node.engine.manifest.model import Version
    from node.engine.table import Pinned

    leases = SnapshotLeases()
    pinned = Pinned(Version(1, 3, None, 0, (), 0, ()), ())
    short = leases.hold(1, pinned, 1)
    kept = leases.hold(1, pinned, 60_000)
    time.sleep(0.05)
    with pytest.raises(NotFound, match="no held snapshot"):
        leases.get(short, 1)
    with pytest.raises(NotFound, match="another table"):
        leases.get(kept, 2)
    assert leases.renew(kept) == 3
    assert leases.oldest(1) == 3 and leases.oldest(2) is None
