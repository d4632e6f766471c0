"""Vectorised row-order primitives shared by flush, merge, compaction and memtable reads:
sorting by primary key and sequence, resolving the versions of each key (newest wins, row
deletions shadow what is older), and comparing keys."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from node.engine.schema import DELETE, KIND, PUT, SEQ

Tabular = pa.Table | pa.RecordBatch

_PUT = pa.scalar(PUT, pa.uint8())
_DELETE = pa.scalar(DELETE, pa.uint8())


def sort_by_key(data: pa.Table, key: Sequence[str], *, descending: bool = False) -> pa.Table:
    """Rows ordered by ``key`` (ascending or descending) then ``__seq`` ascending; the sort is
    stable, so rows of one write keep their order and the later one of two equal keys in a
    batch wins the dedup."""
    if data.num_rows <= 1:
        return data
    order: Literal["ascending", "descending"] = "descending" if descending else "ascending"
    idx = pc.sort_indices(data, sort_keys=[*((k, order) for k in key), (SEQ, "ascending")])
    return data.take(idx)


def same_as_next(data: Tabular, key: Sequence[str]) -> np.ndarray[Any, np.dtype[np.bool_]]:
    """For rows 0..n-2: whether the next row has the same ``key``."""
    n = data.num_rows
    same = np.ones(n - 1, dtype=bool)
    for k in key:
        col = data.column(k)
        same &= pc.equal(col.slice(0, n - 1), col.slice(1)).to_numpy(zero_copy_only=False)
    return same


def newest_per_key(data: pa.Table, key: Sequence[str]) -> pa.Table:
    """Of rows sorted by (key, seq), keep the last row of each run of equal keys."""
    if data.num_rows <= 1:
        return data
    same = same_as_next(data, key)
    if not same.any():
        return data
    return data.filter(pa.array(np.append(~same, True)))


def resolve_versions(
    data: pa.Table, key: Sequence[str], *, dedup: bool, keep_markers: bool
) -> pa.Table:
    """The visible rows of ``data`` (sorted so that equal keys are adjacent, oldest first).

    With ``dedup`` (OVERWRITE) only the newest row of a key survives, and a key whose newest
    row is a deletion marker disappears. Without it (APPEND) every put survives unless a
    deletion of its key follows it. ``keep_markers`` keeps the newest marker of each key, for
    results that are merged again with older data (memtables, SSTs that cannot purge)."""
    if KIND not in data.schema.names:
        return newest_per_key(data, key) if dedup else data
    kinds = data.column(KIND).to_numpy(zero_copy_only=False)
    deletes = kinds == DELETE
    if not deletes.any():
        return newest_per_key(data, key) if dedup else data
    if dedup:
        data = newest_per_key(data, key)
        return data if keep_markers else data.filter(pc.equal(data.column(KIND), _PUT))
    n = data.num_rows
    run = np.concatenate(([0], np.cumsum(~same_as_next(data, key))))
    pos = np.arange(n)
    last_delete = np.full(int(run[-1]) + 1, -1)
    np.maximum.at(last_delete, run[deletes], pos[deletes])
    # Puts after the run's last deletion are newer than it; everything before it is shadowed.
    keep = pos > last_delete[run]
    if keep_markers:
        keep |= pos == last_delete[run]
    return data.filter(pa.array(keep))


def strip_markers(data: pa.Table) -> pa.Table:
    """``data`` without deletion markers (rows are otherwise already resolved)."""
    if KIND not in data.schema.names:
        return data
    kinds = data.column(KIND)
    if not pc.any(pc.equal(kinds, _DELETE)).as_py():
        return data
    return data.filter(pc.equal(kinds, _PUT))


def key_at(data: Tabular, key: Sequence[str], row: int) -> tuple[Any, ...]:
    return tuple(data.column(k)[row] for k in key)


def key_lt(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    """Lexicographic a < b over pyarrow scalars of key columns."""
    for x, y in zip(a, b, strict=True):
        if x == y:
            continue
        return bool(pc.less(x, y).as_py())
    return False


def count_le(
    data: Tabular, key: Sequence[str], bound: tuple[Any, ...], *, descending: bool = False
) -> int:
    """How many leading rows of ``data`` (sorted by ``key``) come no later than ``bound``:
    keys <= bound, or >= bound when sorted descending."""
    before = pc.greater if descending else pc.less
    le: Any = None
    prefix_eq: Any = None
    for k, b in zip(key, bound, strict=True):
        col = data.column(k)
        term = before(col, b) if prefix_eq is None else pc.and_(prefix_eq, before(col, b))
        le = term if le is None else pc.or_(le, term)
        eq = pc.equal(col, b)
        prefix_eq = eq if prefix_eq is None else pc.and_(prefix_eq, eq)
    assert le is not None and prefix_eq is not None
    mask = pc.or_(le, prefix_eq)
    return int(pc.sum(mask).as_py() or 0)
