"""The streaming k-way merge of sorted sources by primary key.

Each step looks at the current batch of every input, takes from all of them the rows whose key
is <= the smallest of their last keys (no later row of any input can sort before those), sorts
that slice by (key, seq) and, in OVERWRITE mode, keeps the newest row per key. Memory is bounded
by one batch per input, whatever the table size, and all work on rows is vectorised.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pyarrow as pa

from node.engine.rows import count_le, key_at, key_lt, newest_per_key, sort_by_key


def merge_sorted(
    inputs: Sequence[Iterator[pa.RecordBatch]],
    key: Sequence[str],
    *,
    dedup: bool,
) -> Iterator[pa.Table]:
    """Merge ``inputs`` (each sorted by ``key`` with unique keys when ``dedup``) into sorted
    tables; with ``dedup`` only the row with the highest ``__seq`` of a key survives."""
    heads: list[pa.RecordBatch | None] = [_next(it) for it in inputs]
    while True:
        live = [i for i, h in enumerate(heads) if h is not None]
        if not live:
            return
        if len(live) == 1:
            i = live[0]
            head = heads[i]
            assert head is not None
            yield pa.Table.from_batches([head])
            for batch in inputs[i]:
                if batch.num_rows:
                    yield pa.Table.from_batches([batch])
            return
        bound = None
        for i in live:
            head = heads[i]
            assert head is not None
            last = key_at(head, key, head.num_rows - 1)
            if bound is None or key_lt(last, bound):
                bound = last
        assert bound is not None
        taken: list[pa.RecordBatch] = []
        for i in live:
            head = heads[i]
            assert head is not None
            n = count_le(head, key, bound)
            if n:
                taken.append(head.slice(0, n))
            heads[i] = head.slice(n) if n < head.num_rows else _next(inputs[i])
        step = sort_by_key(pa.Table.from_batches(taken), key)
        yield newest_per_key(step, key) if dedup else step


def _next(it: Iterator[pa.RecordBatch]) -> pa.RecordBatch | None:
    for batch in it:
        if batch.num_rows:
            return batch
    return None
