"""The k-way merge against a naive sort of everything, and the row primitives it uses."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from node.engine.merge import merge_sorted
from node.engine.rows import count_le, newest_per_key, sort_by_key
from node.engine.schema import SEQ

KEY = ("k", "ts")


def _source(rows: list[tuple[int, int, int]], batch: int) -> list[pa.RecordBatch]:
    t = pa.table(
        {
            "k": pa.array([r[0] for r in rows], pa.uint64()),
            "ts": pa.array([r[1] for r in rows], pa.timestamp("ms")),
            "v": pa.array([float(r[2]) for r in rows]),
            SEQ: pa.array([r[2] for r in rows], pa.uint64()),
        }
    )
    t = newest_per_key(sort_by_key(t, KEY), KEY).combine_chunks()
    return t.to_batches(max_chunksize=batch)


sources = st.lists(
    st.lists(st.tuples(st.integers(0, 5), st.integers(0, 20), st.integers(1, 10_000)), max_size=40),
    min_size=1,
    max_size=5,
)


@settings(max_examples=200, deadline=None)
@given(srcs=sources, batch=st.integers(1, 7), dedup=st.booleans())
def test_merge_equals_sort_of_everything(
    srcs: list[list[tuple[int, int, int]]], batch: int, dedup: bool
) -> None:
    # Sequences are unique across sources, as in the engine.
    seen: set[int] = set()
    clean = []
    for s in srcs:
        rows = [r for r in s if r[2] not in seen]
        seen.update(r[2] for r in rows)
        clean.append(rows)
    inputs = [iter(_source(rows, batch)) for rows in clean]
    out = list(merge_sorted(inputs, KEY, dedup=dedup))
    got = pa.concat_tables(out) if out else None
    all_rows = pa.concat_tables(
        [
            pa.Table.from_batches(_source(r, 100), schema=_source([(0, 0, 1)], 1)[0].schema)
            for r in clean
        ]
    )
    expected = sort_by_key(all_rows, KEY)
    if dedup:
        expected = newest_per_key(expected, KEY)
    if got is None:
        assert expected.num_rows == 0
        return
    assert got.column("k").to_pylist() == expected.column("k").to_pylist()
    assert got.column("ts").to_pylist() == expected.column("ts").to_pylist()
    if dedup:
        assert got.column(SEQ).to_pylist() == expected.column(SEQ).to_pylist()


def test_count_le_is_lexicographic() -> None:
    t = pa.table({"a": [1, 1, 2, 2, 3], "b": [5, 9, 0, 4, 0]})
    assert count_le(t, ("a", "b"), (pa.scalar(2), pa.scalar(0))) == 3
    assert count_le(t, ("a", "b"), (pa.scalar(1), pa.scalar(6))) == 1
    assert count_le(t, ("a", "b"), (pa.scalar(0), pa.scalar(99))) == 0
    assert count_le(t, ("a", "b"), (pa.scalar(3), pa.scalar(0))) == 5


def test_newest_per_key_keeps_last_of_each_run() -> None:
    t = pa.table({"k": [1, 1, 2, 3, 3, 3], SEQ: np.arange(6, dtype=np.uint64)})
    assert newest_per_key(t, ("k",)).column(SEQ).to_pylist() == [1, 2, 5]
