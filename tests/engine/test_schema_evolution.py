"""ALTER TABLE: added columns read as their default (or null) from older memtables, SSTs and WAL
records; changed settings apply from then on; every change is a new version in the catalog."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from gnomon.errors import InvalidArgument
from node.backends import open_standalone
from node.engine.engine import Engine
from node.engine.options import TableOptions
from node.engine.schema import Column, ColumnType

from .conftest import CPU, cpu_batch, rows

pytestmark = pytest.mark.unit

H = 3_600_000


def test_add_column_reads_default_or_null_from_older_data(quiet: Engine) -> None:
    quiet.create_table("cpu", CPU)
    quiet.write("cpu", cpu_batch(["a"], [1], [1.0]))
    quiet.flush()
    quiet.write("cpu", cpu_batch(["b"], [2], [2.0]))  # stays in the memtable
    info = quiet.alter_table(
        "cpu",
        add_columns=[
            Column("mem", ColumnType.DOUBLE),
            Column("dc", ColumnType.STRING, default="x1"),
        ],
    )
    assert info.schema.version == 2 and info.schema.names[-2:] == ["mem", "dc"]
    quiet.write(
        "cpu",
        pa.table(
            {
                "host": ["c"],
                "region": ["eu"],
                "usage": [3.0],
                "ts": pa.array([3], pa.timestamp("ms")),
                "mem": [0.5],
                "dc": ["y"],
            }
        ),
    )
    expected = [("a", None, "x1"), ("b", None, "x1"), ("c", 0.5, "y")]
    assert rows(quiet.read_all("cpu", columns=["host", "mem", "dc"])) == expected
    # A filter on the new column sees the default of rows written before it existed.
    got = quiet.read_all("cpu", columns=["host"], predicate=pc.field("dc") == "x1")
    assert rows(got) == [("a",), ("b",)]
    quiet.flush()
    assert rows(quiet.read_all("cpu", columns=["host", "mem", "dc"])) == expected
    quiet.compact("cpu")
    assert rows(quiet.read_all("cpu", columns=["host", "mem", "dc"])) == expected
    # Ordered scans merge old and new SSTs alike.
    got = quiet.read_all("cpu", columns=["host", "dc"], order="desc")
    assert sorted(got.column("dc").to_pylist()) == ["x1", "x1", "y"]


def test_wal_records_from_before_an_alter_replay_into_the_new_schema(data_dir: str) -> None:
    e = open_standalone(data_dir, flush_on_close=False, compaction_threads=0)
    e.create_table("cpu", CPU)
    e.write("cpu", cpu_batch(["a"], [1], [1.0]))
    e.alter_table("cpu", add_columns=[Column("dc", ColumnType.STRING, default="x1")])
    e.write("cpu", pa.table({"host": ["b"], "ts": pa.array([2], pa.timestamp("ms")), "dc": ["z"]}))
    e.close()
    e = open_standalone(data_dir, compaction_threads=0)
    try:
        assert rows(e.read_all("cpu", columns=["host", "dc"])) == [("a", "x1"), ("b", "z")]
    finally:
        e.close()


def test_settings_change_and_history_is_kept(quiet: Engine) -> None:
    quiet.create_table("cpu", CPU, TableOptions(segment_duration_ms=H))
    quiet.write("cpu", cpu_batch(["a"] * 2, [0, 2 * H], [1.0, 2.0]))
    quiet.flush()
    info = quiet.alter_table(
        "cpu", options={"segment_duration": "1d", "compaction_min_threshold": "2", "ttl": "30d"}
    )
    assert info.options.segment_duration_ms == 86_400_000
    assert info.options.compaction_min_threshold == 2 and info.schema.version == 2
    quiet.write("cpu", cpu_batch(["a"] * 2, [0, 2 * H], [3.0, 4.0]))
    quiet.flush()
    tid = info.table_id
    # New data is flushed in one-day windows: one file for both rows.
    newest = quiet.manifest.current(tid).files[-1]
    assert (newest.min_ts, newest.max_ts) == (0, 2 * H)
    # Compaction groups the old two-hour files into the new day window.
    quiet.compact("cpu")
    assert len(quiet.manifest.current(tid).files) == 1
    assert rows(quiet.read_all("cpu", columns=["usage"])) == [(3.0,), (4.0,)]
    history = quiet.catalog.history(tid)
    assert [v for v, _, _ in history] == [1, 2]
    assert history[0][2].segment_duration_ms == H and history[1][2].ttl_ms == 30 * 86_400_000
    # The change survives a restart.
    assert quiet.catalog.get("cpu").options.segment_duration_ms == 86_400_000


def test_bad_alters_change_nothing(quiet: Engine) -> None:
    quiet.create_table("cpu", CPU)
    with pytest.raises(InvalidArgument, match="already exists"):
        quiet.alter_table("cpu", add_columns=[Column("usage", ColumnType.DOUBLE)])
    with pytest.raises(InvalidArgument, match="nullable or have a default"):
        quiet.alter_table("cpu", add_columns=[Column("n", ColumnType.INT64, nullable=False)])
    with pytest.raises(InvalidArgument, match="series ids"):
        quiet.alter_table(
            "cpu", add_columns=[Column("dc", ColumnType.STRING, is_tag=True, default="x")]
        )
    with pytest.raises(InvalidArgument, match="update_mode"):
        quiet.alter_table("cpu", options={"update_mode": "APPEND"})
    with pytest.raises(InvalidArgument, match="unknown table option"):
        quiet.alter_table("cpu", options={"nope": "1"})
    assert quiet.describe("cpu").schema.version == 1


def test_new_nullable_tag_keeps_series_ids(quiet: Engine) -> None:
    quiet.create_table("cpu", CPU)
    quiet.write("cpu", cpu_batch(["a"], [1], [1.0]))
    quiet.flush()
    quiet.alter_table("cpu", add_columns=[Column("dc", ColumnType.STRING, is_tag=True)])
    quiet.write("cpu", cpu_batch(["a"], [1], [2.0]))  # same series, dc null: overwrites
    assert rows(quiet.read_all("cpu", columns=["host", "usage", "dc"])) == [("a", 2.0, None)]
