"""Kill a writer with SIGKILL at random moments; every acknowledged row must be readable
exactly once after reopening, whatever the writer was doing (WAL append, flush, commit)."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

from node.backends import open_standalone

from .crash_writer import BATCH
from .killed_writer import run_until_killed

KILLS = 20


def test_sigkill_loses_no_acknowledged_row(tmp_path: Path) -> None:
    data_dir = str(tmp_path / "db")
    rng = random.Random(20261122)
    acked: set[int] = set()
    next_batch = 0
    for kill in range(KILLS):
        batches = run_until_killed(
            "tests.engine.crash_writer", data_dir, next_batch, rng.uniform(0.0, 0.6)
        )
        for b in batches:
            acked.update(range(b * BATCH, (b + 1) * BATCH))
        # The batch in flight when the kill landed may be durable without its acknowledgement;
        # the next writer starts past it so that it can only ever appear once.
        next_batch = max(batches) + 2

        engine = open_standalone(data_dir, flush_on_close=kill % 2 == 0)
        try:
            ids = Counter(engine.read_all("crash", columns=["id"]).column("id").to_pylist())
        finally:
            engine.close()
        dupes = [i for i, n in ids.items() if n > 1]
        assert not dupes, f"kill {kill}: rows read twice: {dupes[:10]}"
        missing = acked - ids.keys()
        assert not missing, f"kill {kill}: acknowledged rows lost: {sorted(missing)[:10]}"

    # Kills inside flushes and compactions leave files no version refers to: only those, and
    # garbage collection finds and removes them without touching a row.
    engine = open_standalone(data_dir, compaction_threads=0, gc_grace_ms=0, gc_interval_s=0)
    try:
        tid = engine.describe("crash").table_id
        store = engine.table("crash").store
        engine.gc()
        referenced = engine.manifest.referenced_paths(tid)
        assert {o.key for o in store.list(f"tables/{tid}/")} == referenced
        ids = Counter(engine.read_all("crash", columns=["id"]).column("id").to_pylist())
        assert not acked - ids.keys() and all(n == 1 for n in ids.values())
        merged = [v for v in engine.manifest.versions(tid) if v.commit_op == "compaction"]
        assert merged, "the writers never compacted: the test did not cover compaction commits"
    finally:
        engine.close()
