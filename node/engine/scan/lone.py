"""Lone SSTs: an SST no other source overlaps, read on its own with the whole filter pushed
into the read.

Applies to an SST that overlaps no other source in time (or, in APPEND mode, any SST of a group
without deletion markers) and holds every column the scan returns and the filter judges (older
files lack columns added since: those are merged, which fills them in).

Correct because no other source can hold a version of any of its rows: its rows are resolved
already (an SST is written sorted and deduplicated) and its deletion markers shadow nothing
else, so they are left out. Rows are read through the decoded chunk cache and filtered there;
SSTs whose statistics prove every row read satisfies the bounds (a time range query's inner
files, with no predicate) are "covered" and read unfiltered. The split strategy reads the rows
of an overlapping SST outside its overlap zones this way too.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence, Set

import pyarrow as pa
import pyarrow.compute as pc

from node.engine.bounds import all_of
from node.engine.scan.context import ScanContext, Source
from node.engine.schema import KIND, PUT, SEQ
from node.engine.sst.reader import Part, scan_unordered


def applies(ctx: ScanContext, source: Source) -> bool:
    """Whether ``source``, standing alone, is an SST that can be read on its own."""
    return source.sst is not None and ctx.has_columns(
        source.sst, [*ctx.direct_columns(), *ctx.filter_columns, *ctx.bounds]
    )


def covered(ctx: ScanContext, parts: Sequence[Part]) -> set[str]:
    """Local paths of ``parts`` whose statistics prove every row read passes the filter: the
    filter is the bounds alone and the row groups read lie wholly within them."""
    if ctx.request.predicate is not None or not ctx.bounds:
        return set()
    files = ctx.sst_files
    return {
        part.path
        for part in parts
        if part.row_groups and files.covered(part.file, ctx.bounds, part.row_groups)
    }


def read(
    ctx: ScanContext,
    parts: Sequence[Part],
    *,
    deletes: bool,
    covered: Set[str] = frozenset(),
    outside: Sequence[tuple[int, int]] = (),
) -> Iterator[pa.Table]:
    """Rows of SST ``parts`` no other source has versions of (those ``outside`` the
    given [lo, hi) time zones), read through the decoded chunk cache and filtered there;
    parts in ``covered`` need no filter by the bounds."""
    if not parts:
        return
    # A lone source's deletion markers shadow nothing else: they are just left out.
    # The filter reads columns the scan may not return, so a source that needs no
    # merge reads only the requested columns and those.
    kind = pc.field(KIND) == pa.scalar(PUT, pa.uint8()) if deletes else None
    excluded = [_outside(ctx, lo, hi) for lo, hi in outside]
    extra = all_of(p for p in (kind, *excluded) if p is not None)
    extra_columns = [KIND] if deletes else []
    if outside:
        extra_columns.append(ctx.schema.timestamp_key)
    predicate = all_of(p for p in (ctx.request.predicate, extra) if p is not None)
    columns = ctx.direct_columns()
    with_seq = [*columns, SEQ] if ctx.ranges else columns
    for whole in (True, False):
        for table in scan_unordered(
            [p for p in parts if (p.path in covered) == whole],
            ctx.schema,
            with_seq,
            decoded=ctx.sst_files.decoded,
            bounds=None if whole else ctx.bounds,
            predicate=extra if whole else predicate,
            predicate_columns=[*ctx.filter_columns, *extra_columns],
            footers=ctx.footers,
            dictionary=() if ctx.ranges else ctx.dictionary,
        ):
            yield from ctx.finish(table, filtered=True)


def _outside(ctx: ScanContext, lo: int, hi: int) -> pc.Expression:
    """Rows whose timestamp lies outside [lo, hi)."""
    ts = pc.field(ctx.schema.timestamp_key)
    typ = ctx.schema.column(ctx.schema.timestamp_key).type.arrow()
    return ~((ts >= pa.scalar(lo, typ)) & (ts < pa.scalar(hi, typ)))
