"""Scans compared with a reference model (a dict keyed by primary key, or a multiset in APPEND
mode) under random interleavings of writes, flushes and reopens."""

from __future__ import annotations

import shutil
import tempfile
from collections import Counter
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from node.engine.engine import Engine
from node.engine.options import TableOptions, UpdateMode

from .conftest import CPU

HOSTS = ["a", "b", "c", "d"]
write_op = st.tuples(
    st.just("write"),
    st.lists(
        st.tuples(st.sampled_from(HOSTS), st.integers(0, 40), st.integers(0, 1000)),
        min_size=1,
        max_size=12,
    ),
)
ops = st.lists(
    st.one_of(write_op, st.just(("flush", None)), st.just(("reopen", None))),
    min_size=1,
    max_size=14,
)


def _scan(engine: Engine, predicate: pc.Expression | None = None) -> list[tuple[Any, ...]]:
    t = engine.read_all("t", columns=["host", "ts", "usage"], predicate=predicate)
    ts = t.column("ts").cast(pa.int64()).to_pylist()
    return sorted(zip(t.column("host").to_pylist(), ts, t.column("usage").to_pylist(), strict=True))


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(mode=st.sampled_from(list(UpdateMode)), program=ops, segment=st.sampled_from([10, 1000]))
def test_engine_matches_reference_model(
    mode: UpdateMode, program: list[tuple[str, Any]], segment: int
) -> None:
    data_dir = tempfile.mkdtemp(prefix="gnomon-model-")
    opts = TableOptions(update_mode=mode, segment_duration_ms=segment, num_rows_per_row_group=4)
    latest: dict[tuple[str, int], float] = {}
    every: Counter[tuple[str, int, float]] = Counter()
    engine = Engine.open(data_dir, wal_sync="never", flush_on_close=False)
    try:
        engine.create_table("t", CPU, opts)
        for op, arg in program:
            if op == "write":
                hosts, ts, vals = zip(*arg, strict=True)
                engine.write(
                    "t",
                    pa.table(
                        {
                            "host": list(hosts),
                            "region": ["r"] * len(hosts),
                            "usage": [float(v) for v in vals],
                            "ts": pa.array(list(ts), pa.timestamp("ms")),
                        }
                    ),
                )
                for h, t, v in arg:
                    latest[(h, t)] = float(v)
                    every[(h, t, float(v))] += 1
            elif op == "flush":
                engine.flush()
            else:
                engine.close()
                engine = Engine.open(data_dir, wal_sync="never", flush_on_close=False)
            if mode is UpdateMode.OVERWRITE:
                expected = sorted((h, t, v) for (h, t), v in latest.items())
            else:
                expected = sorted(every.elements())
            assert _scan(engine) == expected
            assert _scan(engine, pc.field("usage") >= 500.0) == [
                r for r in expected if r[2] >= 500.0
            ]
            assert _scan(engine, pc.field("host") == "b") == [r for r in expected if r[0] == "b"]
    finally:
        engine.close()
        shutil.rmtree(data_dir, ignore_errors=True)
