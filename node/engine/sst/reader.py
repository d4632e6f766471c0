"""Reading SSTs: local access to files of any object store, cached footers, and row-group
pruning by a filter against the row groups' min/max statistics.

Pruning works by turning each row group's statistics into a guarantee expression
(``col >= min and col <= max`` per column) and letting pyarrow's dataset layer simplify the
scan filter under it: a row group whose simplified filter is ``false`` cannot hold a matching
row. Which columns' statistics may be used is the caller's choice: when a row group is merged
with other sources, only columns fixed by the primary key are safe (a newer version of a row may
change the others).
"""

from __future__ import annotations

import os
import threading
import uuid
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from typing import Protocol, runtime_checkable

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from objectstore.api import ObjectStore


@runtime_checkable
class LocalPathStore(Protocol):
    def local_path(self, key: str) -> str:
        """The local file holding ``key`` (NotFound if absent)."""


class SstFiles:
    """Local paths of SST objects and their cached Parquet footers.

    A store whose objects are local files hands out their paths; objects of any other store
    are downloaded once into ``cache_dir`` (SSTs are immutable, so a cached copy never goes
    stale)."""

    def __init__(self, store: ObjectStore, cache_dir: str, *, footers: int = 4096) -> None:
        self._store = store
        self._cache_dir = cache_dir
        self._footers: OrderedDict[str, pq.FileMetaData] = OrderedDict()
        self._max_footers = footers
        self._lock = threading.Lock()

    def path(self, key: str) -> str:
        if isinstance(self._store, LocalPathStore):
            return self._store.local_path(key)
        local = os.path.join(self._cache_dir, key)
        if not os.path.exists(local):
            os.makedirs(os.path.dirname(local), exist_ok=True)
            tmp = f"{local}.{uuid.uuid4().hex}.part"
            with open(tmp, "wb") as f:
                f.write(self._store.get(key))
            os.replace(tmp, local)
        return local

    def footer(self, key: str) -> pq.FileMetaData:
        with self._lock:
            meta = self._footers.get(key)
            if meta is not None:
                self._footers.move_to_end(key)
                return meta
        meta = pq.read_metadata(self.path(key))
        with self._lock:
            self._footers[key] = meta
            while len(self._footers) > self._max_footers:
                self._footers.popitem(last=False)
        return meta

    def forget(self, key: str) -> None:
        with self._lock:
            self._footers.pop(key, None)


def _row_group_guarantee(
    meta: pq.FileMetaData, rg: int, columns: dict[str, pa.DataType]
) -> pc.Expression:
    guarantee = pc.scalar(True)
    group = meta.row_group(rg)
    for i in range(group.num_columns):
        chunk = group.column(i)
        name = chunk.path_in_schema
        typ = columns.get(name)
        stats = chunk.statistics
        if typ is None or stats is None or not stats.has_min_max or stats.null_count:
            continue
        lo = pa.scalar(stats.min, type=typ)
        hi = pa.scalar(stats.max, type=typ)
        guarantee = guarantee & (pc.field(name) >= lo) & (pc.field(name) <= hi)
    return guarantee


def prune_row_groups(
    meta: pq.FileMetaData,
    schema: pa.Schema,
    stat_columns: Iterable[str],
    filter: pc.Expression | None,
) -> list[int]:
    """Row groups of the file that may hold rows matching ``filter``, judged only by the
    statistics of ``stat_columns``."""
    groups = list(range(meta.num_row_groups))
    if filter is None or not groups:
        return groups
    usable = {name: schema.field(name).type for name in stat_columns if name in schema.names}
    guarantees = [_row_group_guarantee(meta, rg, usable) for rg in groups]
    fake = ds.FileSystemDataset.from_paths(
        [f"/{rg}" for rg in groups],
        schema=schema,
        format=ds.ParquetFileFormat(),
        filesystem=pafs.LocalFileSystem(),
        partitions=guarantees,
    )
    return [int(f.path[1:]) for f in fake.get_fragments(filter=filter)]


def read_sorted(
    path: str,
    row_groups: Sequence[int],
    columns: Sequence[str],
    batch_size: int,
) -> Iterator[pa.RecordBatch]:
    """The chosen row groups' rows in file order (which is primary-key order)."""
    if not row_groups:
        return
    pf = pq.ParquetFile(path)
    yield from pf.iter_batches(
        batch_size=batch_size, row_groups=list(row_groups), columns=list(columns)
    )


def scan_unordered(
    parts: Sequence[tuple[str, Sequence[int]]],
    schema: pa.Schema,
    columns: Sequence[str],
    filter: pc.Expression | None,
    batch_size: int,
) -> Iterator[pa.RecordBatch]:
    """Rows of many (file, row groups) parts matching ``filter``, in no particular order,
    decoded on pyarrow's thread pool."""
    fmt = ds.ParquetFileFormat()
    fs = pafs.LocalFileSystem()
    fragments = [fmt.make_fragment(path, fs, row_groups=list(rgs)) for path, rgs in parts if rgs]
    if not fragments:
        return
    dataset = ds.FileSystemDataset(fragments, schema, fmt, fs)
    scanner = dataset.scanner(
        columns=list(columns), filter=filter, batch_size=batch_size, use_threads=True
    )
    for batch in scanner.to_batches():
        if batch.num_rows:
            yield batch
