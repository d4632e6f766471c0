"""Kill a writer with SIGKILL at random moments; every acknowledged row must be readable
exactly once after reopening, whatever the writer was doing (WAL append, flush, commit)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from node.backends import open_standalone

from .crash_writer import BATCH
from .killed_writer import assert_each_once, kill_repeatedly

pytestmark = pytest.mark.integration

KILLS = 20


@pytest.mark.long
def test_sigkill_loses_no_acknowledged_row(tmp_path: Path) -> None:
    data_dir = str(tmp_path / "db")
    kills = kill_repeatedly(
        "tests.engine.crash_writer",
        data_dir,
        KILLS,
        random.Random(20261122),
        0.6,
        lambda b: range(b * BATCH, (b + 1) * BATCH),
    )
    acked: set[int] = set()
    for kill, acked in kills:
        engine = open_standalone(data_dir, flush_on_close=kill % 2 == 0)
        try:
            ids = engine.read_all("crash", columns=["id"]).column("id").to_pylist()
        finally:
            engine.close()
        assert_each_once(kill, ids, acked)

    # Kills inside flushes and compactions leave files no version refers to: only those, and
    # garbage collection finds and removes them without touching a row.
    engine = open_standalone(data_dir, compaction_threads=0, gc_grace_ms=0, gc_interval_s=0)
    try:
        tid = engine.describe("crash").table_id
        store = engine.table("crash").store
        engine.gc()
        referenced = engine.manifest.referenced_paths(tid)
        assert {o.key for o in store.list(f"tables/{tid}/")} == referenced
        assert_each_once(
            KILLS, engine.read_all("crash", columns=["id"]).column("id").to_pylist(), acked
        )
        merged = [v for v in engine.manifest.versions(tid) if v.commit_op == "compaction"]
        assert merged, "the writers never compacted: the test did not cover compaction commits"
    finally:
        engine.close()
