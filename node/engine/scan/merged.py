"""Merged groups: sources that overlap in time read together through the k-way merge.

Applies to a group of overlapping sources whose overlap zones hold too many rows for the split
strategy, and to a lone SST lacking a column the scan needs (the merge's conforming fills it).
The ordered strategy merges every source this way.

Correct because each source is read in primary-key order with its sequence and kind columns
and pruned on key columns only (a newer version that fails the filter must still be read to
shadow an older one that passes it), so the merge sees every version of a key together and
resolves it as the table's update mode says (:func:`node.engine.merge.merge_sorted`); range
tombstones and the filter are applied to what it returns.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pyarrow as pa

from node.engine.merge import merge_sorted
from node.engine.options import UpdateMode
from node.engine.scan.context import ScanContext, Source
from node.engine.scan.pruning import pruned
from node.engine.sst.reader import conform_batches, read_sorted, reversed_rows


def read(ctx: ScanContext, group: Sequence[Source]) -> Iterator[pa.Table]:
    yield from ctx.finish_all(merge(ctx, group, descending=False))


def merge(ctx: ScanContext, group: Sequence[Source], *, descending: bool) -> Iterator[pa.Table]:
    """The resolved rows of ``group`` in primary-key order (or its reverse), markers of
    deleted keys dropped, before range tombstones and the filter."""
    inputs = [sorted_rows(ctx, s, descending=descending) for s in group]
    dedup = ctx.options.update_mode is UpdateMode.OVERWRITE
    return merge_sorted(inputs, ctx.schema.primary_key, dedup=dedup, descending=descending)


def sorted_rows(ctx: ScanContext, s: Source, *, descending: bool) -> Iterator[pa.RecordBatch]:
    """One source's rows in key order with the key, sequence and kind columns, conformed
    to the read schema; SST row groups are pruned on key columns only, so a newer version
    that does not match the filter still shadows an older one that does."""
    batch_size = ctx.request.batch_size
    if s.mem is not None:
        mem = s.mem.to_batches(max_chunksize=batch_size)
        if descending:
            mem = [reversed_rows(b) for b in reversed(mem)]
        return ctx.conformed(mem)
    assert s.sst is not None
    part = pruned(ctx, s.sst, ctx.schema.key_columns)
    present = ctx.sst_files.columns(s.sst.path)
    batches = read_sorted(
        part.path,
        part.row_groups,
        [c for c in ctx.read_columns if c in present],
        batch_size,
        descending=descending,
        metadata=ctx.footers.get(part.path),
        decoded=(ctx.sst_files.decoded, part.file),
    )
    return conform_batches(batches, ctx.read_schema, ctx.schema.fill_value)
