"""Engine behaviour through its Python API: read-your-writes across memtable and SSTs, update
modes, pruning, time travel, recovery and clear errors."""

from __future__ import annotations

import itertools
import os

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from gnomon.errors import AlreadyExists, InvalidArgument, NotFound, SchemaMismatch, TooLarge
from node.backends import open_standalone
from node.engine.engine import Engine
from node.engine.options import TableOptions, UpdateMode
from node.engine.scan import overlap_zones
from node.engine.schema import Column, ColumnType, Schema

from .conftest import CPU, cpu_batch, rows

pytestmark = pytest.mark.unit

H = 3_600_000


def test_read_your_writes_across_memtable_and_ssts(engine: Engine) -> None:
    engine.create_table("cpu", CPU)
    engine.write("cpu", cpu_batch(["a", "b"], [1000, 1000], [1.0, 2.0]))
    engine.flush("cpu")
    engine.write("cpu", cpu_batch(["a", "c"], [1000, 2000], [10.0, 3.0]))  # overwrites (a, 1000)
    got = engine.read_all("cpu", columns=["host", "ts", "usage"])
    assert rows(got, "host", "usage") == [("a", 10.0), ("b", 2.0), ("c", 3.0)]
    engine.flush("cpu")
    got = engine.read_all("cpu", columns=["host", "usage"])
    assert rows(got) == [("a", 10.0), ("b", 2.0), ("c", 3.0)]


def test_duplicate_keys_within_one_batch_keep_the_last(engine: Engine) -> None:
    engine.create_table("cpu", CPU)
    engine.write("cpu", cpu_batch(["a", "a", "a"], [5, 5, 6], [1.0, 2.0, 3.0]))
    assert rows(engine.read_all("cpu", columns=["ts", "usage"])) == [
        (pa.scalar(5, pa.timestamp("ms")).as_py(), 2.0),
        (pa.scalar(6, pa.timestamp("ms")).as_py(), 3.0),
    ]
    engine.flush()
    assert len(engine.read_all("cpu")) == 2


def test_append_mode_keeps_every_row(engine: Engine) -> None:
    engine.create_table("log", CPU, TableOptions(update_mode=UpdateMode.APPEND))
    engine.write("log", cpu_batch(["a", "a"], [1, 1], [1.0, 2.0]))
    engine.flush()
    engine.write("log", cpu_batch(["a"], [1], [3.0]))
    assert rows(engine.read_all("log", columns=["usage"])) == [(1.0,), (2.0,), (3.0,)]


def test_stats_follow_writes_flushes_and_close(engine: Engine) -> None:
    engine.create_table("cpu", CPU)
    engine.create_table("idle", CPU)
    engine.write("cpu", cpu_batch(["a", "b"], [1, 1], [1.0, 2.0]))
    before = {t.name: t for t in engine.stats().tables}
    assert list(before) == ["cpu", "idle"]
    assert (before["cpu"].memtable_rows, before["cpu"].sst_files) == (2, 0)
    assert before["cpu"].memtable_bytes > 0 and before["idle"].memtable_rows == 0
    engine.flush("cpu")
    after = {t.name: t for t in engine.stats().tables}["cpu"]
    assert (after.memtable_rows, after.sst_files, after.sst_rows) == (0, 1, 2)
    assert after.sst_bytes > 0 and after.version == before["cpu"].version + 1
    assert not after.flush_failing and after.pending_flushes == 0
    engine.close()
    assert engine.stats().tables == ()


def test_tsid_is_stable_and_distinguishes_series(engine: Engine) -> None:
    engine.create_table("cpu", CPU)
    engine.write("cpu", cpu_batch(["a", "b"], [1, 1], [1.0, 2.0]))
    engine.write("cpu", cpu_batch(["a"], [2], [1.0]))
    t = engine.read_all("cpu", columns=["host", "tsid"])
    ids = {h: set() for h in ("a", "b")}
    for h, tsid in zip(t.column("host").to_pylist(), t.column("tsid").to_pylist(), strict=True):
        ids[h].add(tsid)
    assert len(ids["a"]) == 1 and len(ids["b"]) == 1 and ids["a"] != ids["b"]


def test_segment_windows_make_one_sst_each(engine: Engine) -> None:
    engine.create_table("cpu", CPU, TableOptions(segment_duration_ms=H))
    engine.write("cpu", cpu_batch(["a"] * 3, [0, H + 1, 2 * H + 5], [1.0, 2.0, 3.0]))
    engine.flush()
    files = engine.manifest.current(engine.describe("cpu").table_id).files
    assert sorted((f.min_ts, f.max_ts) for f in files) == [(0, 0), (H + 1, H + 1), (2 * H + 5,) * 2]


def test_time_range_and_predicate_prune_files_and_row_groups(engine: Engine) -> None:
    opts = TableOptions(segment_duration_ms=H, num_rows_per_row_group=100)
    engine.create_table("cpu", CPU, opts)
    for w in range(4):
        hosts = [f"h{i % 10}" for i in range(1000)]
        engine.write(
            "cpu",
            cpu_batch(hosts, [w * H + i for i in range(1000)], [float(w)] * 1000),
        )
        engine.flush()
    scan = engine.plan_scan("cpu", time_range=(H, 2 * H))
    assert len(pa.Table.from_batches(list(scan))) == 1000
    assert scan.stats.ssts_total == 4 and scan.stats.row_groups_total == 10
    scan = engine.plan_scan("cpu", predicate=pc.field("host") == "h3", time_range=(0, H))
    got = pa.Table.from_batches(list(scan))
    assert len(got) == 100 and set(got.column("host").to_pylist()) == {"h3"}
    # Sorted by (tsid, ts): one host's rows sit in one or two of the ten row groups.
    assert scan.stats.row_groups_read <= 2
    # Non-key statistics prune too when a file overlaps no other source.
    scan = engine.plan_scan("cpu", predicate=pc.field("usage") > 2.5)
    assert len(pa.Table.from_batches(list(scan))) == 1000
    assert scan.stats.row_groups_read == 10 and scan.stats.row_groups_total == 40


def test_overlapping_ssts_are_merged_with_key_safe_pruning(engine: Engine) -> None:
    engine.create_table("cpu", CPU)
    engine.write("cpu", cpu_batch(["a", "b"], [1, 1], [100.0, 100.0]))
    engine.flush()
    engine.write("cpu", cpu_batch(["a"], [1], [1.0]))
    engine.flush()
    # The newer SST's value of (a, 1) does not match; the old one must not resurface.
    got = engine.read_all("cpu", columns=["host", "usage"], predicate=pc.field("usage") > 50.0)
    assert rows(got) == [("b", 100.0)]
    scan = engine.plan_scan("cpu")
    assert len(pa.Table.from_batches(list(scan))) == 2
    assert scan.stats.merged_components + scan.stats.split_components == 1


def test_overlap_zones_are_where_two_ranges_meet() -> None:
    assert overlap_zones([(0, 10), (11, 20)]) == []
    assert overlap_zones([(0, 10), (10, 20)]) == [(10, 11)]
    assert overlap_zones([(0, 10), (5, 20), (8, 30)]) == [(5, 21)]
    assert overlap_zones([(0, 10), (10, 20), (20, 30)]) == [(10, 11), (20, 21)]


@pytest.mark.parametrize("mode", [UpdateMode.OVERWRITE, UpdateMode.APPEND])
def test_ssts_meeting_at_one_instant_resolve_only_that_instant(
    engine: Engine, mode: UpdateMode
) -> None:
    engine.create_table("cpu", CPU, TableOptions(update_mode=mode))
    early = list(range(0, 100))
    late = list(range(99, 200))
    engine.write("cpu", cpu_batch(["a"] * 100 + ["b"] * 100, early * 2, [1.0] * 200))
    engine.flush()
    engine.write("cpu", cpu_batch(["a"] * 101 + ["b"] * 101, late * 2, [2.0] * 202))
    engine.flush()
    engine.delete_rows("cpu", cpu_batch(["b"], [99], [0.0]).select(["host", "region", "ts"]))
    engine.flush()
    scan = engine.plan_scan("cpu", columns=["host", "ts", "usage"])
    got = pa.Table.from_batches(list(scan))
    assert (scan.stats.split_components, scan.stats.merged_components) == (1, 0)
    at_99 = [r for r in rows(got, "host", "ts", "usage") if r[1].timestamp() * 1000 == 99]
    if mode is UpdateMode.OVERWRITE:
        assert got.num_rows == 399 and at_99 == [(at_99[0][0], at_99[0][1], 2.0)]
    else:
        assert got.num_rows == 400 and [(r[0], r[2]) for r in at_99] == [("a", 1.0), ("a", 2.0)]
    assert all(r[0] == "a" for r in at_99)
    # The older version of (a, 99) matches the filter but is shadowed in OVERWRITE mode.
    cheap = engine.read_all("cpu", columns=["host", "ts"], predicate=pc.field("usage") < 1.5)
    expected = 99 if mode is UpdateMode.OVERWRITE else 100
    assert rows(cheap, "host").count(("a",)) == expected


@pytest.mark.parametrize("mode", [UpdateMode.OVERWRITE, UpdateMode.APPEND])
def test_split_scans_answer_as_merged_ones(
    quiet: Engine, mode: UpdateMode, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Overlapping SSTs read split (rows outside the overlap as lone SSTs', through the
    filter, inside it resolved together) answer as the full merge does, with deletions
    on both sides of the overlap and bounds, a predicate or both."""
    from node.engine.bounds import Range
    from node.engine.scan import split as scan_module

    quiet.create_table("cpu", CPU, TableOptions(update_mode=mode, num_rows_per_row_group=16))
    hosts = ["a", "b", "c"]
    for first, value in ((0, 1.0), (60, 2.0)):
        ts = list(range(first, first + 100))
        quiet.write(
            "cpu",
            cpu_batch([h for h in hosts for _ in ts], ts * 3, [value + t / 1000 for t in ts] * 3),
        )
        quiet.flush()
    keys = cpu_batch(["a", "b"], [10, 70], [0.0, 0.0]).select(["host", "region", "ts"])
    quiet.delete_rows("cpu", keys)
    quiet.flush()
    cases: list[dict[str, object]] = [
        {},
        {"bounds": {"host": Range(values=frozenset(["a", "c"]))}},
        {"predicate": pc.field("usage") > 1.05},
        {"bounds": {"ts": Range(lo=50, hi=80)}, "predicate": pc.field("usage") < 2.05},
    ]
    columns = ["host", "ts", "usage"]
    for case in cases:
        split = quiet.plan_scan("cpu", columns=columns, **case)  # type: ignore[arg-type]
        got = pa.Table.from_batches(list(split))
        assert split.stats.split_components == 1, case
        monkeypatch.setattr(scan_module, "SPLIT_MAX_ZONE_ROWS", -1)
        merged = quiet.plan_scan("cpu", columns=columns, **case)  # type: ignore[arg-type]
        want = pa.Table.from_batches(list(merged), schema=got.schema)
        monkeypatch.undo()
        assert merged.stats.split_components == 0
        assert rows(got) == rows(want), case
        assert got.num_rows > 0


def test_time_travel_reads_earlier_versions(engine: Engine) -> None:
    engine.create_table("cpu", CPU)
    engine.write("cpu", cpu_batch(["a"], [1], [1.0]))
    engine.flush()
    engine.write("cpu", cpu_batch(["a", "b"], [1, 1], [2.0, 2.0]))
    engine.flush()
    tid = engine.describe("cpu").table_id
    versions = engine.manifest.versions(tid)
    assert [v[0] for v in versions][-2:] == [1, 2]
    assert rows(engine.read_all("cpu", columns=["host", "usage"], version=1)) == [("a", 1.0)]
    assert rows(engine.read_all("cpu", columns=["host", "usage"], version=2)) == [
        ("a", 2.0),
        ("b", 2.0),
    ]
    ts1 = versions[-2][1]
    assert rows(engine.read_all("cpu", columns=["usage"], timestamp_ms=ts1)) == [(1.0,)]
    with pytest.raises(NotFound):
        engine.read_all("cpu", version=99)


def test_recovery_replays_unflushed_writes(data_dir: str) -> None:
    e = open_standalone(data_dir, flush_on_close=False)
    e.create_table("cpu", CPU)
    e.write("cpu", cpu_batch(["a"], [1], [1.0]))
    e.flush()
    e.write("cpu", cpu_batch(["b"], [2], [2.0]))
    e.close()
    e = open_standalone(data_dir)
    try:
        assert rows(e.read_all("cpu", columns=["host"])) == [("a",), ("b",)]
        e.write("cpu", cpu_batch(["c"], [3], [3.0]))
        e.flush()
        assert len(e.read_all("cpu")) == 3
    finally:
        e.close()
    e = open_standalone(data_dir)
    try:
        assert len(e.read_all("cpu")) == 3
    finally:
        e.close()


def test_background_flush_while_writing(data_dir: str) -> None:
    # Without background compaction, which would merge the flushed files at any moment.
    e = open_standalone(data_dir, compaction_threads=0)
    try:
        e.create_table("cpu", CPU, TableOptions(write_buffer_size=64 * 1024))
        for i in range(60):
            hosts = [f"h{j}" for j in range(200)]
            e.write("cpu", cpu_batch(hosts, [i] * 200, [float(i)] * 200))
        assert len(e.read_all("cpu")) == 60 * 200
        e.flush()
        assert len(e.manifest.current(e.describe("cpu").table_id).files) > 1
        assert len(e.read_all("cpu")) == 60 * 200
    finally:
        e.close()


def test_drop_removes_data_and_name_can_be_reused(engine: Engine, data_dir: str) -> None:
    engine.create_table("cpu", CPU)
    engine.write("cpu", cpu_batch(["a"], [1], [1.0]))
    engine.flush()
    assert engine.drop_table("cpu")
    assert not os.listdir(os.path.join(data_dir, "sst")) or not any(
        files for _, _, files in os.walk(os.path.join(data_dir, "sst", "tables"))
    )
    with pytest.raises(NotFound):
        engine.write("cpu", cpu_batch(["a"], [1], [1.0]))
    assert not engine.drop_table("cpu", if_exists=True)
    engine.create_table("cpu", CPU)
    assert len(engine.read_all("cpu")) == 0


def test_ddl_errors(engine: Engine) -> None:
    engine.create_table("cpu", CPU)
    with pytest.raises(AlreadyExists, match="cpu"):
        engine.create_table("cpu", CPU)
    assert engine.create_table("cpu", CPU, if_not_exists=True).name == "cpu"
    with pytest.raises(InvalidArgument, match="table name"):
        engine.create_table("9bad name", CPU)
    with pytest.raises(NotFound, match="nope"):
        engine.describe("nope")
    assert engine.list_tables() == ["cpu"]


@pytest.mark.parametrize(
    ("columns", "kwargs", "message"),
    [
        ([Column("v", ColumnType.DOUBLE)], {"timestamp_key": "ts"}, "timestamp key 'ts'"),
        ([Column("ts", ColumnType.INT64)], {"timestamp_key": "ts"}, "must be of type timestamp"),
        (
            [Column("ts", ColumnType.TIMESTAMP), Column("ts", ColumnType.DOUBLE)],
            {"timestamp_key": "ts"},
            "duplicate column 'ts'",
        ),
        (
            [Column("ts", ColumnType.TIMESTAMP), Column("v", ColumnType.DOUBLE, is_tag=True)],
            {"timestamp_key": "ts"},
            "tag column 'v'",
        ),
        (
            [Column("ts", ColumnType.TIMESTAMP), Column("h", ColumnType.STRING)],
            {"timestamp_key": "ts", "primary_key": ["h"]},
            "must contain the timestamp key",
        ),
        (
            [Column("ts", ColumnType.TIMESTAMP), Column("tsid", ColumnType.STRING)],
            {"timestamp_key": "ts"},
            "reserved",
        ),
        (
            [Column("ts", ColumnType.TIMESTAMP), Column("__x", ColumnType.STRING)],
            {"timestamp_key": "ts"},
            "reserved",
        ),
    ],
)
def test_bad_schemas_are_rejected(columns: list[Column], kwargs: dict, message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        Schema.build(columns, **kwargs)


@pytest.mark.parametrize(
    ("batch", "message"),
    [
        (
            pa.table({"host": ["a"], "ts": pa.array([1], pa.timestamp("ms")), "cpu": [1.0]}),
            "no column 'cpu'",
        ),
        (pa.table({"host": ["a"], "usage": [1.0]}), "NOT NULL column 'ts'"),
        (pa.table({"host": ["a"], "ts": pa.array([None], pa.timestamp("ms"))}), "'ts' is NOT NULL"),
        (
            pa.table({"host": ["a"], "ts": pa.array([1], pa.timestamp("ms")), "usage": ["x"]}),
            "column 'usage'",
        ),
        (
            pa.table(
                {
                    "host": ["a"],
                    "ts": pa.array([1], pa.timestamp("ms")),
                    "tsid": pa.array([1], pa.uint64()),
                }
            ),
            "computed from the tags",
        ),
        (pa.table({"host": ["a"], "ts": pa.array([1001], pa.timestamp("us"))}), "column 'ts'"),
    ],
)
def test_bad_batches_are_rejected_and_change_nothing(
    engine: Engine, batch: pa.Table, message: str
) -> None:
    engine.create_table("cpu", CPU)
    with pytest.raises(SchemaMismatch, match=message):
        engine.write("cpu", batch)
    assert len(engine.read_all("cpu")) == 0


def test_oversize_write_is_rejected(data_dir: str) -> None:
    e = open_standalone(data_dir, max_write_bytes=1024)
    try:
        e.create_table("cpu", CPU)
        with pytest.raises(TooLarge, match="exceeds"):
            e.write("cpu", cpu_batch(["a"] * 1000, list(range(1000)), [1.0] * 1000))
    finally:
        e.close()


def test_scan_errors_name_the_problem(engine: Engine) -> None:
    engine.create_table("cpu", CPU)
    with pytest.raises(InvalidArgument, match="unknown column 'nope'"):
        engine.read_all("cpu", columns=["nope"])
    with pytest.raises(InvalidArgument, match="predicate"):
        engine.read_all("cpu", predicate=pc.field("nope") > 1)


def test_explicit_primary_key_and_defaults(engine: Engine) -> None:
    schema = Schema.build(
        [
            Column("ts", ColumnType.TIMESTAMP),
            Column("name", ColumnType.STRING),
            Column("level", ColumnType.INT32, default=3),
            Column("v", ColumnType.DOUBLE),
        ],
        timestamp_key="ts",
        primary_key=["name", "ts"],
    )
    engine.create_table("t", schema)
    engine.write(
        "t",
        pa.table({"ts": pa.array([1, 1], pa.timestamp("ms")), "name": ["x", "y"], "v": [1.0, 2.0]}),
    )
    engine.write(
        "t",
        pa.table(
            {
                "ts": pa.array([1], pa.timestamp("ms")),
                "name": ["x"],
                "v": [5.0],
                "level": pa.array([7], pa.int32()),
            }
        ),
    )
    engine.flush()
    assert rows(engine.read_all("t", columns=["name", "level", "v"])) == [
        ("x", 7, 5.0),
        ("y", 3, 2.0),
    ]
    assert "tsid" not in engine.describe("t").schema.names


def test_pieces_of_one_pinned_snapshot_read_it_once(engine: Engine) -> None:
    engine.create_table("cpu", CPU, TableOptions(segment_duration_ms=H))
    for hour in range(4):
        engine.write("cpu", cpu_batch(["a", "b"], [hour * H, hour * H + 1], [1.0, 2.0]))
        engine.flush()
    engine.write("cpu", cpu_batch(["c"], [5 * H], [3.0]))  # stays in the memtable
    pinned = engine.pin("cpu")
    pieces = engine.split("cpu", pinned, max_splits=3, min_split_rows=1)
    assert len(pieces) == 3 and pieces[0][0] is None and pieces[-1][1] is None
    assert all(a[1] == b[0] for a, b in itertools.pairwise(pieces))
    # A write after pinning is in no piece.
    engine.write("cpu", cpu_batch(["d"], [H], [4.0]))
    got = [
        r
        for piece in pieces
        for r in rows(
            pa.Table.from_batches(
                list(engine.plan_scan("cpu", columns=["host"], time_range=piece, pinned=pinned))
            )
        )
    ]
    assert sorted(got) == [("a",)] * 4 + [("b",)] * 4 + [("c",)]
    assert engine.split("cpu", pinned, max_splits=3, min_split_rows=100) == [(None, None)]
