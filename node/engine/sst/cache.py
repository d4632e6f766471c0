"""What scans derive from SST files, kept in memory up to one byte budget.

SSTs are immutable, so what is read or derived from one (its local path, parsed footer, the
columns it has, its tombstones, row-group guarantee expressions, series directory, column
statistics) never goes stale: it is made once, kept, evicted least recently used first when
the budget is spent, and dropped when the file is forgotten (compaction or GC removed it).
One budget over every kind bounds the memory, where a count per kind would let a few large
footers take any amount. Entry sizes are estimates (a parsed footer's or an expression's
memory is not measurable from Python), made once when the entry is stored.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, Literal, TypeVar, cast

from gnomon.errors import InvalidArgument
from node.engine.stats import CacheStats

V = TypeVar("V")

Kind = Literal[
    "path", "footer", "tombstones", "columns", "guarantees", "series", "ranges", "latest"
]

#: (kind, file key, what of the file: None, or the columns or tags it was derived for)
EntryKey = tuple[Kind, str, Hashable]


class FileCache:
    def __init__(self, capacity_bytes: int) -> None:
        if capacity_bytes < 1:
            raise InvalidArgument(
                f"SST file cache capacity must be at least 1 byte, got {capacity_bytes}"
            )
        self.capacity_bytes = capacity_bytes
        self._items: OrderedDict[EntryKey, tuple[Any, int]] = OrderedDict()
        self._by_file: dict[str, set[EntryKey]] = {}
        self._bytes = 0
        self._lock = threading.Lock()
        self._hits = 0
        self._misses = 0

    def get_or_load(
        self,
        kind: Kind,
        file: str,
        detail: Hashable,
        load: Callable[[], V],
        size: Callable[[V], int],
    ) -> V:
        """The cached value, or ``load()`` stored at its estimated ``size`` in bytes (loaded
        outside the lock: loads may be slow, and two racing loads of an immutable file's
        value agree)."""
        key: EntryKey = (kind, file, detail)
        with self._lock:
            held = self._items.get(key)
            if held is not None:
                self._items.move_to_end(key)
                self._hits += 1
                return cast(V, held[0])
            self._misses += 1
        value = load()
        self._put(key, value, max(1, size(value)))
        return value

    def _put(self, key: EntryKey, value: object, size: int) -> None:
        if size > self.capacity_bytes:
            return  # would evict everything else and be evicted next
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            self._items[key] = (value, size)
            self._by_file.setdefault(key[1], set()).add(key)
            self._bytes += size
            while self._bytes > self.capacity_bytes:
                evicted, (_, evicted_size) = self._items.popitem(last=False)
                self._bytes -= evicted_size
                self._unindex(evicted)

    def _unindex(self, key: EntryKey) -> None:
        keys = self._by_file.get(key[1])
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self._by_file[key[1]]

    def forget(self, file: str) -> None:
        """Drop every entry of ``file``."""
        with self._lock:
            for key in self._by_file.pop(file, ()):
                _, size = self._items.pop(key)
                self._bytes -= size

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._by_file.clear()
            self._bytes = 0

    def stats(self) -> CacheStats:
        with self._lock:
            return CacheStats(self._bytes, self.capacity_bytes, self._hits, self._misses)
