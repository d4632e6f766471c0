"""Flush: turn an immutable memtable into one SST per segment window (plus one file of range
tombstones when the memtable holds any).

Rows are sorted by (window, primary key, seq) in one pass, so each window is a contiguous,
key-sorted slice whose versions are then resolved: OVERWRITE tables keep only the newest row per
key, deletion markers stay (they shadow rows of older SSTs) and rows shadowed by a deletion or a
range tombstone of the same memtable are dropped. So every flushed file is clean of the range
tombstones up to its own highest sequence. Each SST is written to a local staging file and
handed to the object store, which moves it into place atomically.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from node.engine.memtable import Memtable
from node.engine.options import TableOptions, UpdateMode
from node.engine.rows import resolve_versions
from node.engine.schema import SEQ, Schema
from node.engine.sst.meta import SstMeta
from node.engine.sst.writer import write_sst
from node.engine.tombstones import drop_shadowed, write_tombstone_file
from objectstore.api import ObjectStore

_WINDOW = "__window"


def sst_key(table_id: int, window_start_ms: int) -> str:
    return f"tables/{table_id}/{window_start_ms}/{uuid.uuid4().hex}.parquet"


def tombstone_key(table_id: int) -> str:
    return f"tables/{table_id}/tombstones/{uuid.uuid4().hex}.parquet"


def put_staged(
    store: ObjectStore, staging_dir: str, key: str, write: Callable[..., SstMeta]
) -> SstMeta:
    """Write a file with ``write(local_path=...)`` into staging, then move it to ``key``."""
    local = os.path.join(staging_dir, f"{uuid.uuid4().hex}.parquet")
    try:
        meta = write(local_path=local)
        store.put_file(key, local)
        return meta
    finally:
        if os.path.exists(local):
            os.unlink(local)


#: Most (window, series) pairs :func:`_series_order` orders: its codes must fit 16 bits, which
#: numpy sorts by radix.
_MAX_SERIES_CODES = 1 << 16


def _in_time_order(rows: pa.Table, ts: np.ndarray) -> bool:
    """Whether ``rows`` are in (timestamp, seq) order: the seqs are compared only where
    timestamps tie, and not at all when every row has the same one (a staged batch)."""
    if not np.all(ts[1:] >= ts[:-1]):
        return False
    seq = rows.column(SEQ)
    lo, hi = pc.min_max(seq).values()
    if lo == hi:
        return True
    ties = np.flatnonzero(ts[1:] == ts[:-1])
    values = seq.to_numpy()
    return bool(np.all(values[ties + 1] >= values[ties]))


def _series_order(
    rows: pa.Table, schema: Schema, ts: np.ndarray, segment_ms: int
) -> tuple[np.ndarray, np.ndarray] | None:
    """The order of ``rows`` by (window, primary key, seq) when they are in (timestamp, seq)
    order already, as most writes and staged batches come, and where each window's rows
    start in it: a stable radix sort of one 16-bit code per row, the (window, series) pair,
    the series ranked by its key values, instead of a sort comparing every key column. Rows
    in time order hold each window as one block, which the sort keeps in place, so the
    windows are found by searching the timestamps. None where that does not apply: a
    primary key not ending with the timestamp, rows out of that order, a null in a key
    column, or more pairs than 16-bit codes hold."""
    *series, last = schema.primary_key
    if last != schema.timestamp_key or not series or len(ts) < 2:
        return None
    if not _in_time_order(rows, ts):
        return None
    first, final = int(ts[0]) // segment_ms, int(ts[-1]) // segment_ms
    size = final - first + 1
    codes: np.ndarray | None = None
    for name in series:
        column = rows.column(name)
        if column.null_count:
            return None
        encoded: Any = pc.dictionary_encode(column.combine_chunks())
        size *= len(encoded.dictionary)
        if size > _MAX_SERIES_CODES:
            return None
        # Ranked by Arrow's order of the values, the one the full sort compares them in.
        rank = np.empty(len(encoded.dictionary), dtype=np.uint16)
        rank[pc.sort_indices(encoded.dictionary).to_numpy()] = np.arange(len(rank))
        ranked = rank[encoded.indices.to_numpy()]
        if codes is None:
            codes = ranked
        else:
            codes *= len(rank)
            codes += ranked
    assert codes is not None  # a key of series columns and the timestamp
    edges = np.searchsorted(ts, np.arange(first + 1, final + 1) * segment_ms)
    starts = np.concatenate(([0], edges))
    per_window = size // (final - first + 1)
    codes += np.repeat(
        np.arange(0, size, per_window).astype(np.uint16), np.diff(starts, append=len(ts))
    )
    return np.argsort(codes, kind="stable"), np.unique(starts)


def split_sorted_by_window(
    rows: pa.Table, schema: Schema, options: TableOptions
) -> list[tuple[int, pa.Table]]:
    """``rows`` sorted by (primary key, seq) within each segment window, one table per window,
    with the versions of each key resolved (markers kept)."""
    seg = options.segment_duration_ms
    ts = rows.column(schema.timestamp_key).cast(pa.int64()).to_numpy()
    fast = _series_order(rows, schema, ts, seg)
    if fast is None:
        windows = np.floor_divide(ts, seg)
        names = [*schema.primary_key, SEQ]
        keys = rows.select(names)
        if windows.size and windows.min() != windows.max():
            keys = keys.append_column(_WINDOW, pa.array(windows))
            names.insert(0, _WINDOW)
        order = pc.sort_indices(keys, sort_keys=[(k, "ascending") for k in names]).to_numpy()
        starts = np.concatenate(([0], np.flatnonzero(np.diff(windows[order])) + 1))
    else:
        order, starts = fast
    # The order is a permutation of the rows: checking it against them once per column
    # would cost a pass over it each time.
    rows = pc.take(rows, pa.array(order), boundscheck=False)
    out: list[tuple[int, pa.Table]] = []
    dedup = options.update_mode is UpdateMode.OVERWRITE
    for start, end in zip(starts, np.append(starts[1:], rows.num_rows), strict=True):
        part = rows.slice(int(start), int(end - start))
        part = resolve_versions(part, schema.primary_key, dedup=dedup, keep_markers=True)
        if part.num_rows:
            out.append((int(ts[order[start]]) // seg * seg, part))
    return out


def _write_part(
    part: pa.Table,
    local_path: str,
    *,
    table_id: int,
    schema: Schema,
    options: TableOptions,
    key: str,
) -> SstMeta:
    return write_sst(
        part, table_id=table_id, schema=schema, options=options, local_path=local_path, key=key
    )


def flush_memtable(
    memtable: Memtable,
    *,
    table_id: int,
    options: TableOptions,
    store: ObjectStore,
    staging_dir: str,
) -> list[SstMeta]:
    """Write the memtable's rows and range tombstones as SSTs into ``store``; the caller
    commits them. The memtable's own schema is used: it may predate an ADD COLUMN."""
    schema = memtable.schema
    metas: list[SstMeta] = []
    ranges = memtable.ranges()
    batches: Sequence[pa.RecordBatch] = memtable.batches()
    if batches:
        rows = pa.Table.from_batches(batches, schema=schema.storage_arrow()).combine_chunks()
        rows = drop_shadowed(rows, ranges, schema)
        for window_start, part in split_sorted_by_window(rows, schema, options):
            key = sst_key(table_id, window_start)
            metas.append(
                put_staged(
                    store,
                    staging_dir,
                    key,
                    partial(
                        _write_part,
                        part,
                        table_id=table_id,
                        schema=schema,
                        options=options,
                        key=key,
                    ),
                )
            )
    if ranges:
        key = tombstone_key(table_id)
        metas.append(
            put_staged(
                store,
                staging_dir,
                key,
                partial(write_tombstone_file, ranges, schema_version=schema.version, key=key),
            )
        )
    return metas
