"""A small thread-safe LRU map for immutable values (file footers, tombstone files, manifest
commits): values are shared between callers, so they must never be changed."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

from gnomon.errors import InvalidArgument

K = TypeVar("K")
V = TypeVar("V")


class Lru(Generic[K, V]):
    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise InvalidArgument(f"cache capacity must be at least 1, got {capacity}")
        self._capacity = capacity
        self._items: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def put(self, key: K, value: V) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self._capacity:
                self._items.popitem(last=False)

    def get_or_load(self, key: K, load: Callable[[K], V]) -> V:
        """The cached value, or ``load(key)`` cached (outside the lock: loads may be slow, and
        two racing loads of an immutable value agree)."""
        value = self.get(key)
        if value is None:
            value = load(key)
            self.put(key, value)
        return value

    def pop(self, key: K) -> None:
        with self._lock:
            self._items.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
