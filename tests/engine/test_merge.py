"""The k-way merge against a naive sort of everything (both directions, with deletion
markers), and the row primitives it uses."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from node.engine.merge import merge_sorted
from node.engine.rows import count_le, newest_per_key, resolve_versions, sort_by_key
from node.engine.schema import DELETE, KIND, PUT, SEQ
from node.engine.sst.reader import reversed_rows

pytestmark = pytest.mark.unit

KEY = ("k", "ts")
SCHEMA = pa.schema(
    [
        pa.field("k", pa.uint64()),
        pa.field("ts", pa.timestamp("ms")),
        pa.field("v", pa.float64()),
        pa.field(SEQ, pa.uint64()),
        pa.field(KIND, pa.uint8()),
    ]
)


def _resolved(rows: list[tuple[int, int, int, bool]], dedup: bool) -> pa.Table:
    t = pa.table(
        {
            "k": pa.array([r[0] for r in rows], pa.uint64()),
            "ts": pa.array([r[1] for r in rows], pa.timestamp("ms")),
            "v": pa.array([float(r[2]) for r in rows]),
            SEQ: pa.array([r[2] for r in rows], pa.uint64()),
            KIND: pa.array([DELETE if r[3] else PUT for r in rows], pa.uint8()),
        },
        schema=SCHEMA,
    )
    # Every source of the engine (memtable view, SST) is resolved on its own, markers kept.
    return resolve_versions(sort_by_key(t, KEY), KEY, dedup=dedup, keep_markers=True)


def _batches(t: pa.Table, batch: int, descending: bool) -> list[pa.RecordBatch]:
    out = t.combine_chunks().to_batches(max_chunksize=batch)
    return [reversed_rows(b) for b in reversed(out)] if descending else out


row = st.tuples(st.integers(0, 5), st.integers(0, 20), st.integers(1, 10_000), st.booleans())
sources = st.lists(st.lists(row, max_size=40), min_size=1, max_size=5)


@settings(max_examples=200, deadline=None)
# An APPEND source repeating a key across a batch boundary, and a deletion of that key.
@example(
    srcs=[[(0, 0, 1, False), (0, 0, 3, False)], [(0, 0, 4, True)]],
    batch=1,
    dedup=False,
    descending=False,
)
# A deletion and a put under one sequence cannot happen: the second is left out.
@example(
    srcs=[[(0, 0, 1, False)], [(0, 0, 2, True), (0, 0, 2, False)]],
    batch=1,
    dedup=False,
    descending=True,
)
@given(srcs=sources, batch=st.integers(1, 7), dedup=st.booleans(), descending=st.booleans())
def test_merge_equals_sort_of_everything(
    srcs: list[list[tuple[int, int, int, bool]]], batch: int, dedup: bool, descending: bool
) -> None:
    # Sequences are unique across sources, as in the engine, and one sequence is all puts or
    # all deletions (one WAL record holds one kind).
    seen: set[int] = set()
    clean = []
    for s in srcs:
        kinds: dict[int, bool] = {}
        rows = [r for r in s if r[2] not in seen and kinds.setdefault(r[2], r[3]) == r[3]]
        seen.update(r[2] for r in rows)
        clean.append(_resolved(rows, dedup))
    inputs = [iter(_batches(t, batch, descending)) for t in clean]
    out = list(merge_sorted(inputs, KEY, dedup=dedup, descending=descending))
    got = pa.concat_tables(out) if out else pa.Table.from_batches([], SCHEMA)
    everything = sort_by_key(pa.concat_tables(clean), KEY, descending=descending)
    expected = resolve_versions(everything, KEY, dedup=dedup, keep_markers=False)
    assert got.column("k").to_pylist() == expected.column("k").to_pylist()
    assert got.column("ts").to_pylist() == expected.column("ts").to_pylist()
    assert set(got.column(KIND).to_pylist()) <= {PUT}
    if dedup:
        assert got.column(SEQ).to_pylist() == expected.column(SEQ).to_pylist()
    else:
        assert sorted(got.column(SEQ).to_pylist()) == sorted(expected.column(SEQ).to_pylist())


def test_append_mode_deletion_shadows_only_older_rows() -> None:
    t = pa.table(
        {
            "k": pa.array([1, 1, 1, 1, 2], pa.uint64()),
            SEQ: pa.array([1, 2, 3, 4, 1], pa.uint64()),
            KIND: pa.array([PUT, DELETE, PUT, DELETE, PUT], pa.uint8()),
        }
    )
    got = resolve_versions(t, ("k",), dedup=False, keep_markers=False)
    assert got.column(SEQ).to_pylist() == [1]  # only key 2 survives
    kept = resolve_versions(t, ("k",), dedup=False, keep_markers=True)
    assert list(zip(kept.column("k").to_pylist(), kept.column(SEQ).to_pylist(), strict=True)) == [
        (1, 4),
        (2, 1),
    ]
    t = t.slice(0, 3)  # a put after the last deletion is newer and stays
    got = resolve_versions(t, ("k",), dedup=False, keep_markers=False)
    assert got.column(SEQ).to_pylist() == [3]


def test_count_le_is_lexicographic() -> None:
    t = pa.table({"a": [1, 1, 2, 2, 3], "b": [5, 9, 0, 4, 0]})
    assert count_le(t, ("a", "b"), (pa.scalar(2), pa.scalar(0))) == 3
    assert count_le(t, ("a", "b"), (pa.scalar(1), pa.scalar(6))) == 1
    assert count_le(t, ("a", "b"), (pa.scalar(0), pa.scalar(99))) == 0
    assert count_le(t, ("a", "b"), (pa.scalar(3), pa.scalar(0))) == 5
    rev = pa.table({"a": [3, 2, 2, 1], "b": [0, 4, 0, 9]})
    assert count_le(rev, ("a", "b"), (pa.scalar(2), pa.scalar(0)), descending=True) == 3


def test_newest_per_key_keeps_last_of_each_run() -> None:
    t = pa.table({"k": [1, 1, 2, 3, 3, 3], SEQ: np.arange(6, dtype=np.uint64)})
    assert newest_per_key(t, ("k",)).column(SEQ).to_pylist() == [1, 2, 5]
