"""Decoded column chunks of SST row groups, kept in memory up to a byte budget.

Decoding Parquet is most of what a scan of settled data costs (a row group of 8192 rows and a
dozen columns takes about half a millisecond, an all-host scan tens of milliseconds), and
dashboards ask for the same recent windows again and again. SSTs are immutable, so a decoded
column chunk never goes stale: it is kept by (file, row group, column, encoding) and evicted
least recently used first, as GreptimeDB's page cache and RocksDB's block cache keep theirs.
Entries of files compaction or GC removed are dropped when the file is forgotten.
"""

from __future__ import annotations

import itertools
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from gnomon.errors import InvalidArgument
from node.engine.bounds import numpy_values
from node.engine.stats import CacheStats

#: (file key, row group, column, decoded as a dictionary)
ChunkKey = tuple[str, int, str, bool]

#: Row groups of one read decoded together: enough to spread a call's set-up, few enough that
#: a large read holds little decoded data beyond what it hands out.
READ_BATCH = 16


class DecodedChunks:
    def __init__(self, capacity_bytes: int) -> None:
        if capacity_bytes < 0:
            raise InvalidArgument(
                f"decoded chunk cache capacity must be >= 0 bytes, got {capacity_bytes}"
            )
        self.capacity_bytes = capacity_bytes
        self._items: OrderedDict[ChunkKey, pa.ChunkedArray[Any]] = OrderedDict()
        #: Numpy arrays of chunks held (see :meth:`arrays`), None where numpy cannot hold one.
        self._arrays: dict[ChunkKey, np.ndarray | None] = {}
        self._by_file: dict[str, set[ChunkKey]] = {}
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    @property
    def bytes(self) -> int:
        return self._bytes

    def stats(self) -> CacheStats:
        with self._lock:
            return CacheStats(self._bytes, self.capacity_bytes, self.hits, self.misses)

    def read(
        self,
        file: str,
        path: str,
        row_groups: Sequence[int],
        columns: Sequence[str],
        *,
        dictionary: Sequence[str] = (),
        metadata: pq.FileMetaData | None = None,
        keep: bool | Callable[[], bool] = True,
    ) -> Iterator[pa.Table]:
        """Per row group of ``file`` (whose local copy is ``path``), in the order given, a
        table of ``columns``, string columns named in ``dictionary`` dictionary encoded as
        Parquet stores them. Chunks not held are decoded and kept unless ``keep`` is false
        (see :meth:`worth_keeping`; a callable is asked on the first miss, so that reads
        of chunks held never weigh their size): the row groups lacking the same columns
        are decoded in one call per :data:`READ_BATCH` of them (a call costs about 0.1 ms
        of set-up, as much as decoding a few columns of a row group)."""
        if not columns:  # the row groups' row counts, from the file
            reader = pq.ParquetFile(path, metadata=metadata)
            table = reader.read_row_groups(list(row_groups), columns=[], use_threads=True)
            yield from _pieces(table, [reader.metadata.row_group(rg).num_rows for rg in row_groups])
            return
        names = list(columns)
        for chunks in self._chunks(file, path, row_groups, columns, dictionary, metadata, keep):
            yield pa.Table.from_arrays([c for _, c in chunks], names=names)

    def arrays(
        self,
        file: str,
        path: str,
        row_groups: Sequence[int],
        columns: Sequence[str],
        *,
        metadata: pq.FileMetaData | None = None,
        keep: bool | Callable[[], bool] = True,
    ) -> Iterator[list[np.ndarray | None]]:
        """Per row group, as :meth:`read` reads it, each column as one numpy array where
        numpy holds its values as Arrow does (null-free integers, floats, and timestamps
        as integers of their unit), None elsewhere. The arrays of chunks held are made
        once and kept with them (views of their buffers: a point query's read otherwise
        pays for a table and a conversion per column and row group)."""
        for chunks in self._chunks(file, path, row_groups, columns, (), metadata, keep):
            yield [self._numpy(key, chunk) for key, chunk in chunks]

    def _numpy(self, key: ChunkKey, chunk: pa.ChunkedArray[Any]) -> np.ndarray | None:
        if key in self._arrays:
            return self._arrays[key]
        values = numpy_values(chunk.chunks, chunk.type)
        with self._lock:
            if self._items.get(key) is chunk:  # still held, not decoded again meanwhile
                self._arrays[key] = values
        return values

    def _chunks(
        self,
        file: str,
        path: str,
        row_groups: Sequence[int],
        columns: Sequence[str],
        dictionary: Sequence[str],
        metadata: pq.FileMetaData | None,
        keep: bool | Callable[[], bool],
    ) -> Iterator[list[tuple[ChunkKey, pa.ChunkedArray[Any]]]]:
        """Per row group, in the order given, its ``columns``' chunks with their keys (see
        :meth:`read`)."""
        encoded = set(dictionary)
        reader: pq.ParquetFile | None = None
        keeping: bool | None = None
        for start in range(0, len(row_groups), READ_BATCH):
            window = row_groups[start : start + READ_BATCH]
            keys = {rg: [(file, rg, c, c in encoded) for c in columns] for rg in window}
            found = self._found([k for rg in window for k in keys[rg]])
            lacking: dict[tuple[str, ...], list[int]] = {}
            for rg in window:
                missing = tuple(c for c, k in zip(columns, keys[rg], strict=True) if k not in found)
                if missing:
                    lacking.setdefault(missing, []).append(rg)
            for missing, rgs in lacking.items():
                if keeping is None:
                    keeping = keep() if callable(keep) else keep
                if reader is None:
                    reader = pq.ParquetFile(
                        path,
                        metadata=metadata,
                        read_dictionary=[c for c in columns if c in encoded] or None,
                    )
                table = reader.read_row_groups(rgs, columns=list(missing), use_threads=True)
                lengths = [reader.metadata.row_group(rg).num_rows for rg in rgs]
                fresh = [
                    ((file, rg, c, c in encoded), piece)
                    for c in missing
                    for rg, piece in zip(
                        rgs, _split(table.column(c), lengths, own=keeping), strict=True
                    )
                ]
                found.update(fresh)
                if keeping:
                    self._keep(fresh)
            for rg in window:
                yield [(k, found[k]) for k in keys[rg]]

    def _found(self, keys: Sequence[ChunkKey]) -> dict[ChunkKey, pa.ChunkedArray[Any]]:
        found: dict[ChunkKey, pa.ChunkedArray[Any]] = {}
        with self._lock:
            for key in keys:
                chunk = self._items.get(key)
                if chunk is not None:
                    self._items.move_to_end(key)
                    found[key] = chunk
            self.hits += len(found)
            self.misses += len(keys) - len(found)
        return found

    def worth_keeping(self, decoded_bytes: int) -> bool:
        """Whether a read decoding about this many bytes should keep its chunks: one larger
        than a quarter of the budget (a scan of a whole large table, say) would push out
        what smaller, repeated reads need, and would not fit again anyway."""
        return decoded_bytes <= self.capacity_bytes // 4

    def _keep(self, chunks: Sequence[tuple[ChunkKey, pa.ChunkedArray[Any]]]) -> None:
        if self.capacity_bytes == 0:
            return
        with self._lock:
            for key, chunk in chunks:
                if key in self._items:
                    continue  # a racing read decoded it too
                size = chunk.nbytes
                if size > self.capacity_bytes:
                    continue
                self._items[key] = chunk
                self._by_file.setdefault(key[0], set()).add(key)
                self._bytes += size
            while self._bytes > self.capacity_bytes:
                self._drop(next(iter(self._items)))

    def _drop(self, key: ChunkKey) -> None:
        chunk = self._items.pop(key)
        self._arrays.pop(key, None)
        self._bytes -= chunk.nbytes
        keys = self._by_file[key[0]]
        keys.discard(key)
        if not keys:
            del self._by_file[key[0]]

    def close(self) -> None:
        """Drop every chunk (the engine closed)."""
        self.clear()

    def clear(self) -> None:
        """Drop every chunk."""
        with self._lock:
            self._items.clear()
            self._arrays.clear()
            self._by_file.clear()
            self._bytes = 0

    def forget(self, file: str) -> None:
        """Drop every chunk of ``file`` (it was removed)."""
        with self._lock:
            for key in list(self._by_file.get(file, ())):
                self._drop(key)


def _pieces(table: pa.Table, lengths: Sequence[int]) -> list[pa.Table]:
    """``table`` cut into consecutive pieces of ``lengths`` rows."""
    offsets = [0, *itertools.accumulate(lengths)]
    return [table.slice(o, n) for o, n in zip(offsets, lengths, strict=False)]


def _split(
    column: pa.ChunkedArray[Any], lengths: Sequence[int], *, own: bool
) -> list[pa.ChunkedArray[Any]]:
    """A column read over several row groups, one piece per row group. Pyarrow hands
    dictionary columns back a chunk per row group, others in one chunk: pieces of those are
    slices, copied into buffers of their own when ``own`` (a cached slice would keep its
    whole parent alive, unaccounted for, after its siblings were evicted)."""
    chunks = column.chunks
    if [len(c) for c in chunks] == list(lengths):
        return [pa.chunked_array([c], column.type) for c in chunks]
    offsets = [0, *itertools.accumulate(lengths)]
    pieces = []
    for o, n in zip(offsets, lengths, strict=False):
        piece = column.slice(o, n)
        if own and piece.num_chunks:
            piece = pa.chunked_array([pa.concat_arrays(piece.chunks)], column.type)
        pieces.append(piece)
    return pieces
