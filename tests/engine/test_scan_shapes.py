"""Ordered scans (primary-key order and its reverse) and per-series limits, served by the merge
itself across memtables and SSTs of several windows, deletions included."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from gnomon.errors import InvalidArgument
from node.backends import open_standalone
from node.engine.engine import Engine
from node.engine.options import TableOptions
from node.engine.schema import Column, ColumnType, Schema

from .conftest import CPU, cpu_batch

pytestmark = pytest.mark.unit

H = 3_600_000
HOSTS = [f"h{i}" for i in range(7)]


@pytest.fixture
def loaded(data_dir: str) -> Iterator[Engine]:
    e = open_standalone(data_dir, compaction_threads=0, gc_interval_s=0)
    e.create_table("cpu", CPU, TableOptions(segment_duration_ms=H, num_rows_per_row_group=16))
    for step in range(5):
        ts = [step * 20 * 60_000 + i * 1000 for i in range(10)]  # five steps over two windows
        for h in HOSTS:
            e.write("cpu", cpu_batch([h] * 10, ts, [float(step)] * 10))
        if step < 4:
            e.flush()
    # Overwrites and a deletion spanning SSTs and the memtable.
    e.write("cpu", cpu_batch(["h1"] * 3, [0, 1000, 2000], [9.0] * 3))
    e.delete_rows(
        "cpu",
        pa.table({"host": ["h2"], "region": ["eu"], "ts": pa.array([3000], pa.timestamp("ms"))}),
    )
    yield e
    e.close()


def _keys(t: pa.Table) -> list[tuple[int, int]]:
    ts = t.column("ts").cast(pa.int64()).to_pylist()
    return list(zip(t.column("tsid").to_pylist(), ts, strict=True))


def test_ascending_and_descending_follow_the_primary_key(loaded: Engine) -> None:
    unordered = loaded.read_all("cpu")
    expected = sorted(_keys(unordered))
    assert len(expected) == 7 * 50 - 1
    asc = loaded.read_all("cpu", order="asc", batch_size=7)
    assert _keys(asc) == expected
    desc = loaded.read_all("cpu", order="desc", batch_size=7)
    assert _keys(desc) == expected[::-1]
    # Values are the resolved ones, not just the keys.
    assert sorted(asc.column("usage").to_pylist()) == sorted(unordered.column("usage").to_pylist())


def test_descending_with_time_range_and_predicate(loaded: Engine) -> None:
    pred = pc.field("host").isin(["h1", "h3"])
    got = loaded.read_all("cpu", order="desc", time_range=(0, H), predicate=pred)
    ts = got.column("ts").cast(pa.int64()).to_pylist()
    hosts = got.column("host").to_pylist()
    assert set(hosts) == {"h1", "h3"} and all(t < H for t in ts)
    for h in ("h1", "h3"):
        mine = [t for t, x in zip(ts, hosts, strict=True) if x == h]
        assert mine == sorted(mine, reverse=True) and len(mine) == 30


def test_latest_rows_per_series(loaded: Engine) -> None:
    got = loaded.read_all("cpu", columns=["host", "ts", "usage"], limit_per_series=3, batch_size=5)
    by_host: dict[str, list[int]] = {}
    for h, t in zip(
        got.column("host").to_pylist(), got.column("ts").cast(pa.int64()).to_pylist(), strict=True
    ):
        by_host.setdefault(h, []).append(t)
    last = 4 * 20 * 60_000
    assert sorted(by_host) == HOSTS
    assert all(v == [last + 9000, last + 8000, last + 7000] for v in by_host.values())
    # The earliest ones, and a predicate applied before the limit.
    got = loaded.read_all(
        "cpu",
        columns=["host", "ts", "usage"],
        order="asc",
        limit_per_series=2,
        predicate=pc.field("host") == "h2",
    )
    # (h2, 3000) was deleted; (h2, 0) and (h2, 1000) come first.
    assert got.column("ts").cast(pa.int64()).to_pylist() == [0, 1000]
    got = loaded.read_all(
        "cpu",
        columns=["usage"],
        order="asc",
        limit_per_series=1,
        predicate=pc.field("host") == "h1",
    )
    assert got.column("usage").to_pylist() == [9.0]


def test_limit_per_series_needs_time_last_in_the_key(loaded: Engine) -> None:
    schema = Schema.build(
        [Column("ts", ColumnType.TIMESTAMP), Column("k", ColumnType.STRING)],
        timestamp_key="ts",
        primary_key=["ts", "k"],
    )
    loaded.create_table("t", schema)
    with pytest.raises(InvalidArgument, match="timestamp key last"):
        loaded.read_all("t", limit_per_series=1)
    with pytest.raises(InvalidArgument, match="at least 1"):
        loaded.read_all("cpu", limit_per_series=0)
