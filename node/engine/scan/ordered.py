"""Ordered scans: every source merged into one stream in primary-key order, forwards or
backwards, optionally cut to the first rows of each series.

Applies when the request asks for an ``order`` or a ``limit_per_series`` (which implies "desc":
the latest rows of each series first).

Correct because the k-way merge (:mod:`node.engine.scan.merged`) yields rows in key order
whatever the sources, so the newest rows of a series come first without sorting the result,
and the per-series limit can count rows as they stream: the filter and range tombstones are
applied before counting, so a series' first ``limit`` rows are its first visible ones.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import pyarrow as pa

from node.engine.rows import key_at, same_as_next
from node.engine.scan import latest, merged
from node.engine.scan.context import ScanContext


def read(ctx: ScanContext) -> Iterator[pa.Table]:
    found = ctx.sources()
    ctx.stats.memtable_slices = sum(1 for s in found if s.mem is not None)
    candidates = latest.sources(ctx, found)
    sources = found if candidates is None else candidates
    ctx.stats.merged_components = 1 if len(sources) > 1 else 0
    tables = merged.merge(ctx, sources, descending=ctx.order == "desc")
    visible: Iterator[pa.Table] = (ctx.visible(t) for t in tables)
    limit = ctx.request.limit_per_series
    if limit is not None:
        visible = limit_per_series(visible, ctx.schema.series_key, limit)
    for table in visible:
        yield from ctx.emit(table)


def limit_per_series(
    tables: Iterator[pa.Table], series: Sequence[str], limit: int
) -> Iterator[pa.Table]:
    """The first ``limit`` rows of each run of equal ``series`` values, across tables that
    continue one another (a run may span many)."""
    last: tuple[object, ...] | None = None
    carried = 0
    for table in tables:
        n = table.num_rows
        if n == 0:
            continue
        starts = np.append(True, ~same_as_next(table, series)) if series else np.zeros(n, bool)
        if not series:
            starts[0] = True
        run = np.cumsum(starts) - 1
        first = np.flatnonzero(starts)
        pos = np.arange(n) - first[run]
        if last is not None and key_at(table, series, 0) == last:
            pos[run == 0] += carried
        last, carried = key_at(table, series, n - 1), int(pos[-1]) + 1
        kept = table.filter(pa.array(pos < limit))
        if kept.num_rows:
            yield kept
