"""Latest rows: each series' last rows, read from the end of its rows in each SST instead of
merging every row of the snapshot.

Applies to a request for the latest ``limit_per_series`` rows of each series (newest first)
with no predicate, no upper time bound, no bounds but on tags and a lower time bound, no
range tombstones and no deletion markers, over a table whose primary key is its series (tags,
or their tsid) and then the time key, when every SST's series directory places every series'
rows run by run in every row group.

Correct because an SST holds each series' rows together in time order (primary-key order),
so its last ``limit`` rows there end its last runs; a row among a series' latest ``limit``
over all sources has fewer than ``limit`` rows (in OVERWRITE mode, distinct timestamps) after
it in any source, so it is among the candidates of the source holding its newest version,
and a version left out is either shadowed by a newer one or not among the latest. Nothing
deletes a row, and the filters left keep or drop a series whole (tags) or from its oldest
rows up (a lower time bound), so the ordered merge over the candidates and the memtables
gives the rows the merge over everything would.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from node.engine.scan.context import ScanContext, Source
from node.engine.sst.meta import SstMeta
from node.engine.sst.row_groups import SeriesIndex


def sources(ctx: ScanContext, found: list[Source]) -> list[Source] | None:
    """The scan's sources ``found`` with each SST replaced by its candidate rows (in key
    order), when the scan qualifies (see the module); None otherwise."""
    limit = ctx.request.limit_per_series
    schema = ctx.schema
    ts_key = schema.timestamp_key
    # The directory names a series by its tags (those the implicit tsid hashes).
    tags = schema.tags if schema.has_tsid else schema.series_key
    if (
        limit is None
        or ctx.order != "desc"
        or ctx.request.predicate is not None
        or ctx.hi is not None
        or ctx.ranges
        or not tags
        or schema.run_order != ts_key
        or any(c != ts_key and c not in schema.tags for c in ctx.bounds)
        or (ts_key in ctx.bounds and ctx.bounds[ts_key].values is not None)
    ):
        return None
    if any(s.deletes for s in found):
        return None
    out: list[Source] = []
    for s in found:
        if s.sst is None:
            out.append(s)
            continue
        rows = _candidates(ctx, s.sst, tags, limit)
        if rows is None:
            return None
        out.append(Source(s.min_ts, s.max_ts, mem=rows))
    ctx.stats.latest = True
    return out


def _candidates(ctx: ScanContext, sst: SstMeta, tags: list[str], limit: int) -> pa.Table | None:
    """The last ``limit`` rows of each series of ``sst``, in key order, with the columns a
    merge reads; None when its directory does not place every series' rows. Kept with the
    file's other metadata (a file never changes): a dashboard asks for them every few
    seconds."""
    present = ctx.sst_files.columns(sst.path)
    columns = tuple(c for c in ctx.read_columns if c in present)
    return ctx.sst_files.cache.get_or_load(
        "latest",
        sst.path,
        (tuple(tags), limit, columns),
        lambda: _read(ctx, sst, tags, limit, columns),
        lambda rows: 64 if rows is None else rows.nbytes,
    )


def _read(
    ctx: ScanContext, sst: SstMeta, tags: list[str], limit: int, columns: tuple[str, ...]
) -> pa.Table | None:
    files = ctx.sst_files
    footer = files.footer(sst.path)
    index = files.series(sst.path, tags)
    if index.unlisted or len(index.runs) < footer.num_row_groups:
        return None
    picked = _tails(index, footer.num_row_groups, limit)
    part = ctx.part(sst, sorted(picked))
    # The candidates are what is kept (see _candidates): the chunks decoded for them are not.
    tables = files.decoded.read(
        part.file, part.path, part.row_groups, list(columns), metadata=footer, keep=False
    )
    taken = [
        table.take(pa.array(picked[rg], pa.int64()))
        for rg, table in zip(part.row_groups, tables, strict=True)
    ]
    if not taken:
        return ctx.read_schema.empty_table()
    return pa.concat_tables(taken).combine_chunks()


def _tails(index: SeriesIndex, row_groups: int, limit: int) -> dict[int, np.ndarray]:
    """Per row group, the positions (ascending) of the rows that are among the last
    ``limit`` of their series in the file."""
    by_series: dict[tuple[object, ...], list[tuple[int, int, int]]] = {}
    for rg in range(row_groups):
        for start, end, combo in index.runs[rg]:
            by_series.setdefault(combo, []).append((rg, start, end))
    picked: dict[int, list[range]] = {}
    for runs in by_series.values():
        left = limit
        for rg, start, end in reversed(runs):
            n = min(left, end - start)
            picked.setdefault(rg, []).append(range(end - n, end))
            left -= n
            if left == 0:
                break
    return {
        rg: np.sort(np.concatenate([np.arange(r.start, r.stop) for r in ranges]))
        for rg, ranges in picked.items()
    }
