"""TTL: expired rows vanish from reads at once, compaction drops them, and whole expired SSTs are
removed without being read — including when the TTL floor falls inside a segment window."""

from __future__ import annotations

import os
import time

import pyarrow as pa
import pytest

from node.engine.engine import Engine
from node.engine.options import TableOptions

from .conftest import CPU, cpu_batch

pytestmark = pytest.mark.unit

H = 3_600_000


def _ts(engine: Engine, name: str, **kw: object) -> list[int]:
    t = engine.read_all(name, columns=["ts"], **kw)
    return sorted(t.column("ts").cast(pa.int64()).to_pylist())


def _now() -> int:
    return int(time.time() * 1000)


def test_expired_rows_disappear_from_reads_at_once(quiet: Engine) -> None:
    quiet.create_table("cpu", CPU, TableOptions.from_strings({"ttl": "1d"}))
    now = _now()
    old, fresh = now - 2 * 86_400_000, now - H
    quiet.write("cpu", cpu_batch(["a", "a"], [old, fresh], [1.0, 2.0]))
    assert _ts(quiet, "cpu") == [old, fresh]  # TTL not enabled yet
    quiet.alter_table("cpu", options={"enable_ttl": "true"})
    assert _ts(quiet, "cpu") == [fresh]  # memtable
    quiet.flush()
    assert _ts(quiet, "cpu") == [fresh]  # SST
    assert _ts(quiet, "cpu", time_range=(None, fresh)) == []


def _window_of(ts: int) -> int:
    return ts // H * H


def test_ttl_crossing_segment_windows(quiet: Engine, data_dir: str) -> None:
    now = _now()
    cross = _window_of(now - 3 * H)
    # The TTL puts the floor in the middle of window `cross`, far from its edges, so that the
    # test's own running time cannot move a row across it.
    floor = cross + H // 2
    opts = TableOptions.from_strings(
        {
            "segment_duration": "1h",
            "ttl": f"{now - floor}ms",
            "enable_ttl": "true",
            "compaction_min_threshold": "2",
        }
    )
    quiet.create_table("cpu", CPU, opts)
    # Rows of the window before the floor's (wholly expired), either side of the floor inside
    # its window, and in the next window.
    gone = [cross - H + 10, cross - 10]
    cut = [cross + 5, floor - H // 4]
    kept = [floor + H // 4, cross + H + 5]
    for part in range(2):
        ts = [*gone, *cut, *kept]
        quiet.write("cpu", cpu_batch(["a"] * len(ts), ts, [float(part)] * len(ts)))
        quiet.flush()
    assert _ts(quiet, "cpu") == sorted(kept)
    tid = quiet.describe("cpu").table_id
    files = quiet.manifest.current(tid).files
    expired = [f for f in files if f.max_ts < floor]
    assert expired and all(f.min_ts // H == (cross - H) // H for f in expired)
    # Whole expired files are dropped without being read: make them unreadable first.
    store = quiet.table("cpu").store
    for f in expired:
        with open(store.local_path(f.path), "wb") as fh:  # type: ignore[attr-defined]
            fh.write(b"not parquet")
    quiet.compact("cpu")
    after = quiet.manifest.current(tid).files
    assert not {f.path for f in after} & {f.path for f in expired}
    # The floor's window was compacted: its rows below the floor are gone from the file too.
    crossing = [f for f in after if f.min_ts // H == cross // H]
    assert len(crossing) == 1 and crossing[0].min_ts == kept[0] and crossing[0].rows == 1
    assert _ts(quiet, "cpu") == sorted(kept)
    assert all(os.path.exists(store.local_path(f.path)) for f in after)  # type: ignore[attr-defined]


def test_expired_tombstone_files_are_removed(quiet: Engine) -> None:
    quiet.create_table("cpu", CPU, TableOptions.from_strings({"ttl": "1h", "enable_ttl": "true"}))
    now = _now()
    quiet.write("cpu", cpu_batch(["a"], [now], [1.0]))
    quiet.delete_range("cpu", time_range=(now - 5 * H, now - 4 * H))
    quiet.flush()
    tid = quiet.describe("cpu").table_id
    assert any(not f.is_data for f in quiet.manifest.current(tid).files)
    assert quiet.compact("cpu") == 1
    assert all(f.is_data for f in quiet.manifest.current(tid).files)
    assert _ts(quiet, "cpu") == [now]
