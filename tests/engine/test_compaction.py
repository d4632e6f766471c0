"""Compaction: the picker's plans, the serialisable merge task, commits racing flushes and
updates, crash leftovers, and the bound on SSTs per window after a long run of flushes."""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest

from gnomon.errors import NotFound
from node.backends import open_standalone
from node.engine.compaction.picker import pick
from node.engine.compaction.runner import run_task
from node.engine.compaction.task import CompactionTask
from node.engine.engine import Engine
from node.engine.manifest import CommitOp
from node.engine.options import TableOptions, UpdateMode
from node.engine.sst.meta import SstMeta

from .conftest import CPU, cpu_batch, rows

pytestmark = pytest.mark.unit

H = 3_600_000
KB = 1024


def _meta(path: str, size: int, min_ts: int, max_ts: int, seq: int, **kw: object) -> SstMeta:
    return SstMeta(path, size, 10, min_ts, max_ts, seq, seq, 1, **kw)  # type: ignore[arg-type]


OPTS = TableOptions(
    segment_duration_ms=H,
    compaction_min_threshold=4,
    compaction_max_threshold=6,
    compaction_target_size=1000 * KB,
)


def test_picker_merges_similar_sizes_of_one_window_only() -> None:
    w0 = [_meta(f"a{i}", 10 * KB + i, 10 + i, 20 + i, i + 1) for i in range(4)]
    w1 = [_meta(f"b{i}", 10 * KB, H + i, H + 10, 10 + i) for i in range(3)]
    big = _meta("big", 200 * KB, 5, 50, 0)
    plan = pick([*w0, *w1, big], {}, OPTS, now_ms=0)
    assert [p.window_start_ms for p in plan.picks] == [0]
    assert {f.path for f in plan.picks[0].inputs} == {f.path for f in w0}
    assert plan.picks[0].reason == "size-tiered"
    # The big file of window 0 overlaps the pick in time and holds older rows, so deletion
    # markers of the inputs may still shadow something outside them.
    assert not plan.picks[0].purge_deletes
    newer = _meta("big", 200 * KB, 5, 50, 99)
    assert pick([*w0, newer], {}, OPTS, now_ms=0).picks[0].purge_deletes


def test_picker_caps_small_files_per_window_and_leaves_full_files() -> None:
    # Sizes too far apart to form a bucket of 4, but 6 small files: the smallest 6 merge.
    sizes = [KB * 2**i for i in range(7)]
    files = [_meta(f"f{i}", s, 0, 10, i + 1) for i, s in enumerate(sizes)]
    full = [_meta(f"full{i}", 1000 * KB, 0, 10, 50 + i) for i in range(10)]
    plan = pick(files + full, {}, OPTS, now_ms=0)
    (p,) = plan.picks
    assert p.reason == "file count" and [f.path for f in p.inputs] == [f"f{i}" for i in range(6)]
    assert pick(full, {}, OPTS, now_ms=0).empty


def test_picker_merges_the_small_files_of_a_cold_window() -> None:
    cold = TableOptions(
        segment_duration_ms=H, compaction_target_size=1000 * KB, compaction_full_after_ms=H
    )
    now = 10 * H
    # Window 0: two files, last written 2 h ago; window 1: two files, one written just now.
    w0 = [
        _meta(f"a{i}", 10 * KB * (i + 1), 10, 20, i + 1, created_ms=now - 2 * H) for i in range(2)
    ]
    w1 = [
        _meta("b0", 10 * KB, H, H + 10, 5, created_ms=now - 2 * H),
        _meta("b1", 50 * KB, H, H + 10, 6, created_ms=now - 60_000),
    ]
    full = _meta("full", 1000 * KB, 10, 20, 7, created_ms=now - 2 * H)
    (p,) = pick([*w0, *w1, full], {}, cold, now_ms=now).picks
    assert p.reason == "cold window" and {f.path for f in p.inputs} == {"a0", "a1"}
    # One small file left (beside full ones) is a window at rest; 'off' never merges.
    assert pick([w0[0], full], {}, cold, now_ms=now).empty
    off = cold.updated({"compaction_full_after": "off"})
    assert off.compaction_full_after_ms is None
    assert pick([*w0, *w1], {}, off, now_ms=now).empty
    # Files of unknown age (written before ages were kept) count as old.
    unknown = [_meta(f"u{i}", 10 * KB, 10, 20, i + 1) for i in range(2)]
    assert pick(unknown, {}, cold, now_ms=now).picks[0].reason == "cold window"


def test_picker_skips_busy_files_and_removes_expired_ones() -> None:
    opts = TableOptions(segment_duration_ms=H, enable_ttl=True, ttl_ms=H)
    files = [_meta(f"f{i}", KB, 0, 10, i + 1) for i in range(4)]
    plan = pick(files, {}, opts, now_ms=2 * H)
    assert {f.path for f in plan.expired} == {f.path for f in files} and not plan.picks
    plan = pick(files, {}, OPTS, now_ms=0, busy={"f0"})
    assert not plan.picks  # three idle files are below the threshold


def test_task_is_serialisable_and_runs_from_json(tmp_path: Path, quiet: Engine) -> None:
    quiet.create_table("cpu", CPU, TableOptions(compaction_min_threshold=2))
    for v in (1.0, 2.0):
        quiet.write("cpu", cpu_batch(["a", "b"], [1, 2], [v, v]))
        quiet.flush()
    (job,) = quiet.compactor("cpu").plan()
    assert job.task is not None
    text = json.dumps(job.task.to_json())
    task = CompactionTask.from_json(json.loads(text))
    assert task == job.task
    table = quiet.table("cpu")
    staging = tmp_path / "staging"
    staging.mkdir()
    out = run_task(task, store=table.store, sst_files=table.sst_files, staging_dir=str(staging))
    assert sum(f.rows for f in out) == 2  # duplicates of (a,1) and (b,2) merged away
    quiet.compactor("cpu").release(job)


def _files(engine: Engine, name: str) -> list[SstMeta]:
    return list(engine.manifest.current(engine.describe(name).table_id).files)


def test_compact_merges_per_window_and_keeps_rows(quiet: Engine) -> None:
    quiet.create_table("cpu", CPU, TableOptions(segment_duration_ms=H, compaction_min_threshold=3))
    for i in range(6):
        hosts = [f"h{j}" for j in range(20)]
        # Every flush touches window 0 and window 1; half of the rows overwrite older ones.
        quiet.write("cpu", cpu_batch(hosts, [i % 3] * 20, [float(i)] * 20))
        quiet.write("cpu", cpu_batch(hosts, [H + i] * 20, [float(i)] * 20))
        quiet.flush()
    before = rows(quiet.read_all("cpu"))
    assert len(_files(quiet, "cpu")) == 12
    merged = quiet.compact("cpu")
    files = _files(quiet, "cpu")
    assert merged == 10 and len(files) == 2
    assert sorted(f.min_ts // H for f in files) == [0, 1]
    assert rows(quiet.read_all("cpu")) == before
    assert sum(f.rows for f in files) == len(before)
    versions = quiet.manifest.versions(quiet.describe("cpu").table_id)
    assert versions[-1].commit_op is CommitOp.COMPACTION
    assert quiet.compact("cpu") == 0


def test_append_mode_compaction_keeps_duplicates(quiet: Engine) -> None:
    quiet.create_table("log", CPU, TableOptions(update_mode=UpdateMode.APPEND))
    for _ in range(4):
        quiet.write("log", cpu_batch(["a"], [1], [1.0]))
        quiet.flush()
    assert quiet.compact("log") == 3
    assert len(quiet.read_all("log")) == 4


def test_outputs_are_cut_at_the_target_size(quiet: Engine) -> None:
    opts = TableOptions(
        compaction_min_threshold=4, compaction_target_size=12 * KB, num_rows_per_row_group=500
    )
    quiet.create_table("cpu", CPU, opts)
    n = 1250
    for part in range(8):
        hosts = [f"h{i % 50}" for i in range(n)]
        ts = [part * n + i for i in range(n)]
        quiet.write("cpu", cpu_batch(hosts, ts, [float(i) * 1.37 for i in range(n)]))
        quiet.flush()
    inputs = _files(quiet, "cpu")
    assert all(f.size < opts.compaction_target_size for f in inputs)
    quiet.compact("cpu")
    files = _files(quiet, "cpu")
    # A file is cut at the first row group whose data reaches the target.
    assert len(files) >= 2 and sum(f.rows for f in files) == 8 * n
    assert not {f.path for f in files} & {f.path for f in inputs}
    assert len(quiet.read_all("cpu")) == 8 * n


def _three_flushes(e: Engine) -> None:
    e.create_table("cpu", CPU, TableOptions(compaction_min_threshold=3))
    for i in range(3):
        e.write("cpu", cpu_batch(["a", "b"], [1, 2 + i], [float(i), float(i)]))
        e.flush()


def test_compaction_racing_a_flush_is_reordered_under_it(quiet: Engine) -> None:
    _three_flushes(quiet)
    compactor = quiet.compactor("cpu")
    (job,) = compactor.plan()
    outputs = compactor.run(job)
    quiet.write("cpu", cpu_batch(["a"], [1], [99.0]))  # overwrites a row being compacted
    quiet.flush()
    assert compactor.finish(job, outputs) == 2
    files = _files(quiet, "cpu")
    assert {f.path for f in files} == {outputs[0].path, files[-1].path} and len(files) == 2
    got = rows(quiet.read_all("cpu", columns=["host", "usage"]))
    assert got == [("a", 99.0), ("b", 0.0), ("b", 1.0), ("b", 2.0)]


def test_compaction_racing_a_flush_and_an_update_is_discarded(quiet: Engine) -> None:
    _three_flushes(quiet)
    tid = quiet.describe("cpu").table_id
    compactor = quiet.compactor("cpu")
    (job,) = compactor.plan()
    outputs = compactor.run(job)
    quiet.write("cpu", cpu_batch(["c"], [5], [5.0]))
    quiet.flush()
    before = _files(quiet, "cpu")
    # An update rewrites the file set (here: the same files) after the compaction's base.
    quiet.manifest.commit(tid, CommitOp.UPDATE)
    assert compactor.finish(job, outputs) == 0
    assert [f.path for f in _files(quiet, "cpu")] == [f.path for f in before]
    for out in outputs:
        with pytest.raises(NotFound):
            quiet.table("cpu").store.head(out.path)
    assert len(quiet.read_all("cpu")) == 5
    # Nothing is stuck busy: the next compaction takes all four files.
    assert quiet.compact("cpu") == 3


def test_two_window_jobs_from_one_plan_both_commit(quiet: Engine) -> None:
    quiet.create_table("cpu", CPU, TableOptions(segment_duration_ms=H, compaction_min_threshold=2))
    for i in range(2):
        quiet.write("cpu", cpu_batch(["a", "a"], [i, H + i], [1.0, 2.0]))
        quiet.flush()
    compactor = quiet.compactor("cpu")
    jobs = compactor.plan()
    assert len(jobs) == 2
    outputs = [compactor.run(j) for j in jobs]
    # The second commit's base is behind the first compaction: it is rebased, not discarded.
    assert [compactor.finish(j, o) for j, o in zip(jobs, outputs, strict=True)] == [1, 1]
    assert len(_files(quiet, "cpu")) == 2 and len(quiet.read_all("cpu")) == 4


def test_kill_between_outputs_and_commit_leaves_only_orphans(data_dir: str) -> None:
    e = open_standalone(data_dir, compaction_threads=0, gc_interval_s=0, gc_grace_ms=0)
    _three_flushes(e)
    compactor = e.compactor("cpu")
    (job,) = compactor.plan()
    outputs = compactor.run(job)  # written to the store, never committed: as if killed here
    e.close()
    e = open_standalone(data_dir, compaction_threads=0, gc_interval_s=0, gc_grace_ms=0)
    try:
        got = Counter(rows(e.read_all("cpu", columns=["host", "ts"])))
        assert all(n == 1 for n in got.values()) and len(got) == 4
        store = e.table("cpu").store
        assert store.head(outputs[0].path)
        report = e.gc("cpu")
        assert report.files_deleted == 1
        with pytest.raises(NotFound):
            store.head(outputs[0].path)
        assert len(e.read_all("cpu")) == 4
    finally:
        e.close()


#: The soak's compaction thresholds. With every file far below the target size, the picker
#: leaves a window at rest with fewer than ``compaction_max_threshold`` files, so a query of
#: one window opens at most SOAK_BOUND SSTs.
SOAK_OPTS = TableOptions(
    segment_duration_ms=H,
    compaction_min_threshold=4,
    compaction_max_threshold=8,
    num_rows_per_row_group=1000,
)
SOAK_BOUND = SOAK_OPTS.compaction_max_threshold - 1


def test_soak_of_many_flushes_keeps_ssts_per_window_bounded(data_dir: str) -> None:
    e = open_standalone(data_dir, compaction_threads=2, gc_interval_s=0, wal_sync="never")
    try:
        e.create_table("cpu", CPU, SOAK_OPTS)
        hosts = [f"h{j}" for j in range(10)]
        flushes = 240
        step = 60_000  # one minute per flush: 60 flushes per window, four windows
        for i in range(flushes):
            e.write("cpu", cpu_batch(hosts, [i * step] * 10, [float(i)] * 10))
            e.flush()
        assert e.wait_for_compactions(120)
        background = e.compactor("cpu").merged_away
        assert background > 0
        e.compact("cpu")  # whatever the background had not reached yet
        per_window = Counter(f.min_ts // H for f in _files(e, "cpu"))
        assert sorted(per_window) == [0, 1, 2, 3]
        assert max(per_window.values()) <= SOAK_BOUND
        scan = e.plan_scan("cpu", time_range=(H, 2 * H))
        assert len(pa.Table.from_batches(list(scan))) == 60 * 10
        assert scan.stats.ssts_read <= SOAK_BOUND
        assert len(e.read_all("cpu")) == flushes * 10
    finally:
        e.close()


def test_a_window_turning_cold_while_closed_is_merged_on_open(data_dir: str) -> None:
    opts = TableOptions(segment_duration_ms=H, compaction_full_after_ms=500)
    e = open_standalone(data_dir, gc_interval_s=0)
    e.create_table("cpu", CPU, opts)
    for part in range(2):
        e.write("cpu", cpu_batch(["a", "b"], [part * 1000, part * 1000 + 1], [1.0, 2.0]))
        e.flush()
    assert e.wait_for_compactions(30)
    # Both files are younger than 500 ms: not cold yet, and under the size-tiered threshold.
    data = [f for f in e.table("cpu").pin().version.files if f.is_data]
    assert len(data) == 2 and all(f.created_ms is not None for f in data)
    e.close()
    time.sleep(0.6)
    e = open_standalone(data_dir, gc_interval_s=0)
    try:
        assert e.wait_for_compactions(30)
        (merged,) = [f for f in e.table("cpu").pin().version.files if f.is_data]
        assert merged.rows == 4
        got = e.read_all("cpu")
        ms = got.column("ts").cast(pa.int64()).to_pylist()
        assert sorted(zip(got.column("host").to_pylist(), ms, strict=True)) == [
            ("a", 0), ("a", 1000), ("b", 1), ("b", 1001),
        ]  # fmt: skip
    finally:
        e.close()
