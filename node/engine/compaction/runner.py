"""Running one compaction task: a streaming merge of its input SSTs into new SSTs.

The inputs are read in primary-key order, one batch each, through the same k-way merge as the
read path: versions are resolved (newest wins in OVERWRITE mode, row deletions shadow older
rows), rows shadowed by the task's range tombstones or past its TTL floor are dropped, deletion
markers are dropped too when the task may purge them. Output goes to one writer per segment
window (inputs of one window normally yield one), cut into files of ``compaction_target_size``;
memory is one batch per input plus one row group per open writer. The function depends only on
the task, an object store and local scratch space, so a compaction node can run it as is.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from node.engine.compaction.task import CompactionTask
from node.engine.merge import merge_sorted
from node.engine.options import UpdateMode
from node.engine.sst.meta import SstMeta
from node.engine.sst.reader import SstFiles, conform_batches, read_sorted
from node.engine.sst.writer import SstWriter
from node.engine.tombstones import drop_shadowed
from objectstore.api import ObjectStore


def run_task(
    task: CompactionTask, *, store: ObjectStore, sst_files: SstFiles, staging_dir: str
) -> list[SstMeta]:
    """Merge the task's inputs into new SSTs in ``store``; returns their metas (the caller
    commits them). On failure no output is left behind but what a crash would leave
    (unreferenced files, which garbage collection removes)."""
    schema = task.schema
    storage = schema.storage_arrow()
    inputs: list[Iterator[pa.RecordBatch]] = []
    for f in task.inputs:
        footer = sst_files.footer(f.path)
        present = sst_files.columns(f.path)
        batches = read_sorted(
            sst_files.path(f.path),
            range(footer.num_row_groups),
            [n for n in storage.names if n in present],
            task.batch_size,
        )
        inputs.append(conform_batches(batches, storage, schema.fill_value))
    merged = merge_sorted(
        inputs,
        schema.primary_key,
        dedup=task.options.update_mode is UpdateMode.OVERWRITE,
        keep_markers=not task.purge_deletes,
    )
    out = _Outputs(task, store, staging_dir)
    try:
        for table in merged:
            table = drop_shadowed(table, task.range_tombstones, schema)
            if task.ttl_floor_ms is not None and table.num_rows:
                ts = table.column(schema.timestamp_key).cast(pa.int64())
                floor = pa.scalar(task.ttl_floor_ms, pa.int64())
                table = table.filter(pc.greater_equal(ts, floor))
            out.write(table)
        return out.close()
    except BaseException:
        out.abort()
        raise


class _Outputs:
    """Writers per segment window, each cut into files of the target size."""

    def __init__(self, task: CompactionTask, store: ObjectStore, staging_dir: str) -> None:
        self._task = task
        self._store = store
        self._staging_dir = staging_dir
        self._open: dict[int, tuple[SstWriter, str]] = {}
        self._done: list[SstMeta] = []

    def write(self, table: pa.Table) -> None:
        if table.num_rows == 0:
            return
        seg = self._task.options.segment_duration_ms
        ts = table.column(self._task.schema.timestamp_key).cast(pa.int64()).to_numpy()
        windows = np.floor_divide(ts, seg)
        present = np.unique(windows)
        for w in present:
            part = table if len(present) == 1 else table.filter(pa.array(windows == w))
            # Row group by row group, so that a file is cut close to the target size.
            step = self._task.options.num_rows_per_row_group
            for offset in range(0, part.num_rows, step):
                writer = self._writer(int(w) * seg)
                writer.write(part.slice(offset, step))
                if writer.bytes_written >= self._task.options.compaction_target_size:
                    self._finish(int(w) * seg)

    def _writer(self, window_start: int) -> SstWriter:
        if window_start not in self._open:
            local = os.path.join(self._staging_dir, f"{uuid.uuid4().hex}.parquet")
            key = f"{self._task.output_prefix}/{window_start}/{uuid.uuid4().hex}.parquet"
            writer = SstWriter(
                table_id=self._task.table_id,
                schema=self._task.schema,
                options=self._task.options,
                local_path=local,
                key=key,
                applied_seq=self._task.applied_seq,
            )
            self._open[window_start] = (writer, local)
        return self._open[window_start][0]

    def _finish(self, window_start: int) -> None:
        writer, local = self._open.pop(window_start)
        try:
            meta = writer.close()
            self._store.put_file(meta.path, local)
            self._done.append(meta)
        finally:
            if os.path.exists(local):
                os.unlink(local)

    def close(self) -> list[SstMeta]:
        for window_start in list(self._open):
            self._finish(window_start)
        return self._done

    def abort(self) -> None:
        for writer, local in self._open.values():
            writer.abort()
            if os.path.exists(local):
                os.unlink(local)
        self._open.clear()
        for meta in self._done:
            self._store.delete(meta.path)
        self._done.clear()
