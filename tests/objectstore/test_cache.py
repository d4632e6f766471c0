"""SstCache: a bounded, LRU, read-through local copy of a store's objects."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import BinaryIO

import pytest

from gnomon.errors import InvalidArgument, NotFound, Unavailable
from objectstore.cache import SstCache
from objectstore.local import LocalObjectStore

KIB = 1024
MIB_4 = 4 << 20

pytestmark = [pytest.mark.unit, pytest.mark.timeout(60)]


class CountingStore(LocalObjectStore):
    """A local store that counts object reads and can hold them until released, to line up
    concurrent requests behind one download."""

    def __init__(self, root: str) -> None:
        super().__init__(root)
        self.reads: list[str] = []
        self.reading = threading.Event()
        self.release = threading.Event()
        self.release.set()
        self.fail_with: BaseException | None = None
        self._count_lock = threading.Lock()

    def open_input(self, key: str) -> BinaryIO:
        self._count(key)
        return super().open_input(key)

    def get(self, key: str) -> bytes:
        self._count(key)
        return super().get(key)

    def get_range(self, key: str, start: int, length: int) -> bytes:
        self._count(key)
        return super().get_range(key, start, length)

    def _count(self, key: str) -> None:
        with self._count_lock:
            self.reads.append(key)
        self.reading.set()
        assert self.release.wait(timeout=10), "test never released the download"
        if self.fail_with is not None:
            raise self.fail_with


@pytest.fixture
def store(tmp_path: Path) -> CountingStore:
    return CountingStore(str(tmp_path / "store"))


def _put(store: CountingStore, key: str, size: int) -> bytes:
    data = bytes([len(key) % 251]) * size
    store.put(key, data)
    return data


def _cached_files(cache: SstCache) -> int:
    return len(os.listdir(os.path.join(cache.root, "objects")))


def test_read_through_hits_and_misses(store: CountingStore, tmp_path: Path) -> None:
    data = _put(store, "tables/1/a.parquet", 3 * KIB)
    cache = SstCache(store, str(tmp_path / "cache"), capacity_bytes=10 * KIB)
    path = cache.local_path("tables/1/a.parquet")
    assert Path(path).read_bytes() == data
    assert path.endswith(".parquet")
    assert cache.local_path("tables/1/a.parquet") == path
    assert cache.local_path("tables/1/a.parquet") == path
    assert store.reads == ["tables/1/a.parquet"]
    assert (cache.hits, cache.misses) == (2, 1)
    stats = cache.stats()
    assert (stats.downloads, stats.files, stats.size_bytes) == (1, 1, 3 * KIB)


def test_satisfies_the_engine_local_path_protocol(store: CountingStore, tmp_path: Path) -> None:
    # Imported here so that work in progress on the engine fails this test alone.
    from node.engine.sst.reader import LocalPathStore

    assert isinstance(SstCache(store, str(tmp_path / "c"), capacity_bytes=1), LocalPathStore)


def test_capacity_is_enforced(store: CountingStore, tmp_path: Path) -> None:
    cache = SstCache(store, str(tmp_path / "cache"), capacity_bytes=3 * KIB)
    for i in range(6):
        _put(store, f"k{i}", KIB)
        cache.local_path(f"k{i}")
        assert cache.stats().size_bytes <= 3 * KIB
    assert _cached_files(cache) == 3
    assert cache.stats().evictions == 3


def test_least_recently_used_goes_first(store: CountingStore, tmp_path: Path) -> None:
    cache = SstCache(store, str(tmp_path / "cache"), capacity_bytes=3 * KIB)
    paths = {}
    for key in "abc":
        _put(store, key, KIB)
        paths[key] = cache.local_path(key)
    cache.local_path("a")  # now b is the least recently used
    _put(store, "d", KIB)
    cache.local_path("d")
    assert not os.path.exists(paths["b"])
    assert all(os.path.exists(paths[k]) for k in "ac")
    store.reads.clear()
    cache.local_path("a")
    cache.local_path("c")
    assert store.reads == []
    paths["d"] = cache.local_path("d")
    cache.local_path("b")  # evicted: downloaded again, pushing out a (now the oldest)
    assert store.reads == ["b"]
    assert not os.path.exists(paths["a"])
    assert all(os.path.exists(paths[k]) for k in "bcd")


def test_concurrent_requests_download_once(store: CountingStore, tmp_path: Path) -> None:
    data = _put(store, "hot", 64 * KIB)
    cache = SstCache(store, str(tmp_path / "cache"), capacity_bytes=MIB_4)
    store.release.clear()
    threads_n = 16
    results: list[str] = []
    errors: list[BaseException] = []

    def fetch() -> None:
        try:
            results.append(cache.local_path("hot"))
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=fetch) for _ in range(threads_n)]
    for t in threads:
        t.start()
    assert store.reading.wait(timeout=10)
    # Give the other threads time to line up behind the download in progress.
    deadline = time.monotonic() + 5
    while cache.misses < threads_n and time.monotonic() < deadline:
        time.sleep(0.01)
    store.release.set()
    for t in threads:
        t.join(timeout=10)
    assert errors == []
    assert len(results) == threads_n and len(set(results)) == 1
    assert store.reads == ["hot"]
    assert cache.stats().downloads == 1
    assert Path(results[0]).read_bytes() == data


def test_failed_download_is_shared_and_leaves_nothing(store: CountingStore, tmp_path: Path) -> None:
    _put(store, "k", KIB)
    cache = SstCache(store, str(tmp_path / "cache"), capacity_bytes=MIB_4)
    store.fail_with = Unavailable("store down")
    store.release.clear()
    errors: list[BaseException] = []

    def fetch() -> None:
        try:
            cache.local_path("k")
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=fetch) for _ in range(4)]
    for t in threads:
        t.start()
    assert store.reading.wait(timeout=10)
    deadline = time.monotonic() + 5
    while cache.misses < 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    store.release.set()
    for t in threads:
        t.join(timeout=10)
    assert len(errors) == 4 and all(isinstance(e, Unavailable) for e in errors)
    assert store.reads == ["k"]
    assert os.listdir(os.path.join(cache.root, "staging")) == []
    assert _cached_files(cache) == 0

    store.fail_with = None  # the failure is not remembered: the next request retries
    assert Path(cache.local_path("k")).read_bytes() == b"\x01" * KIB


def test_missing_object(store: CountingStore, tmp_path: Path) -> None:
    cache = SstCache(store, str(tmp_path / "cache"), capacity_bytes=MIB_4)
    with pytest.raises(NotFound, match="absent"):
        cache.local_path("absent")
    assert cache.stats().files == 0


def test_open_files_stay_readable_after_eviction(store: CountingStore, tmp_path: Path) -> None:
    cache = SstCache(store, str(tmp_path / "cache"), capacity_bytes=2 * KIB)
    first = _put(store, "first", KIB)
    path = cache.local_path("first")
    with open(path, "rb") as by_path, cache.open("first") as by_open:
        for i in range(4):
            _put(store, f"other{i}", KIB)
            cache.local_path(f"other{i}")
        assert not os.path.exists(path)
        assert by_path.read() == first
        assert by_open.read() == first


def test_pinned_files_are_not_evicted(store: CountingStore, tmp_path: Path) -> None:
    cache = SstCache(store, str(tmp_path / "cache"), capacity_bytes=2 * KIB)
    data = _put(store, "pinned", KIB)
    with cache.pinned("pinned") as path:
        for i in range(4):
            _put(store, f"other{i}", KIB)
            cache.local_path(f"other{i}")
            assert Path(path).read_bytes() == data
    # Released: the next eviction may take it.
    assert cache.stats().size_bytes <= 2 * KIB


def test_pins_may_exceed_capacity_until_released(store: CountingStore, tmp_path: Path) -> None:
    cache = SstCache(store, str(tmp_path / "cache"), capacity_bytes=2 * KIB)
    for key in "abc":
        _put(store, key, KIB)
    with cache.pinned("a") as a, cache.pinned("b") as b, cache.pinned("c") as c:
        assert cache.stats().size_bytes == 3 * KIB
        assert all(os.path.exists(p) for p in (a, b, c))
    assert cache.stats().size_bytes <= 2 * KIB


def test_object_larger_than_the_capacity(store: CountingStore, tmp_path: Path) -> None:
    cache = SstCache(store, str(tmp_path / "cache"), capacity_bytes=KIB)
    data = _put(store, "huge", 10 * KIB)
    assert Path(cache.local_path("huge")).read_bytes() == data
    _put(store, "small", 100)
    cache.local_path("small")
    assert cache.stats().size_bytes == 100


def test_copies_survive_a_restart(store: CountingStore, tmp_path: Path) -> None:
    root = str(tmp_path / "cache")
    cache = SstCache(store, root, capacity_bytes=4 * KIB)
    for key in ["old", "mid", "new"]:
        _put(store, key, KIB)
        cache.local_path(key)
        time.sleep(0.01)  # distinct mtimes give the restart its LRU order
    os.makedirs(os.path.join(root, "staging", "crashed"), exist_ok=True)
    store.reads.clear()

    reopened = SstCache(store, root, capacity_bytes=2 * KIB)
    assert reopened.stats().files == 2  # trimmed to the new capacity, oldest first
    assert os.listdir(os.path.join(root, "staging")) == []
    reopened.local_path("mid")
    reopened.local_path("new")
    assert store.reads == []
    reopened.local_path("old")
    assert store.reads == ["old"]


def test_discard(store: CountingStore, tmp_path: Path) -> None:
    cache = SstCache(store, str(tmp_path / "cache"), capacity_bytes=MIB_4)
    _put(store, "k", KIB)
    path = cache.local_path("k")
    assert cache.discard("k") is True
    assert not os.path.exists(path)
    assert cache.discard("k") is False
    assert cache.stats().size_bytes == 0


@pytest.mark.parametrize("key", ["", "/a", "a/../b", "a//b"])
def test_invalid_keys(store: CountingStore, tmp_path: Path, key: str) -> None:
    cache = SstCache(store, str(tmp_path / "cache"), capacity_bytes=MIB_4)
    with pytest.raises(InvalidArgument):
        cache.local_path(key)
    with pytest.raises(InvalidArgument):
        cache.discard(key)
    assert store.reads == []


def test_invalid_capacity(store: CountingStore, tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument, match="capacity"):
        SstCache(store, str(tmp_path / "cache"), capacity_bytes=0)


def test_many_threads_many_keys_stay_within_bounds(store: CountingStore, tmp_path: Path) -> None:
    keys = [f"t/{i}.parquet" for i in range(20)]
    contents = {key: _put(store, key, KIB + i) for i, key in enumerate(keys)}
    cache = SstCache(store, str(tmp_path / "cache"), capacity_bytes=6 * KIB)
    errors: list[BaseException] = []

    def work(seed: int) -> None:
        try:
            for i in range(60):
                key = keys[(seed * 7 + i * 3) % len(keys)]
                with cache.open(key) as f:
                    assert f.read() == contents[key]
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert errors == []
    stats = cache.stats()
    assert stats.size_bytes <= 6 * KIB
    assert stats.hits + stats.misses == 8 * 60
    assert stats.files == _cached_files(cache)
    objects = Path(cache.root) / "objects"
    assert sum(p.stat().st_size for p in objects.iterdir()) == stats.size_bytes
