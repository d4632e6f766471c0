"""Vectorised row-order primitives shared by flush, merge and memtable reads: sorting by
primary key and sequence, keeping the newest version of each key, and comparing keys."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from node.engine.schema import SEQ

Tabular = pa.Table | pa.RecordBatch


def sort_by_key(data: pa.Table, key: Sequence[str]) -> pa.Table:
    """Rows ordered by ``key`` then ``__seq``; the sort is stable, so rows of one write keep
    their order and the later one of two equal keys in a batch wins the dedup."""
    if data.num_rows <= 1:
        return data
    idx = pc.sort_indices(data, sort_keys=[(k, "ascending") for k in (*key, SEQ)])
    return data.take(idx)


def newest_per_key(data: pa.Table, key: Sequence[str]) -> pa.Table:
    """Of rows sorted by (key, seq), keep the last row of each run of equal keys."""
    n = data.num_rows
    if n <= 1:
        return data
    same_as_next = np.ones(n - 1, dtype=bool)
    for k in key:
        col = data.column(k)
        eq = pc.equal(col.slice(0, n - 1), col.slice(1)).to_numpy(zero_copy_only=False)
        same_as_next &= eq
    if not same_as_next.any():
        return data
    keep = np.append(~same_as_next, True)
    return data.filter(pa.array(keep))


def key_at(data: Tabular, key: Sequence[str], row: int) -> tuple[Any, ...]:
    return tuple(data.column(k)[row] for k in key)


def key_lt(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    """Lexicographic a < b over pyarrow scalars of key columns."""
    for x, y in zip(a, b, strict=True):
        if x == y:
            continue
        return bool(pc.less(x, y).as_py())
    return False


def count_le(data: Tabular, key: Sequence[str], bound: tuple[Any, ...]) -> int:
    """How many leading rows of ``data`` (sorted by ``key``) have a key <= ``bound``."""
    le: Any = None
    prefix_eq: Any = None
    for k, b in zip(key, bound, strict=True):
        col = data.column(k)
        less = pc.less(col, b)
        term = less if prefix_eq is None else pc.and_(prefix_eq, less)
        le = term if le is None else pc.or_(le, term)
        eq = pc.equal(col, b)
        prefix_eq = eq if prefix_eq is None else pc.and_(prefix_eq, eq)
    assert le is not None and prefix_eq is not None
    mask = pc.or_(le, prefix_eq)
    return int(pc.sum(mask).as_py() or 0)
