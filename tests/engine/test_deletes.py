"""Row deletions and range tombstones: hidden at once, durable across flush and restart, never
resurrected by compaction (partial or whole), and purged once nothing older can be shadowed."""

from __future__ import annotations

import pyarrow as pa
import pytest

from gnomon.errors import InvalidArgument, SchemaMismatch
from node.backends import open_standalone
from node.engine.engine import Engine
from node.engine.options import TableOptions, UpdateMode
from node.engine.schema import Column, ColumnType, Schema

from .conftest import CPU, cpu_batch, rows

pytestmark = pytest.mark.unit

H = 3_600_000


def _keys(hosts: list[str], ts: list[int], region: str = "eu") -> pa.Table:
    return pa.table(
        {
            "host": hosts,
            "region": [region] * len(hosts),
            "ts": pa.array(ts, pa.timestamp("ms")),
        }
    )


def _visible(e: Engine, name: str = "cpu") -> list[tuple[object, ...]]:
    t = e.read_all(name, columns=["host", "ts", "usage"])
    ts = t.column("ts").cast(pa.int64()).to_pylist()
    return sorted(zip(t.column("host").to_pylist(), ts, t.column("usage").to_pylist(), strict=True))


def _files(e: Engine, name: str = "cpu") -> list:  # type: ignore[type-arg]
    return list(e.manifest.current(e.describe(name).table_id).files)


def test_row_delete_hides_rows_in_memtable_and_ssts(quiet: Engine) -> None:
    quiet.create_table("cpu", CPU)
    quiet.write("cpu", cpu_batch(["a", "b", "c"], [1, 1, 1], [1.0, 2.0, 3.0]))
    quiet.flush()
    quiet.write("cpu", cpu_batch(["a", "b"], [2, 2], [4.0, 5.0]))
    assert quiet.delete_rows("cpu", _keys(["a", "b", "zz"], [1, 2, 9])) == 3
    expected = [("b", 1, 2.0), ("c", 1, 3.0), ("a", 2, 4.0)]
    assert _visible(quiet) == sorted(expected)
    quiet.flush()
    assert _visible(quiet) == sorted(expected)
    # A later write of a deleted key is newer than the deletion.
    quiet.write("cpu", cpu_batch(["a"], [1], [9.0]))
    assert ("a", 1, 9.0) in _visible(quiet)


def test_deletes_survive_restart(data_dir: str) -> None:
    e = open_standalone(data_dir, flush_on_close=False, compaction_threads=0)
    e.create_table("cpu", CPU)
    e.write("cpu", cpu_batch(["a", "b"], [1, 1], [1.0, 2.0]))
    e.flush()
    e.delete_rows("cpu", _keys(["a"], [1]))
    e.delete_range("cpu", tags={"host": "b"})
    e.close()  # both deletions only in the WAL
    e = open_standalone(data_dir, compaction_threads=0)
    try:
        assert _visible(e) == []
        e.flush()
    finally:
        e.close()
    e = open_standalone(data_dir, compaction_threads=0)
    try:
        assert _visible(e) == []
    finally:
        e.close()


def test_deletes_do_not_come_back_after_compaction(quiet: Engine) -> None:
    quiet.create_table("cpu", CPU)
    hosts = [f"h{i}" for i in range(200)]
    quiet.write("cpu", cpu_batch(hosts, [1] * 200, [1.0] * 200))  # a big, old file
    quiet.flush()
    old = _files(quiet)[0]
    quiet.delete_rows("cpu", _keys(["h1", "h2"], [1, 1]))
    quiet.flush()
    quiet.write("cpu", cpu_batch(["h4"], [2], [2.0]))
    quiet.flush()
    expected = sorted([(h, 1, 1.0) for h in hosts if h not in ("h1", "h2")] + [("h4", 2, 2.0)])
    assert _visible(quiet) == expected
    # Merging only the two newer files must keep the markers: the old file still holds the
    # rows they shadow.
    compactor = quiet.compactor("cpu")
    job = compactor.plan_merge([f.path for f in _files(quiet) if f.path != old.path])
    assert job.task is not None and not job.task.purge_deletes
    assert compactor.execute(job) == 1
    assert sum(f.deletes for f in _files(quiet)) == 2
    assert _visible(quiet) == expected
    # The picker then compacts the whole window: shadowed rows and markers go together.
    quiet.compact("cpu")
    files = _files(quiet)
    assert len(files) == 1 and files[0].deletes == 0 and files[0].rows == len(expected)
    assert _visible(quiet) == expected


def test_range_tombstone_by_tags_and_time(quiet: Engine) -> None:
    quiet.create_table("cpu", CPU, TableOptions(segment_duration_ms=H))
    ts = [10, 20, H + 10]
    for region in ("eu", "us"):
        quiet.write("cpu", cpu_batch(["a"] * 3, ts, [1.0, 2.0, 3.0], region=region))
        quiet.write("cpu", cpu_batch(["b"] * 3, ts, [1.0, 2.0, 3.0], region=region))
    quiet.flush()
    quiet.delete_range("cpu", tags={"host": "a", "region": "eu"}, time_range=(15, None))
    quiet.delete_range("cpu", time_range=(None, 15))
    # Written after the tombstones: untouched by them, even where they match.
    quiet.write("cpu", cpu_batch(["a"], [5], [7.0]))
    got = rows(quiet.read_all("cpu", columns=["host", "region", "ts"]))
    t = pa.scalar
    assert [
        (h, r, t(x, pa.timestamp("ms")).as_py())
        for h, r, x in [
            ("a", "eu", 5),
            ("a", "us", 20),
            ("a", "us", H + 10),
            ("b", "eu", 20),
            ("b", "eu", H + 10),
            ("b", "us", 20),
            ("b", "us", H + 10),
        ]
    ] == got
    scan = quiet.plan_scan("cpu", time_range=(0, 12))
    assert len(pa.Table.from_batches(list(scan))) == 1 and scan.stats.range_tombstones == 1
    before = rows(quiet.read_all("cpu"))
    quiet.flush()
    assert rows(quiet.read_all("cpu")) == before
    quiet.compact("cpu")
    assert rows(quiet.read_all("cpu")) == before
    files = _files(quiet)
    assert all(f.is_data for f in files)  # both tombstones purged: nothing older is left
    assert sum(f.rows for f in files) == len(before)


def test_append_mode_delete_removes_every_older_row_of_the_key(quiet: Engine) -> None:
    quiet.create_table("log", CPU, TableOptions(update_mode=UpdateMode.APPEND))
    quiet.write("log", cpu_batch(["a", "a", "b"], [1, 1, 1], [1.0, 2.0, 3.0]))
    quiet.flush()
    quiet.write("log", cpu_batch(["a"], [1], [4.0]))
    quiet.delete_rows("log", _keys(["a"], [1]))
    quiet.write("log", cpu_batch(["a"], [1], [5.0]))
    assert _visible(quiet, "log") == [("a", 1, 5.0), ("b", 1, 3.0)]
    quiet.flush()
    assert _visible(quiet, "log") == [("a", 1, 5.0), ("b", 1, 3.0)]
    quiet.compact("log")
    assert _visible(quiet, "log") == [("a", 1, 5.0), ("b", 1, 3.0)]


def test_delete_by_explicit_primary_key(quiet: Engine) -> None:
    schema = Schema.build(
        [
            Column("ts", ColumnType.TIMESTAMP),
            Column("name", ColumnType.STRING),
            Column("v", ColumnType.DOUBLE, nullable=False),
        ],
        timestamp_key="ts",
        primary_key=["name", "ts"],
    )
    quiet.create_table("t", schema)
    quiet.write(
        "t",
        pa.table({"ts": pa.array([1, 1], pa.timestamp("ms")), "name": ["x", "y"], "v": [1.0, 2.0]}),
    )
    quiet.flush()
    quiet.delete_rows("t", pa.table({"name": ["x"], "ts": pa.array([1], pa.timestamp("ms"))}))
    quiet.flush()  # the marker's NOT NULL column holds a filler value
    assert rows(quiet.read_all("t", columns=["name", "v"])) == [("y", 2.0)]


def test_bad_deletes_are_rejected(quiet: Engine) -> None:
    quiet.create_table("cpu", CPU)
    with pytest.raises(SchemaMismatch, match="region"):
        quiet.delete_rows("cpu", pa.table({"host": ["a"], "ts": pa.array([1], pa.timestamp("ms"))}))
    with pytest.raises(InvalidArgument, match="not a tag"):
        quiet.delete_range("cpu", tags={"usage": 1.0})
    with pytest.raises(InvalidArgument, match="unknown column"):
        quiet.delete_range("cpu", tags={"nope": "x"})
    with pytest.raises(InvalidArgument, match="empty time range"):
        quiet.delete_range("cpu", time_range=(5, 5))


def test_deleted_rows_stay_deleted_in_streamed_batches(quiet: Engine) -> None:
    quiet.create_table("cpu", CPU, TableOptions(num_rows_per_row_group=100))
    hosts = [f"h{i % 50}" for i in range(2000)]
    ts = list(range(2000))
    quiet.write("cpu", cpu_batch(hosts, ts, [1.0] * 2000))
    quiet.flush()
    quiet.delete_rows("cpu", _keys(hosts[::2], ts[::2]))
    batches = list(quiet.scan("cpu", columns=["ts"], batch_size=128))
    assert all(b.num_rows <= 128 for b in batches)
    got = sorted(x for b in batches for x in b.column(0).cast(pa.int64()).to_pylist())
    assert got == ts[1::2]
