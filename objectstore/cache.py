"""A bounded local-disk read-through cache of immutable objects (SSTs) of any ObjectStore.

Readers that need a local file (pyarrow's dataset scanner, memory maps) ask the cache for the
object's path; a missing object is downloaded once, and the least recently used files are
evicted when the total size goes over the capacity.

Layout::

    <root>/objects/<sha256 of the key><extension>   the cached copies
    <root>/staging/                                 downloads in progress, emptied on open

Cached copies survive a restart: an open indexes the files already there, oldest download
first, and trims them to the capacity. One cache per root directory.

Objects must be immutable under their keys, as SSTs are (each flush or compaction writes a new
key): a cached copy is never checked against the store again. Call :meth:`SstCache.discard`
when an object is deleted, so that its copy does not wait for eviction.

Eviction and open files: eviction unlinks the file, and on Linux (POSIX) a file that is open
stays readable until closed, so a reader that opened the path is never cut off. The window is
between getting a path and opening it: :meth:`SstCache.local_path` guarantees that the path it
returns exists when it returns, and the file is the most recently used one then, so only a
capacity's worth of other downloads can evict it. Callers that hold paths for a long time
before opening them (a scan planning many files at once) should hold them with
:meth:`SstCache.pinned`, which keeps a file until the block ends, or use :meth:`SstCache.open`.
Pinned files may take the cache over its capacity for as long as they are pinned.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import threading
import uuid
from collections import Counter, OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import BinaryIO

from gnomon.errors import InvalidArgument, Unavailable
from objectstore.api import ObjectStore
from objectstore.local import check_key

_OBJECTS = "objects"
_STAGING = "staging"
_COPY_CHUNK = 8 << 20
_MAX_EXTENSION = 16
# A caller that waited for another thread's download finds the file, unless a discard raced
# it; after this many rounds something keeps discarding the key.
_MAX_ROUNDS = 8


@dataclass(frozen=True)
class CacheStats:
    hits: int
    misses: int
    downloads: int
    evictions: int
    size_bytes: int
    files: int
    capacity_bytes: int


class _Download:
    """One download in progress; callers wanting the same key wait for it."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.error: BaseException | None = None


def _file_name(key: str) -> str:
    # Hashed names keep every key to one flat, fixed-length file name (no directories to prune,
    # no name-length limits); the extension is kept for people looking at the directory.
    extension = os.path.splitext(key.rsplit("/", 1)[-1])[1]
    if len(extension) > _MAX_EXTENSION or not extension[1:].isalnum():
        extension = ""
    return hashlib.sha256(key.encode()).hexdigest() + extension


class SstCache:
    """Local copies of ``store``'s objects under ``root``, at most ``capacity_bytes`` in total
    (except for pinned files). Thread-safe. Provides ``local_path(key)`` like the stores whose
    objects are already local files."""

    def __init__(self, store: ObjectStore, root: str, *, capacity_bytes: int) -> None:
        if capacity_bytes <= 0:
            raise InvalidArgument(f"cache capacity must be positive, not {capacity_bytes}")
        self._store = store
        self._root = os.path.abspath(root)
        self._objects = os.path.join(self._root, _OBJECTS)
        self._staging = os.path.join(self._root, _STAGING)
        self._capacity = capacity_bytes
        self._lock = threading.Lock()
        # File name -> size, least recently used first.
        self._entries: OrderedDict[str, int] = OrderedDict()
        self._size = 0
        self._pins: Counter[str] = Counter()
        self._downloads_in_progress: dict[str, _Download] = {}
        self._hits = self._misses = self._downloads = self._evictions = 0
        try:
            shutil.rmtree(self._staging, ignore_errors=True)
            os.makedirs(self._staging, exist_ok=True)
            os.makedirs(self._objects, exist_ok=True)
            self._index_existing()
        except OSError as e:
            raise Unavailable(f"cannot open the object cache at {self._root!r}: {e}") from e

    @property
    def root(self) -> str:
        return self._root

    @property
    def capacity_bytes(self) -> int:
        return self._capacity

    @property
    def hits(self) -> int:
        return self._hits

    @property
    def misses(self) -> int:
        return self._misses

    def stats(self) -> CacheStats:
        with self._lock:
            return CacheStats(
                hits=self._hits,
                misses=self._misses,
                downloads=self._downloads,
                evictions=self._evictions,
                size_bytes=self._size,
                files=len(self._entries),
                capacity_bytes=self._capacity,
            )

    def __repr__(self) -> str:
        return f"SstCache({self._store!r}, {self._root!r}, capacity_bytes={self._capacity})"

    # -- access ---------------------------------------------------------------------------------

    def local_path(self, key: str) -> str:
        """The local copy of ``key``, downloaded first if needed (NotFound if the store has no
        such object). The file exists when this returns; see the module notes on eviction."""
        name = self._pin(key)
        try:
            return self._ensure(key, name)
        finally:
            with self._lock:
                self._unpin(name)

    @contextmanager
    def pinned(self, key: str) -> Iterator[str]:
        """The local copy of ``key``, kept from eviction until the block ends."""
        name = self._pin(key)
        try:
            yield self._ensure(key, name)
        finally:
            with self._lock:
                self._unpin(name)
                self._evict()

    def open(self, key: str) -> BinaryIO:
        """The local copy of ``key``, opened: it stays readable even if evicted later."""
        with self.pinned(key) as path:
            try:
                return open(path, "rb")
            except OSError as e:
                raise Unavailable(f"cannot open the cached copy of {key!r}: {e}") from e

    def discard(self, key: str) -> bool:
        """Drop the copy of ``key``; True if there was one. For objects deleted from the store,
        so nobody should be reading it: unlike eviction, this ignores pins."""
        check_key(key)
        name = _file_name(key)
        with self._lock:
            size = self._entries.pop(name, None)
            if size is None:
                return False
            self._size -= size
            self._remove_file(name)
        return True

    # -- internals ------------------------------------------------------------------------------

    def _path(self, name: str) -> str:
        return os.path.join(self._objects, name)

    def _pin(self, key: str) -> str:
        check_key(key)
        name = _file_name(key)
        with self._lock:
            self._pins[name] += 1
        return name

    def _unpin(self, name: str) -> None:
        self._pins[name] -= 1
        if self._pins[name] <= 0:
            del self._pins[name]

    def _ensure(self, key: str, name: str) -> str:
        """The path of ``name``'s copy, downloading it unless present or being downloaded.
        The caller holds a pin on ``name``, so the copy cannot be evicted meanwhile."""
        counted = False
        for _ in range(_MAX_ROUNDS):
            with self._lock:
                if name in self._entries:
                    self._entries.move_to_end(name)
                    if not counted:
                        self._hits += 1
                    return self._path(name)
                if not counted:
                    self._misses += 1
                    counted = True
                download = self._downloads_in_progress.get(name)
                leader = download is None
                if download is None:
                    download = self._downloads_in_progress[name] = _Download()
            if leader:
                self._download(key, name, download)
                return self._path(name)
            download.done.wait()
            if download.error is not None:
                raise download.error
        raise Unavailable(f"cached copy of {key!r} kept being discarded while downloading it")

    def _download(self, key: str, name: str, download: _Download) -> None:
        staged = os.path.join(self._staging, uuid.uuid4().hex)
        try:
            try:
                with self._store.open_input(key) as source, open(staged, "xb") as target:
                    shutil.copyfileobj(source, target, _COPY_CHUNK)
                    target.flush()
                    # Durable before the rename, so a copy found after a crash is complete.
                    os.fsync(target.fileno())
                    size = os.fstat(target.fileno()).st_size
                os.replace(staged, self._path(name))
            except OSError as e:
                raise Unavailable(f"cannot cache object {key!r} in {self._root!r}: {e}") from e
        except BaseException as e:
            with suppress(FileNotFoundError):
                os.unlink(staged)
            with self._lock:
                del self._downloads_in_progress[name]
                download.error = e
            download.done.set()
            raise
        with self._lock:
            del self._downloads_in_progress[name]
            self._entries[name] = size
            self._size += size
            self._downloads += 1
            self._evict()
        download.done.set()

    def _evict(self) -> None:
        """Remove least recently used unpinned copies while over capacity (lock held)."""
        if self._size <= self._capacity:
            return
        for name in list(self._entries):
            if self._size <= self._capacity:
                break
            if self._pins[name] > 0:
                continue
            self._size -= self._entries.pop(name)
            self._evictions += 1
            self._remove_file(name)

    def _remove_file(self, name: str) -> None:
        # A file that cannot be removed only wastes space until the next open re-indexes it.
        with suppress(OSError):
            os.unlink(self._path(name))

    def _index_existing(self) -> None:
        found: list[tuple[int, str, int]] = []
        with os.scandir(self._objects) as entries:
            for entry in entries:
                if entry.is_file(follow_symlinks=False):
                    st = entry.stat(follow_symlinks=False)
                    found.append((st.st_mtime_ns, entry.name, st.st_size))
                else:
                    shutil.rmtree(entry.path, ignore_errors=True)
        for _, name, size in sorted(found):
            self._entries[name] = size
            self._size += size
        self._evict()
