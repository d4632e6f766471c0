"""Which row groups of an SST a scan reads, and which of their rows.

When the filter names tags, an SST's series directory first says which row groups hold a
series the filter may admit (each distinct series judged once, however many row groups hold
it) and where in them its rows lie; the row groups left are then judged on their min/max
statistics against the bounds and, with a predicate, against the filter expression. Only the
columns the caller names may be judged on statistics: a group to be merged must be pruned on
key columns alone, since a newer version of a row may change the others.
"""

from __future__ import annotations

from collections.abc import Sequence, Set
from dataclasses import dataclass
from typing import Any

from node.engine.bounds import Bounds, Range
from node.engine.scan.context import ScanContext
from node.engine.sst.meta import SstMeta
from node.engine.sst.reader import Part
from node.engine.sst.row_groups import Runs, SeriesIndex, select_row_groups, series_guarantee


@dataclass(frozen=True)
class Held:
    """Of one SST, the series a scan admits and the row groups that may hold them."""

    index: SeriesIndex
    admitted: Set[tuple[Any, ...]]
    row_groups: Set[int]

    def runs(self, groups: Sequence[int]) -> dict[int, Runs]:
        """Of ``groups``, those whose admitted series the directory locates, with their rows."""
        out: dict[int, Runs] = {}
        for rg in groups:
            rows = self.index.rows(self.admitted, rg)
            if rows is not None:
                out[rg] = rows
        return out


def listed(r: Range) -> list[tuple[Any, ...]]:
    """The series (of one tag) a bound listing that tag's values admits."""
    return [(v,) for v in r.values or () if r.admits(v)]


def pruned(
    ctx: ScanContext, sst: SstMeta, stat_columns: Sequence[str], bounds: Bounds | None = None
) -> Part:
    return pruned_all(ctx, [sst], stat_columns, bounds)[0]


def pruned_all(
    ctx: ScanContext,
    ssts: Sequence[SstMeta],
    stat_columns: Sequence[str],
    bounds: Bounds | None = None,
) -> list[Part]:
    """Each SST's key, local path and the row groups that may hold matching rows (within
    ``bounds``, by default the scan's): when the filter names tags, first by the series
    they hold (which also locates those series' rows), then by their statistics."""
    if not ssts:
        return []
    files = ctx.sst_files
    bounds = ctx.bounds if bounds is None else bounds
    bounded = {c: r for c, r in bounds.items() if c in stat_columns}
    tags = [t for t in ctx.schema.tags if t in ctx.filter_reads and t in stat_columns]
    held = by_series(ctx, ssts, tags, bounds) if tags else [None] * len(ssts)
    selected: list[list[int]] = []
    for sst, series in zip(ssts, held, strict=True):
        if series is None:
            selected.append(files.row_groups_within(sst.path, bounded))
        elif series.row_groups:
            # A directory listing every row group decides the tag bounds: their
            # statistics cannot rule out a row group holding an admitted series.
            judged = (
                bounded
                if series.index.unlisted
                else {c: r for c, r in bounded.items() if c not in tags}
            )
            selected.append(files.row_groups_within(sst.path, judged, series.row_groups))
        else:
            selected.append([])  # none of the series wanted: no statistics to judge
    if ctx.request.predicate is not None:
        # Only columns the filter names can rule anything out; a guarantee naming the
        # others too would only make pyarrow's simplification slower (it grows with the
        # guarantee).
        judged_columns = [c for c in stat_columns if c in ctx.filter_reads]
        stats = [files.guarantees(s.path, ctx.storage, judged_columns) for s in ssts]
        picked = select_row_groups(
            [[[g[rg]] for rg in groups] for g, groups in zip(stats, selected, strict=True)],
            ctx.storage,
            ctx.filter,
        )
        selected = [
            [groups[i] for i in kept] for groups, kept in zip(selected, picked, strict=True)
        ]
    # Rows sliced out by series satisfy the bounds on their tags.
    return [
        ctx.part(sst, groups)
        if series is None
        else ctx.part(sst, groups, series.runs(groups), frozenset(tags))
        for sst, groups, series in zip(ssts, selected, held, strict=True)
    ]


def by_series(
    ctx: ScanContext, ssts: Sequence[SstMeta], tags: list[str], bounds: Bounds
) -> list[Held | None]:
    """Of each SST whose series directory lists ``tags``, the row groups holding a
    series the filter may match (None for one listing none). Each distinct
    series is judged once, however many row groups hold it."""
    indexes = [ctx.sst_files.series(s.path, tags) for s in ssts]
    bounded = [(i, bounds[t]) for i, t in enumerate(tags) if t in bounds]
    if len(tags) == 1 and bounded and bounded[0][1].values is not None:
        # One tag IN a few values: those are the candidates (a value no file holds
        # selects no row group), not every series of every file.
        admitted = listed(bounded[0][1])
    else:
        distinct = set().union(*(i.row_groups for i in indexes))
        admitted = [c for c in distinct if all(r.admits(c[i]) for i, r in bounded)]
    if admitted and ctx.request.predicate is not None:
        guarantees = [[series_guarantee(ctx.storage, tags, c)] for c in admitted]
        (matching,) = select_row_groups([guarantees], ctx.storage, ctx.filter)
        admitted = [admitted[i] for i in matching]
    wanted = frozenset(admitted)
    return [Held(i, wanted, i.holding(admitted)) if i.row_groups else None for i in indexes]
