"""Split groups: overlapping sources read one by one, only the rows inside their overlap
zones resolved together.

Applies to a group of sources that overlap in time only in narrow zones (typically the one
timestamp where two bulk loads or flushes meet): when the rows expected inside the zones, held
until the group ends, are at most :data:`SPLIT_MAX_ZONE_ROWS`.

Correct because a row outside every zone lies in the time range of one source only, so no
other source can hold a version of its key: it streams as read, filtered, without its deletion
markers (which shadow nothing else). Rows inside the zones, markers included, are collected
from every source (pruned on key columns only, like a merge's inputs) and resolved together by
sorting once every source is read.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from node.engine.bounds import Range
from node.engine.merge import sort_resolve
from node.engine.options import UpdateMode
from node.engine.scan import lone, merged
from node.engine.scan.context import ScanContext, Source
from node.engine.scan.pruning import pruned, pruned_all
from node.engine.schema import KIND, PUT
from node.engine.sst.reader import kept, scan_unordered

#: A group of overlapping sources is read source by source (not merged) when the rows expected
#: inside its overlap zones, which are held until the group ends, are at most this many.
SPLIT_MAX_ZONE_ROWS = 262_144


def zones_if_split(group: Sequence[Source]) -> list[tuple[int, int]] | None:
    """The overlap zones of ``group`` when it is read split, None when it is to be merged."""
    zones = overlap_zones([(s.min_ts, s.max_ts) for s in group])
    return zones if rows_in(group, zones) <= SPLIT_MAX_ZONE_ROWS else None


def read(
    ctx: ScanContext, group: Sequence[Source], zones: Sequence[tuple[int, int]]
) -> Iterator[pa.Table]:
    """Rows of ``group`` (sources each resolved on their own) outside the overlap
    ``zones`` [lo, hi) have no version in another source: they stream as they are read,
    without their deletion markers, which shadow nothing else. Rows inside are collected
    and resolved together once every source is read."""
    lows = np.array([lo for lo, _ in zones], dtype=np.int64)
    highs = np.array([hi for _, hi in zones], dtype=np.int64)
    inside: list[pa.Table] = []
    hull = Range(lo=int(lows.min()), hi=int(highs.max()), hi_inclusive=False)
    direct = [*ctx.direct_columns(), *ctx.filter_columns, *ctx.bounds]
    for s in group:
        if s.sst is not None and ctx.values_filtered and ctx.has_columns(s.sst, direct):
            # A filter on values drops most rows early: the rows outside the zones are
            # read as a lone SST's, filtered in the read; those inside apart.
            parts = pruned_all(ctx, [s.sst], ctx.schema.names)
            yield from lone.read(ctx, parts, deletes=s.deletes, outside=zones)
            inside.extend(
                t.filter(pa.array(_in_zones(ctx, t, lows, highs)))
                for t in _source_rows(ctx, s, hull)
            )
            continue
        for table in _source_rows(ctx, s):
            in_zone = _in_zones(ctx, table, lows, highs)
            if in_zone.any():
                inside.append(table.filter(pa.array(in_zone)))
            # Outside the zones the filter (and the markers' removal) is one mask.
            keep = ~in_zone & (table.column(KIND).to_numpy() == PUT)
            if ctx.filter is not None and keep.any():
                keep &= ctx.matching(table, ctx.filter)
            if keep.any():
                yield from ctx.finish(kept(table, keep), filtered=True)
    if inside:
        dedup = ctx.options.update_mode is UpdateMode.OVERWRITE
        rows = sort_resolve(
            pa.concat_tables(inside),
            ctx.schema.primary_key,
            dedup=dedup,
            keep_markers=False,
            descending=False,
        )
        yield from ctx.finish(rows)


def _source_rows(ctx: ScanContext, s: Source, within: Range | None = None) -> Iterator[pa.Table]:
    """One source's rows within the scan's bounds on key columns (the only ones that
    cannot drop a newer version shadowing an older one) and the time range ``within``,
    markers included, conformed to the read schema, in no particular order: an SST's
    through the decoded chunk cache."""
    if s.sst is None:
        batches = merged.sorted_rows(ctx, s, descending=False)
        yield from (pa.Table.from_batches([b]) for b in batches)
        return
    key_columns = ctx.schema.key_columns
    keyed = {c: r for c, r in ctx.bounds.items() if c in key_columns}
    if within is not None:
        ts_key = ctx.schema.timestamp_key
        keyed[ts_key] = keyed[ts_key].intersect(within) if ts_key in keyed else within
    part = pruned(ctx, s.sst, key_columns, keyed)
    present = ctx.sst_files.columns(s.sst.path)
    for table in scan_unordered(
        [part],
        ctx.schema,
        [c for c in ctx.read_columns if c in present],
        decoded=ctx.sst_files.decoded,
        bounds=keyed,
        footers=ctx.footers,
    ):
        yield ctx.conformed_table(table)


def _in_zones(
    ctx: ScanContext,
    batch: pa.RecordBatch | pa.Table,
    lows: np.ndarray[Any, Any],
    highs: np.ndarray[Any, Any],
) -> np.ndarray[Any, Any]:
    """Which rows of ``batch`` lie in one of the zones [``lows[i]``, ``highs[i]``)."""
    ts = batch.column(ctx.schema.timestamp_key).cast(pa.int64()).to_numpy()
    zone = np.searchsorted(lows, ts, side="right") - 1
    return (zone >= 0) & (ts < highs[np.maximum(zone, 0)])


def overlap_zones(ranges: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """The time zones [lo, hi) covered by two or more of ``ranges`` (inclusive bounds)."""
    # Half-open ends; at one instant ends sort before starts, so touching ranges do not meet.
    events = sorted([(lo, 1) for lo, _ in ranges] + [(hi + 1, -1) for _, hi in ranges])
    zones: list[tuple[int, int]] = []
    depth = 0
    start = 0
    for at, step in events:
        depth += step
        if step > 0 and depth == 2:
            start = at
        elif step < 0 and depth == 1:
            if zones and zones[-1][1] == start:
                zones[-1] = (zones[-1][0], at)
            else:
                zones.append((start, at))
    return zones


def rows_in(group: Sequence[Source], zones: Sequence[tuple[int, int]]) -> float:
    """The rows of ``group`` expected inside ``zones``, taking each source's rows as spread
    evenly over its time range."""
    total = 0.0
    for s in group:
        span = s.max_ts - s.min_ts + 1
        covered = sum(max(0, min(hi, s.max_ts + 1) - max(lo, s.min_ts)) for lo, hi in zones)
        total += s.rows * covered / span
    return total
