"""The latest-rows scan (each series' last rows, from the ends of its runs in each SST) gives
what the full ordered merge gives, over overwrites, late rows, many row groups per series,
memtables and APPEND duplicates; and every condition it does not hold under sends the scan
the general way."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from node.backends import open_standalone
from node.engine.bounds import Range
from node.engine.engine import Engine
from node.engine.options import TableOptions, UpdateMode

from .conftest import CPU, rows

pytestmark = pytest.mark.unit

HOSTS = [f"h{i}" for i in range(7)]
REGIONS = ["eu", "us"]
STEP = 1_000


def _batch(rng: random.Random, keys: list[tuple[str, str, int]]) -> pa.Table:
    return pa.table(
        {
            "host": [h for h, _, _ in keys],
            "region": [r for _, r, _ in keys],
            "usage": pa.array([round(rng.uniform(0, 100), 3) for _ in keys], pa.float64()),
            "ts": pa.array([t for _, _, t in keys], pa.timestamp("ms")),
        }
    )


def _load(engine: Engine, name: str, mode: UpdateMode, seed: int) -> None:
    """Several flushes over three segment windows: series of different lengths (one ends
    early), rows overwritten by later flushes, late rows into an older window, duplicates
    in APPEND mode, and rows left in the memtable."""
    rng = random.Random(seed)
    options = TableOptions(
        segment_duration_ms=20 * STEP, num_rows_per_row_group=16, update_mode=mode
    )
    engine.create_table(name, CPU, options)
    series = [(h, r) for h in HOSTS for r in REGIONS if rng.random() < 0.8]
    ends = {s: rng.randrange(10, 60) for s in series}
    keys = [(h, r, t * STEP) for (h, r) in series for t in range(ends[(h, r)])]
    rng.shuffle(keys)
    third = len(keys) // 3
    engine.write(name, _batch(rng, sorted(keys[:third], key=lambda k: k[2])))
    engine.flush(name)
    again = rng.sample(keys[:third], third // 4)
    engine.write(name, _batch(rng, keys[third : 2 * third] + again))
    engine.flush(name)
    late = [k for k in keys[2 * third :] if k[2] < 20 * STEP]
    engine.write(name, _batch(rng, late + rng.sample(keys[: 2 * third], 10)))
    engine.flush(name)
    rest = [k for k in keys[2 * third :] if k[2] >= 20 * STEP]
    engine.write(name, _batch(rng, rest + rng.sample(keys, 5)))  # the memtable's


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    e = open_standalone(
        str(tmp_path_factory.mktemp("latest") / "db"), compaction_threads=0, gc_interval_s=0
    )
    _load(e, "ow", UpdateMode.OVERWRITE, 1)
    _load(e, "ap", UpdateMode.APPEND, 2)
    yield e
    e.close()


def _scan(engine: Engine, name: str, **kwargs: object) -> tuple[pa.Table, bool]:
    scan = engine.plan_scan(name, columns=["host", "region", "usage", "ts"], **kwargs)  # type: ignore[arg-type]
    return scan.to_table(), scan.stats.latest


#: A predicate every row passes: it sends a scan the general way, changing no row.
ALL = pc.field("usage") >= -1.0


@pytest.mark.parametrize("name", ["ow", "ap"])
@pytest.mark.parametrize("limit", [1, 2, 5, 100])
def test_latest_rows_are_those_of_the_full_merge(engine: Engine, name: str, limit: int) -> None:
    got, latest = _scan(engine, name, limit_per_series=limit)
    want, general = _scan(engine, name, limit_per_series=limit, predicate=ALL)
    assert latest and not general
    assert rows(got) == rows(want)
    assert got.num_rows > 0


def test_a_lower_time_bound_and_tag_bounds_keep_the_latest_read(engine: Engine) -> None:
    bounds = {"region": Range(values=frozenset({"eu"}))}
    got, latest = _scan(
        engine, "ow", limit_per_series=3, time_range=(30 * STEP, None), bounds=bounds
    )
    want, general = _scan(
        engine, "ow", limit_per_series=3, time_range=(30 * STEP, None), bounds=bounds, predicate=ALL
    )
    assert latest and not general
    assert rows(got) == rows(want)


def test_what_sends_the_scan_the_general_way(tmp_path: Path) -> None:
    e = open_standalone(str(tmp_path / "db"), compaction_threads=0, gc_interval_s=0)
    try:
        _load(e, "t", UpdateMode.OVERWRITE, 3)
        assert _scan(e, "t", limit_per_series=1)[1]
        # An upper time bound: a series' latest rows may lie above it.
        assert not _scan(e, "t", limit_per_series=1, time_range=(None, 30 * STEP))[1]
        # Unordered, or in ascending order: not a request for the latest rows.
        assert not _scan(e, "t", order="asc")[1]
        # A range tombstone, then a deletion marker, may hide a series' last rows.
        e.delete_range("t", tags={"host": "h1"}, time_range=(0, 5 * STEP))
        e.flush("t")
        assert not _scan(e, "t", limit_per_series=1)[1]
    finally:
        e.close()
    e = open_standalone(str(tmp_path / "db2"), compaction_threads=0, gc_interval_s=0)
    try:
        _load(e, "t", UpdateMode.OVERWRITE, 4)
        e.delete_rows(
            "t",
            pa.table({"host": ["h2"], "region": ["eu"], "ts": pa.array([0], pa.timestamp("ms"))}),
        )
        e.flush("t")
        got, latest = _scan(e, "t", limit_per_series=1)
        want, _ = _scan(e, "t", limit_per_series=1, predicate=ALL)
        assert not latest and rows(got) == rows(want)
    finally:
        e.close()
