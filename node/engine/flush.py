"""Flush: turn an immutable memtable into one SST per segment window.

Rows are sorted by (window, primary key, seq) in one pass, so each window is a contiguous,
key-sorted slice; OVERWRITE tables keep only the newest row per key. Each SST is written to a
local staging file and handed to the object store, which moves it into place atomically.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from node.engine.memtable import Memtable
from node.engine.options import TableOptions, UpdateMode
from node.engine.rows import newest_per_key
from node.engine.schema import SEQ, Schema
from node.engine.sst.meta import SstMeta
from node.engine.sst.writer import write_sst
from objectstore.api import ObjectStore

_WINDOW = "__window"


def sst_key(table_id: int, window_start_ms: int) -> str:
    return f"tables/{table_id}/{window_start_ms}/{uuid.uuid4().hex}.parquet"


def split_sorted_by_window(
    rows: pa.Table, schema: Schema, options: TableOptions
) -> list[tuple[int, pa.Table]]:
    """``rows`` sorted by (primary key, seq) within each segment window, one table per window,
    deduplicated in OVERWRITE mode."""
    seg = options.segment_duration_ms
    ts = rows.column(schema.timestamp_key).cast(pa.int64()).to_numpy()
    windows = np.floor_divide(ts, seg)
    keys = [*schema.primary_key, SEQ]
    if windows.size and windows.min() != windows.max():
        rows = rows.append_column(_WINDOW, pa.array(windows))
        keys.insert(0, _WINDOW)
    idx = pc.sort_indices(rows, sort_keys=[(k, "ascending") for k in keys])
    rows = rows.take(idx)
    if _WINDOW in rows.schema.names:
        windows = rows.column(_WINDOW).to_numpy()
        rows = rows.drop_columns([_WINDOW])
    else:
        windows = np.full(rows.num_rows, windows[0] if windows.size else 0)
    bounds = np.flatnonzero(np.diff(windows)) + 1
    out: list[tuple[int, pa.Table]] = []
    for start, end in zip(
        np.concatenate(([0], bounds)), np.concatenate((bounds, [rows.num_rows])), strict=True
    ):
        part = rows.slice(int(start), int(end - start))
        if options.update_mode is UpdateMode.OVERWRITE:
            part = newest_per_key(part, schema.primary_key)
        out.append((int(windows[start]) * seg, part))
    return out


def flush_memtable(
    memtable: Memtable,
    *,
    table_id: int,
    schema: Schema,
    options: TableOptions,
    store: ObjectStore,
    staging_dir: str,
) -> list[SstMeta]:
    """Write the memtable's rows as SSTs into ``store``; the caller commits them."""
    batches: Sequence[pa.RecordBatch] = memtable.batches()
    if not batches:
        return []
    rows = pa.Table.from_batches(batches, schema=schema.storage_arrow()).combine_chunks()
    metas: list[SstMeta] = []
    for window_start, part in split_sorted_by_window(rows, schema, options):
        key = sst_key(table_id, window_start)
        local = os.path.join(staging_dir, f"{uuid.uuid4().hex}.parquet")
        try:
            meta = write_sst(
                part, table_id=table_id, schema=schema, options=options, local_path=local, key=key
            )
            store.put_file(key, local)
        finally:
            if os.path.exists(local):
                os.unlink(local)
        metas.append(meta)
    return metas
