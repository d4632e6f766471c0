"""Cutting a scan's time range into contiguous pieces of about equal rows, at segment-window
starts, so several readers (Spark tasks, DataFusion partitions) can each take one piece of the
same snapshot: pieces never share a key, so each is resolved on its own."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from node.engine.memtable import MemtableView
from node.engine.sst.meta import SstMeta

TimeRange = tuple[int | None, int | None]


def window_rows(
    files: Iterable[SstMeta], views: Iterable[MemtableView], segment_ms: int
) -> dict[int, int]:
    """Rows per segment-window start, of data files and memtable views (each counted at the
    window of its first row: an estimate, which is all splitting needs)."""
    windows: dict[int, int] = {}
    sources = [(f.min_ts, f.rows) for f in files if f.is_data]
    sources += [(v.min_ts, v.memtable.rows) for v in views if v.batches]
    for min_ts, rows in sources:
        w = min_ts // segment_ms * segment_ms
        windows[w] = windows.get(w, 0) + rows
    return windows


def time_splits(
    windows: dict[int, int],
    segment_ms: int,
    lo: int | None,
    hi: int | None,
    *,
    max_splits: int,
    min_split_rows: int,
) -> list[TimeRange]:
    """[lo, hi) cut at segment-window starts into contiguous splits covering it, holding about
    as many rows each (``windows``: rows per window start), at most ``max_splits`` of them and
    none much below ``min_split_rows`` (a reader per split costs more than a few rows)."""
    inside = sorted(
        (w, n)
        for w, n in windows.items()
        if (lo is None or w + segment_ms > lo) and (hi is None or w < hi)
    )
    total = sum(n for _, n in inside)
    count = min(max_splits, len(inside), max(1, -(-total // max(1, min_split_rows))))
    if count <= 1:
        return [(lo, hi)]
    cumulative = np.cumsum([n for _, n in inside])
    cuts: list[int] = []
    for k in range(1, count):
        # The window whose rows start past the k-th share begins a split.
        i = int(np.searchsorted(cumulative, total * k / count, side="left")) + 1
        if i < len(inside) and (not cuts or inside[i][0] > cuts[-1]):
            cuts.append(inside[i][0])
    bounds: list[int | None] = [lo, *cuts, hi]
    return [(bounds[i], bounds[i + 1]) for i in range(len(bounds) - 1)]
