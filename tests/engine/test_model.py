"""Scans compared with a reference model (a dict keyed by primary key, or a multiset in APPEND
mode) under random interleavings of writes, row and range deletions, flushes, compactions,
reopens, enabling TTL and adding a column.

The example count is fixed and the generation derandomised, so CI runs the same programs every
time; set GNOMON_MODEL_EXAMPLES to explore more locally.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections import Counter
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import node.engine.scan.split as scan_module
from node.backends import open_standalone
from node.engine.engine import Engine
from node.engine.options import TableOptions, UpdateMode
from node.engine.schema import Column, ColumnType

from .conftest import CPU

pytestmark = pytest.mark.unit

HOSTS = ["a", "b", "c", "d"]
#: Model timestamps are steps of this many ms from a base a little in the past, so that a TTL
#: can put its floor between steps 20 and 21 with seconds of margin either side.
STEP = 10_000
TTL_STEP = 20.5

write_op = st.tuples(
    st.just("write"),
    st.lists(
        st.tuples(st.sampled_from(HOSTS), st.integers(0, 40), st.integers(0, 1000)),
        min_size=1,
        max_size=12,
    ),
)
delete_op = st.tuples(
    st.just("delete"),
    st.lists(st.tuples(st.sampled_from(HOSTS), st.integers(0, 40)), min_size=1, max_size=6),
)
range_op = st.tuples(
    st.just("range"),
    st.tuples(st.one_of(st.none(), st.sampled_from(HOSTS)), st.integers(0, 40), st.integers(1, 20)),
)
ops = st.lists(
    st.one_of(
        write_op,
        write_op,
        delete_op,
        range_op,
        st.just(("flush", None)),
        st.just(("compact", None)),
        st.just(("reopen", None)),
        st.just(("ttl", None)),
        st.just(("add_column", None)),
    ),
    min_size=1,
    max_size=16,
)

Row = tuple[str, int, float, str | None]


def _order(r: Row) -> tuple[str, int, float, str]:
    return (r[0], r[1], r[2], r[3] or "")


class Model:
    def __init__(self, mode: UpdateMode) -> None:
        self.mode = mode
        self.latest: dict[tuple[str, int], tuple[float, str | None]] = {}
        self.every: Counter[Row] = Counter()
        self.ttl = False
        self.noted = False

    def write(self, h: str, t: int, v: float) -> None:
        note = str(v) if self.noted else None
        self.latest[(h, t)] = (v, note)
        self.every[(h, t, v, note)] += 1

    def delete(self, match: Any) -> None:
        self.latest = {k: v for k, v in self.latest.items() if not match(*k)}
        self.every = Counter({r: n for r, n in self.every.items() if not match(r[0], r[1])})

    def rows(self) -> list[Row]:
        if self.mode is UpdateMode.OVERWRITE:
            out = [(h, t, v, n) for (h, t), (v, n) in self.latest.items()]
        else:
            out = list(self.every.elements())
        return sorted((r for r in out if not self.ttl or r[1] > TTL_STEP), key=_order)


def _scan(engine: Engine, base: int, model: Model, **kw: Any) -> list[Row]:
    cols = ["host", "ts", "usage", *(["note"] if model.noted else [])]
    t = engine.read_all("t", columns=cols, **kw)
    ts = [(x - base) // STEP for x in t.column("ts").cast(pa.int64()).to_pylist()]
    notes = t.column("note").to_pylist() if model.noted else [None] * t.num_rows
    return sorted(
        zip(t.column("host").to_pylist(), ts, t.column("usage").to_pylist(), notes, strict=True),
        key=_order,
    )


def _open(data_dir: str) -> Engine:
    return open_standalone(
        data_dir, wal_sync="never", flush_on_close=False, compaction_threads=0, gc_interval_s=0
    )


@settings(
    max_examples=int(os.environ.get("GNOMON_MODEL_EXAMPLES", "60")),
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
@given(
    mode=st.sampled_from(list(UpdateMode)),
    program=ops,
    segment=st.sampled_from([3 * STEP, 1000 * STEP]),
    split=st.booleans(),
)
def test_engine_matches_reference_model(
    mode: UpdateMode, program: list[tuple[str, Any]], segment: int, split: bool
) -> None:
    # Overlapping sources split at their overlap zones, or always merged (scan.py).
    limit = scan_module.SPLIT_MAX_ZONE_ROWS
    scan_module.SPLIT_MAX_ZONE_ROWS = limit if split else -1
    try:
        _run_program(mode, program, segment)
    finally:
        scan_module.SPLIT_MAX_ZONE_ROWS = limit


def _run_program(mode: UpdateMode, program: list[tuple[str, Any]], segment: int) -> None:
    data_dir = tempfile.mkdtemp(prefix="gnomon-model-")
    now = int(time.time() * 1000)
    base = now - 100 * STEP
    opts = TableOptions(
        update_mode=mode,
        segment_duration_ms=segment,
        num_rows_per_row_group=4,
        compaction_min_threshold=2,
        ttl_ms=now - int(base + TTL_STEP * STEP),
    )
    model = Model(mode)
    engine = _open(data_dir)
    try:
        engine.create_table("t", CPU, opts)
        for op, arg in program:
            if op == "write":
                hosts, ts, vals = zip(*arg, strict=True)
                data = {
                    "host": list(hosts),
                    "region": ["r"] * len(hosts),
                    "usage": [float(v) for v in vals],
                    "ts": pa.array([base + t * STEP for t in ts], pa.timestamp("ms")),
                }
                if model.noted:
                    data["note"] = [str(float(v)) for v in vals]
                engine.write("t", pa.table(data))
                for h, t, v in arg:
                    model.write(h, t, float(v))
            elif op == "delete":
                hosts, ts = zip(*arg, strict=True)
                keys = {
                    "host": list(hosts),
                    "region": ["r"] * len(hosts),
                    "ts": pa.array([base + t * STEP for t in ts], pa.timestamp("ms")),
                }
                engine.delete_rows("t", pa.table(keys))
                gone = set(arg)
                model.delete(lambda h, t, gone=gone: (h, t) in gone)
            elif op == "range":
                host, lo, width = arg
                engine.delete_range(
                    "t",
                    tags=None if host is None else {"host": host},
                    time_range=(base + lo * STEP, base + (lo + width) * STEP),
                )
                model.delete(
                    lambda h, t, host=host, lo=lo, hi=lo + width: (
                        (host in (None, h)) and lo <= t < hi
                    )
                )
            elif op == "flush":
                engine.flush()
            elif op == "compact":
                engine.compact("t")
            elif op == "ttl":
                engine.alter_table("t", options={"enable_ttl": "true"})
                model.ttl = True
            elif op == "add_column":
                if not model.noted:
                    engine.alter_table("t", add_columns=[Column("note", ColumnType.STRING)])
                    model.noted = True
            else:
                engine.close()
                engine = _open(data_dir)
            expected = model.rows()
            assert _scan(engine, base, model) == expected
            assert _scan(engine, base, model, predicate=pc.field("usage") >= 500.0) == [
                r for r in expected if r[2] >= 500.0
            ]
            assert _scan(engine, base, model, predicate=pc.field("host") == "b") == [
                r for r in expected if r[0] == "b"
            ]
        desc = engine.read_all("t", columns=["tsid", "ts"], order="desc")
        keys = list(
            zip(desc.column("tsid").to_pylist(), desc.column("ts").to_pylist(), strict=True)
        )
        assert keys == sorted(keys, reverse=True) and len(keys) == len(model.rows())
    finally:
        engine.close()
        shutil.rmtree(data_dir, ignore_errors=True)
