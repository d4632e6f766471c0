"""The revision protocol of batch ingest: staged rows stay invisible, revisions publish in
order in one manifest commit each, cancelling removes every file, expired owners are
cancelled, overwrites replace a time range, and a restart neither loses nor doubles a job."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterator
from typing import cast

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gnomon.errors import InvalidArgument, NotFound
from node.backends import open_standalone
from node.engine.engine import Engine
from node.engine.manifest import CommitOp
from node.engine.options import TableOptions
from node.engine.revisions import REVISION_ATTEMPT_FILES, RevisionState
from node.engine.schema import SEQ
from node.engine.sst.writer import ARROW_SCHEMA_KEY, SERIES_KEY

from .conftest import CPU, cpu_batch, rows

pytestmark = pytest.mark.unit

HOUR = 3_600_000


@pytest.fixture
def eng(data_dir: str) -> Iterator[Engine]:
    e = open_standalone(data_dir, compaction_threads=0, gc_interval_s=0, gc_grace_ms=0)
    e.create_table("cpu", CPU)
    yield e
    e.close()


def _batch(host: str, n: int, start: int = 0, usage: float = 1.0) -> pa.Table:
    return cpu_batch([host] * n, [start + i * 1000 for i in range(n)], [usage] * n)


def _count(e: Engine, **kw: object) -> int:
    return e.read_all("cpu", **kw).num_rows  # type: ignore[arg-type]


def _keys(e: Engine) -> set[str]:
    return {o.key for o in e._store.list("tables/")}


def test_staged_rows_are_invisible_until_one_commit_publishes_them(eng: Engine) -> None:
    rev = eng.revisions.reserve("cpu", owner="job-1")
    assert rev.state is RevisionState.RESERVED
    eng.revisions.stage("cpu", rev.revision, _batch("a", 10))
    eng.revisions.stage("cpu", rev.revision, _batch("b", 10, start=2 * HOUR * 1000))
    assert _count(eng) == 0
    before = eng.manifest.current(eng.table("cpu").table_id).version
    done = eng.revisions.commit("cpu", rev.revision)
    assert done.state is RevisionState.LATEST
    after = eng.manifest.current(eng.table("cpu").table_id)
    assert after.version == before + 1
    assert _count(eng) == 20
    assert eng.revisions.latest("cpu") == rev.revision
    assert eng.revisions.open_revisions("cpu") == []


def test_revisions_publish_in_order(eng: Engine) -> None:
    r1 = eng.revisions.reserve("cpu")
    r2 = eng.revisions.reserve("cpu")
    assert r2.revision == r1.revision + 1 and r2.seq > r1.seq
    eng.revisions.stage("cpu", r1.revision, _batch("a", 5, usage=1.0))
    eng.revisions.stage("cpu", r2.revision, _batch("a", 5, usage=2.0))
    # r2 finishes first: it waits for r1.
    assert eng.revisions.commit("cpu", r2.revision).state is RevisionState.PENDING
    assert _count(eng) == 0
    table_id = eng.table("cpu").table_id
    v0 = eng.manifest.current(table_id).version
    assert eng.revisions.commit("cpu", r1.revision).state is RevisionState.LATEST
    assert eng.revisions.get("cpu", r2.revision).state is RevisionState.LATEST
    # Two versions, r1's first; r2's rows (same keys, later revision) win.
    assert eng.manifest.current(table_id).version == v0 + 2
    assert rows(eng.read_all("cpu", version=v0 + 1), "usage") == [(1.0,)] * 5
    assert rows(eng.read_all("cpu"), "usage") == [(2.0,)] * 5


def test_cancel_removes_every_file_and_releases_later_revisions(eng: Engine) -> None:
    keys = _keys(eng)
    r1 = eng.revisions.reserve("cpu")
    r2 = eng.revisions.reserve("cpu")
    eng.revisions.stage("cpu", r1.revision, _batch("a", 50))
    eng.revisions.stage("cpu", r1.revision, _batch("a", 50, start=5 * HOUR * 1000))
    eng.revisions.stage("cpu", r2.revision, _batch("b", 7))
    assert len(_keys(eng) - keys) == 3
    eng.revisions.commit("cpu", r2.revision)
    eng.revisions.abort("cpu", r1.revision)
    assert rows(eng.read_all("cpu"), "host") == [("b",)] * 7
    assert eng.revisions.get("cpu", r1.revision).state is RevisionState.CANCELLED
    with pytest.raises(NotFound):
        eng.revisions.stage("cpu", r1.revision, _batch("a", 1))
    assert eng.table("cpu").manifest.referenced_paths(eng.table("cpu").table_id) == (
        _keys(eng) - keys
    )


def test_a_commit_naming_attempts_publishes_theirs_and_deletes_the_rest(eng: Engine) -> None:
    keys = _keys(eng)
    rev = eng.revisions.reserve("cpu", owner="spark-job")
    # A task's first attempt failed midway after staging some rows; its retry and the other
    # task staged everything, and a speculative copy of the other task lost.
    eng.revisions.stage("cpu", rev.revision, _batch("a", 5), attempt="a-first")
    eng.revisions.stage("cpu", rev.revision, _batch("a", 10), attempt="a-retry")
    eng.revisions.stage("cpu", rev.revision, _batch("b", 10, start=3 * HOUR * 1000), attempt="b")
    eng.revisions.stage("cpu", rev.revision, _batch("b", 10, start=3 * HOUR * 1000), attempt="b2")
    eng.revisions.stage("cpu", rev.revision, _batch("c", 1))  # outside any attempt
    table_id = eng.table("cpu").table_id
    staged = eng.revisions.staged_paths(table_id)
    assert len(staged) == 5 and staged == _keys(eng) - keys
    eng.gc()  # grace 0: the revision's records keep every attempt's files
    assert _keys(eng) - keys == staged

    done = eng.revisions.commit("cpu", rev.revision, attempts=["a-retry", "b"])
    assert done.state is RevisionState.LATEST
    assert rows(eng.read_all("cpu"), "host") == [("a",)] * 10 + [("b",)] * 10
    # The other attempts' files are gone at once, not left to garbage collection.
    assert eng.revisions.staged_paths(table_id) == set()
    assert _keys(eng) - keys == eng.table("cpu").manifest.referenced_paths(table_id)
    assert len(_keys(eng) - keys) == 2
    # An attempt still running when its job committed stages nothing more.
    with pytest.raises(NotFound):
        eng.revisions.stage("cpu", rev.revision, _batch("a", 5), attempt="a-first")
    assert len(_keys(eng) - keys) == 2


def test_a_commit_naming_no_attempt_publishes_everything_staged(eng: Engine) -> None:
    rev = eng.revisions.reserve("cpu")
    eng.revisions.stage("cpu", rev.revision, _batch("a", 3), attempt="one")
    eng.revisions.stage("cpu", rev.revision, _batch("b", 4))
    eng.revisions.commit("cpu", rev.revision)
    assert _count(eng) == 7
    # Naming an empty set of attempts publishes nothing (a job whose tasks sent no rows).
    empty = eng.revisions.reserve("cpu")
    eng.revisions.stage("cpu", empty.revision, _batch("c", 2), attempt="failed")
    eng.revisions.commit("cpu", empty.revision, attempts=[])
    assert _count(eng) == 7


def test_abort_removes_every_attempts_files(eng: Engine) -> None:
    keys = _keys(eng)
    rev = eng.revisions.reserve("cpu")
    eng.revisions.stage("cpu", rev.revision, _batch("a", 3), attempt="one")
    eng.revisions.stage("cpu", rev.revision, _batch("b", 3))
    eng.revisions.abort("cpu", rev.revision)
    assert _keys(eng) == keys
    assert eng.revisions.staged_paths(eng.table("cpu").table_id) == set()


def test_failed_stage_leaves_nothing(eng: Engine) -> None:
    keys = _keys(eng)
    rev = eng.revisions.reserve("cpu")
    with pytest.raises(InvalidArgument):
        eng.revisions.stage("cpu", rev.revision, pa.table({"nope": [1]}))
    eng.revisions.abort("cpu", rev.revision)
    assert _keys(eng) == keys


def test_expired_revisions_are_cancelled_and_gc_keeps_open_ones(eng: Engine) -> None:
    keys = _keys(eng)
    # The short lease last: every reserve sweeps first, and would cancel it already when
    # the machine takes over a millisecond between the two.
    live = eng.revisions.reserve("cpu")
    dead = eng.revisions.reserve("cpu", lease_ms=1)
    eng.revisions.stage("cpu", live.revision, _batch("b", 3))
    time.sleep(0.01)
    assert eng.revisions.sweep() == 1
    with pytest.raises(NotFound):
        eng.revisions.commit("cpu", dead.revision)
    eng.gc()  # grace 0: only the revision record protects the staged file
    assert len(_keys(eng) - keys) == 1
    eng.revisions.commit("cpu", live.revision)
    assert _count(eng) == 3


def test_overwrite_replaces_a_time_range_with_one_update(eng: Engine) -> None:
    eng.write("cpu", _batch("a", 10, start=0))  # ts 0..9 s
    eng.flush()
    rev = eng.revisions.reserve("cpu", mode="overwrite", time_range=(3000, 6000))
    with pytest.raises(InvalidArgument, match="outside the overwritten time range"):
        eng.revisions.stage("cpu", rev.revision, _batch("a", 1, start=7000))
    eng.revisions.stage("cpu", rev.revision, _batch("z", 2, start=3000, usage=9.0))
    eng.revisions.commit("cpu", rev.revision)
    got = rows(eng.read_all("cpu"), "host", "ts", "usage")
    assert [(h, cast(dt.datetime, ts).timestamp() * 1000) for h, ts, _ in got if h == "a"] == [
        ("a", float(t)) for t in (0, 1000, 2000, 6000, 7000, 8000, 9000)
    ]
    assert [u for h, _, u in got if h == "z"] == [9.0, 9.0]
    v = eng.manifest.current(eng.table("cpu").table_id)
    assert v.commit_op is not None and v.commit_op.value == "update"


def test_restart_keeps_open_revisions_and_finishes_interrupted_publish(data_dir: str) -> None:
    e = open_standalone(data_dir, compaction_threads=0, gc_interval_s=0)
    e.create_table("cpu", CPU)
    r1 = e.revisions.reserve("cpu")
    e.revisions.stage("cpu", r1.revision, _batch("a", 4))
    r2 = e.revisions.reserve("cpu")
    e.revisions.stage("cpu", r2.revision, _batch("b", 4))
    # r2: a crash after its manifest commit, before its rows were removed.
    e.revisions.commit("cpu", r2.revision)
    files = e.revisions._files(e.table("cpu").table_id, r2.revision)
    table = e.table("cpu")
    table.manifest.commit(table.table_id, CommitOp.APPEND, add=files)
    e.close()

    e = open_standalone(data_dir, compaction_threads=0, gc_interval_s=0)
    try:
        assert [r.revision for r in e.revisions.open_revisions("cpu")] == [1, 2]
        assert rows(e.read_all("cpu"), "host") == [("b",)] * 4
        e.revisions.commit("cpu", r1.revision)
        assert rows(e.read_all("cpu"), "host") == [("a",)] * 4 + [("b",)] * 4
        assert e.revisions.open_revisions("cpu") == []
        assert e.revisions.reserve("cpu").revision == 3
    finally:
        e.close()


def test_a_catalog_from_before_attempts_loads_and_commits(data_dir: str) -> None:
    e = open_standalone(data_dir, compaction_threads=0, gc_interval_s=0)
    e.create_table("cpu", CPU)
    rev = e.revisions.reserve("cpu")
    e.revisions.stage("cpu", rev.revision, _batch("a", 4))
    # What a node that knew no attempts left: its revision tables without the attempts'.
    e._meta.drop(REVISION_ATTEMPT_FILES.name)
    e.close()

    e = open_standalone(data_dir, compaction_threads=0, gc_interval_s=0)
    try:
        assert [r.revision for r in e.revisions.open_revisions("cpu")] == [rev.revision]
        e.revisions.commit("cpu", rev.revision)
        assert rows(e.read_all("cpu"), "host") == [("a",)] * 4
    finally:
        e.close()


def test_staged_ssts_read_as_ssts_written_from_plain_strings(eng: Engine) -> None:
    """Staging writes string tags from their dictionaries; the files must not show it: the
    same Arrow schema in the footer, rows, tag statistics and series directory as the
    SSTs a flush writes of the same rows."""
    options = TableOptions(num_rows_per_row_group=100)
    for name in ("staged", "flushed"):
        eng.create_table(name, CPU, options)
    n = 1000
    data = pa.table(
        {
            "host": [f"h{i % 7}" for i in range(n)],
            "region": [("eu", "us", "ap")[i % 3] for i in range(n)],
            "usage": pa.array([float(i) for i in range(n)], pa.float64()),
            "ts": pa.array([i // 7 * 1000 for i in range(n)], pa.timestamp("ms")),
        }
    )
    rev = eng.revisions.reserve("staged")
    eng.revisions.stage("staged", rev.revision, data)
    eng.revisions.commit("staged", rev.revision)
    eng.write("flushed", data)
    eng.flush("flushed")
    files = []
    for name in ("staged", "flushed"):
        table = eng.table(name)
        (sst,) = [f for f in eng.manifest.current(table.table_id).files if f.is_data]
        with table.sst_files.pinned(sst.path) as local:
            files.append((pq.ParquetFile(local), pq.read_table(local)))
    (staged, staged_rows), (flushed, flushed_rows) = files
    kv_staged, kv_flushed = staged.metadata.metadata or {}, flushed.metadata.metadata or {}
    assert kv_staged[ARROW_SCHEMA_KEY.encode()] == kv_flushed[ARROW_SCHEMA_KEY.encode()]
    assert kv_staged[SERIES_KEY.encode()] == kv_flushed[SERIES_KEY.encode()]
    assert staged.schema_arrow == flushed.schema_arrow == CPU.storage_arrow()
    assert staged_rows.drop_columns([SEQ]) == flushed_rows.drop_columns([SEQ])
    assert staged.metadata.num_row_groups == flushed.metadata.num_row_groups == 10
    for rg in range(10):
        for col in (CPU.names.index("host"), CPU.names.index("region")):
            a = staged.metadata.row_group(rg).column(col).statistics
            b = flushed.metadata.row_group(rg).column(col).statistics
            assert a is not None and b is not None
            assert (a.min, a.max, a.null_count) == (b.min, b.max, b.null_count)
