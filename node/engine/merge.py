"""The streaming k-way merge of sorted sources by primary key, for reads and compaction.

Each step looks at the current batch of every input, takes from all of them the rows whose key
comes no later than the earliest of their last keys (no later row of any input can sort before
those), sorts that slice by (key, seq) and resolves the versions of each key: in OVERWRITE mode
the newest row wins, and row deletions shadow every older row of their key in both modes.
Memory is bounded by one batch per input, whatever the table size, and all work on rows is
vectorised. Descending merges (reverse key order) take inputs that are themselves reversed.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import pyarrow as pa

from node.engine.rows import count_le, key_at, key_lt, resolve_versions, sort_by_key, strip_markers
from node.engine.schema import KIND, SEQ

#: Row positions carried through ordering and resolution of a merge step's key columns.
_ROW = "__row"


def merge_sorted(
    inputs: Sequence[Iterator[pa.RecordBatch]],
    key: Sequence[str],
    *,
    dedup: bool,
    keep_markers: bool = False,
    descending: bool = False,
) -> Iterator[pa.Table]:
    """Merge ``inputs`` into tables sorted by ``key`` (descending: reverse key order).

    Each input must be sorted the same way and already resolved on its own (as memtable views,
    flushed and compacted SSTs are). With ``dedup`` only the row with the highest ``__seq`` of
    a key survives; deletion markers (``__kind``) hide older rows of their key and are dropped,
    or with ``keep_markers`` kept (the newest per key) for output that is merged again later."""
    heads: list[pa.RecordBatch | None] = [_next(it) for it in inputs]
    while True:
        live = [i for i, h in enumerate(heads) if h is not None]
        if not live:
            return
        if len(live) == 1:
            i = live[0]
            head = heads[i]
            assert head is not None
            yield from _tail(head, inputs[i], keep_markers)
            return
        bound = None
        for i in live:
            head = heads[i]
            assert head is not None
            last = key_at(head, key, head.num_rows - 1)
            if bound is None or (key_lt(bound, last) if descending else key_lt(last, bound)):
                bound = last
        assert bound is not None
        taken: list[pa.RecordBatch] = []
        for i in live:
            head = heads[i]
            # A batch used up may be followed by more rows of the bound's key (APPEND sources
            # repeat keys): they belong to this step, or a deletion would miss some of them.
            while head is not None:
                n = count_le(head, key, bound, descending=descending)
                if n:
                    taken.append(head.slice(0, n))
                if n < head.num_rows:
                    head = head.slice(n)
                    break
                head = _next(inputs[i])
            heads[i] = head
        yield sort_resolve(
            pa.Table.from_batches(taken),
            key,
            dedup=dedup,
            keep_markers=keep_markers,
            descending=descending,
        )


def sort_resolve(
    data: pa.Table, key: Sequence[str], *, dedup: bool, keep_markers: bool, descending: bool
) -> pa.Table:
    """``resolve_versions(sort_by_key(data))``, with the whole rows gathered only once: the
    order and the surviving rows are worked out on the key, sequence and kind columns alone,
    then every column is taken at the surviving positions."""
    names = [*key, SEQ, *([KIND] if KIND in data.schema.names else [])]
    narrow = data.select(names).append_column(_ROW, pa.array(np.arange(data.num_rows)))
    narrow = sort_by_key(narrow, key, descending=descending)
    narrow = resolve_versions(narrow, key, dedup=dedup, keep_markers=keep_markers)
    return data.take(narrow.column(_ROW))


def _tail(
    head: pa.RecordBatch, rest: Iterator[pa.RecordBatch], keep_markers: bool
) -> Iterator[pa.Table]:
    # The last input left is resolved on its own: only its markers may need dropping.
    for batch in _chain(head, rest):
        table = pa.Table.from_batches([batch])
        out = table if keep_markers else strip_markers(table)
        if out.num_rows:
            yield out


def _chain(head: pa.RecordBatch, rest: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    yield head
    for batch in rest:
        if batch.num_rows:
            yield batch


def _next(it: Iterator[pa.RecordBatch]) -> pa.RecordBatch | None:
    for batch in it:
        if batch.num_rows:
            return batch
    return None
