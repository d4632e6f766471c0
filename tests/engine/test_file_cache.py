"""The SST file cache (node/engine/sst/cache.py): one byte budget over every kind of entry,
least recently used evicted first, a forgotten file's entries dropped, hits and misses
counted; and an engine's scans going through it."""

from __future__ import annotations

import pytest

from gnomon.errors import InvalidArgument
from node.engine.engine import Engine
from node.engine.sst.cache import FileCache
from tests.engine.conftest import flushed_hosts_table

pytestmark = pytest.mark.unit


def _size(value: str) -> int:
    return len(value)


def test_a_value_is_loaded_once_and_then_found() -> None:
    cache = FileCache(1000)
    loads: list[str] = []

    def load() -> str:
        loads.append("x")
        return "footer of f"

    for _ in range(3):
        assert cache.get_or_load("footer", "f", None, load, _size) == "footer of f"
    stats = cache.stats()
    assert loads == ["x"]
    assert (stats.hits, stats.misses, stats.bytes) == (2, 1, len("footer of f"))


def test_one_budget_over_every_kind_evicts_the_least_recently_used() -> None:
    cache = FileCache(30)
    cache.get_or_load("footer", "a", None, lambda: "a" * 10, _size)
    cache.get_or_load("series", "b", ("host",), lambda: "b" * 10, _size)
    cache.get_or_load("ranges", "c", "ts", lambda: "c" * 10, _size)
    cache.get_or_load("footer", "a", None, lambda: "never", _size)  # a is now the newest
    cache.get_or_load("columns", "d", None, lambda: "d" * 10, _size)  # b goes
    assert cache.stats().bytes == 30
    assert cache.get_or_load("series", "b", ("host",), lambda: "again", _size) == "again"
    assert cache.get_or_load("footer", "a", None, lambda: "never", _size) == "a" * 10


def test_a_value_larger_than_the_budget_is_not_kept() -> None:
    cache = FileCache(5)
    cache.get_or_load("footer", "a", None, lambda: "abc", _size)
    assert cache.get_or_load("footer", "big", None, lambda: "x" * 6, _size) == "x" * 6
    assert cache.stats().bytes == 3
    assert cache.get_or_load("footer", "a", None, lambda: "never", _size) == "abc"


def test_forgetting_a_file_drops_every_entry_of_it() -> None:
    cache = FileCache(1000)
    for kind in ("footer", "columns", "tombstones"):
        cache.get_or_load(kind, "gone", None, lambda: "xxxx", _size)  # type: ignore[arg-type]
    cache.get_or_load("series", "gone", ("host",), lambda: "xxxx", _size)
    cache.get_or_load("footer", "kept", None, lambda: "yy", _size)
    cache.forget("gone")
    assert cache.stats().bytes == 2
    assert cache.get_or_load("series", "gone", ("host",), lambda: "new", _size) == "new"
    cache.clear()
    assert cache.stats().bytes == 0


def test_a_budget_below_one_byte_is_refused() -> None:
    with pytest.raises(InvalidArgument, match="at least 1 byte"):
        FileCache(0)


def test_scans_read_file_metadata_through_the_cache(quiet: Engine) -> None:
    engine = quiet
    first = flushed_hosts_table(engine)
    held = engine.stats().file_cache
    assert held.bytes > 0 and held.misses > 0
    assert engine.read_all("m").sort_by("ts").equals(first)
    again = engine.stats().file_cache
    assert again.hits > held.hits and again.misses == held.misses
    engine._sst_files.drop_caches()
    assert engine.stats().file_cache.bytes == 0
