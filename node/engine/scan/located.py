"""Located reads: the rows of the series one tag's values name, sliced out of SSTs by their
series directories, within a time range.

Applies when the request is unordered, has no predicate, bounds one tag by a list of values
(and the time key by a range at most), the table's rows run in time order within a series, and
in the time range there are no memtable rows, range tombstones, deletion markers or (but in
APPEND mode) overlapping SSTs, and every SST's directory places the wanted series' rows in
each row group that holds them.

Correct because then no row has another version elsewhere, the runs the directory gives hold
exactly the wanted series' rows (so the tag need not be read nor filtered), and narrowing each
run by binary search on its sorted timestamps leaves exactly the rows in the time range: every
row read is in the answer. This planning is a point query's whole planning, at a fraction of
the general plan's calls; :func:`arrays` hands the rows to numpy without tables in between.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pyarrow as pa

from node.engine.bounds import Bounds
from node.engine.options import UpdateMode
from node.engine.scan.context import ScanContext
from node.engine.scan.pruning import Held, listed
from node.engine.sst.meta import SstMeta
from node.engine.sst.reader import LocatedArrays, Part, located_arrays, scan_unordered
from node.engine.sst.row_groups import Runs


def locate(ctx: ScanContext) -> list[Part] | None:
    """The parts of a located read, when the scan is one (see the module); None for any
    other scan."""
    ts_key = ctx.schema.timestamp_key
    tags = [c for c in ctx.bounds if c != ts_key]
    if (
        ctx.order is not None
        or ctx.request.predicate is not None
        or ctx.ranges
        or ctx.schema.run_order != ts_key
        or len(tags) != 1
        or tags[0] not in ctx.schema.tags
        or ctx.bounds[tags[0]].values is None
        or ts_key in ctx.filtered_bounds  # timestamp IN (...): not a range
        or any(v.batches and ctx.overlaps(v.min_ts, v.max_ts) for v in ctx.memtables)
    ):
        return None
    ssts = sorted(ctx.files, key=lambda f: f.min_ts)
    columns = [*ctx.direct_columns(), *ctx.bounds]
    if any(f.deletes or not ctx.has_columns(f, columns) for f in ssts):
        return None
    if ctx.options.update_mode is UpdateMode.OVERWRITE and any(
        b.min_ts <= a.max_ts for a, b in itertools.pairwise(ssts)
    ):
        return None
    files = ctx.sst_files
    wanted = frozenset(listed(ctx.bounds[tags[0]]))
    window = _window(ctx)
    located: list[tuple[SstMeta, list[int], dict[int, Runs]]] = []
    for sst in ssts:
        index = files.series(sst.path, tags)
        if index.unlisted:
            return None
        groups = files.row_groups_within(sst.path, window, index.holding(wanted))
        runs = Held(index, wanted, frozenset(groups)).runs(groups)
        if len(runs) < len(groups):
            return None  # a row group whose series' rows the directory does not place
        located.append((sst, groups, runs))
    parts = [ctx.part(sst, groups, runs, frozenset(tags)) for sst, groups, runs in located]
    ctx.stats.located = True
    return parts


def read(ctx: ScanContext, parts: list[Part]) -> Iterator[pa.Table]:
    # Every row read is wanted (the runs decide the tag, so it is not read unless asked
    # for, and their narrowing the time range), nothing shadows anything, and the read
    # gives the columns asked for, tags dictionary encoded as asked: the rows are the
    # answer as read.
    yield from scan_unordered(
        parts,
        ctx.schema,
        ctx.columns,
        decoded=ctx.sst_files.decoded,
        bounds=_window(ctx) or None,
        footers=ctx.footers,
        dictionary=ctx.dictionary,
    )


def arrays(ctx: ScanContext, parts: list[Part]) -> LocatedArrays | None:
    """The rows of the located read as numpy arrays (see :func:`located_arrays`)."""
    return located_arrays(
        parts,
        ctx.schema,
        ctx.columns,
        decoded=ctx.sst_files.decoded,
        bounds=_window(ctx),
        footers=ctx.footers,
    )


def _window(ctx: ScanContext) -> Bounds:
    """The scan's bound on the time key, if any: the one bound runs do not decide."""
    ts_key = ctx.schema.timestamp_key
    return {ts_key: ctx.bounds[ts_key]} if ts_key in ctx.bounds else {}
