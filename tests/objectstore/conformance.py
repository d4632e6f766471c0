"""The ObjectStore conformance suite: what every backend must do, whatever stores the bytes.

A backend's test module subclasses :class:`ObjectStoreConformance` in a class whose name starts
with ``Test`` and provides a fixture named ``object_store`` yielding a fresh, empty store::

    class TestS3ObjectStore(ObjectStoreConformance):
        @pytest.fixture
        def object_store(self) -> Iterator[ObjectStore]:
            ...

Keys used here never have one key as a directory-like prefix of another ("a" and "a/b"): a
filesystem cannot hold both, so the contract leaves that case to each backend.
"""

from __future__ import annotations

import io
import os
import random
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gnomon.errors import InvalidArgument, NotFound
from objectstore.api import ObjectMeta, ObjectStore

MIB = 1 << 20

# Allowed skew between the test host's clock and the store's, for backends with their own clock.
_CLOCK_SKEW_MS = 10 * 60 * 1000

INVALID_KEYS = [
    "",
    "/a",
    "/",
    "a/",
    "a//b",
    ".",
    "./a",
    "a/./b",
    "a/.",
    "..",
    "../a",
    "a/../b",
    "a/..",
    "a\\b",
    "a\x00b",
]

# Keys whose string order differs from a naive per-directory order: "." < "/" < "0".
LISTING_KEYS = [
    "a.c",
    "a/b.x",
    "a/b/c",
    "a/b/d/e",
    "a/bc",
    "a0",
    "ab/c",
    "b",
    "z-\u00e9/x",
    "\u00e9/x",
]


def _payload(size: int, seed: int = 0) -> bytes:
    return random.Random(seed).randbytes(size)


def _keys(metas: list[ObjectMeta]) -> list[str]:
    return [m.key for m in metas]


def _all_operations(store: ObjectStore, tmp_path: Path) -> dict[str, Callable[[str], Any]]:
    """Every operation that takes a key, bound to harmless arguments."""
    local_file = tmp_path / "payload"

    def put_file(key: str) -> ObjectMeta:
        local_file.write_bytes(b"x")
        return store.put_file(key, str(local_file))

    return {
        "put": lambda key: store.put(key, b"x"),
        "put_file": put_file,
        "put_if_absent": lambda key: store.put_if_absent(key, b"x"),
        "get": store.get,
        "get_range": lambda key: store.get_range(key, 0, 1),
        "open_input": store.open_input,
        "head": store.head,
        "delete": store.delete,
    }


class ObjectStoreConformance:
    # -- put / get ------------------------------------------------------------------------------

    @pytest.mark.parametrize("size", [0, 1, 4096, 5 * MIB])
    def test_put_get_round_trip(self, object_store: ObjectStore, size: int) -> None:
        data = _payload(size, seed=size)
        meta = object_store.put("dir/obj.bin", data)
        assert meta.key == "dir/obj.bin"
        assert meta.size == size
        assert object_store.get("dir/obj.bin") == data

    def test_put_returns_plausible_mtime(self, object_store: ObjectStore) -> None:
        before = time.time_ns() // 1_000_000
        meta = object_store.put("k", b"data")
        after = time.time_ns() // 1_000_000
        assert before - _CLOCK_SKEW_MS <= meta.mtime_ms <= after + _CLOCK_SKEW_MS
        assert before - _CLOCK_SKEW_MS <= object_store.head("k").mtime_ms <= after + _CLOCK_SKEW_MS

    def test_put_accepts_top_level_and_deep_keys(self, object_store: ObjectStore) -> None:
        keys = ["top", "x/y/z/w/v/u/deep.sst", "with space/and-dash_underscore.v1.2"]
        for i, key in enumerate(keys):
            object_store.put(key, str(i).encode())
        for i, key in enumerate(keys):
            assert object_store.get(key) == str(i).encode()

    def test_overwrite_replaces_object(self, object_store: ObjectStore) -> None:
        object_store.put("k", b"first version, longer")
        meta = object_store.put("k", b"second")
        assert meta.size == 6
        assert object_store.get("k") == b"second"
        assert object_store.head("k").size == 6
        assert _keys(list(object_store.list())) == ["k"]

    def test_put_file(self, object_store: ObjectStore, tmp_path: Path) -> None:
        data = _payload(3 * MIB + 17, seed=3)
        local = tmp_path / "staged.sst"
        local.write_bytes(data)
        meta = object_store.put_file("sst/000001.sst", str(local))
        assert meta == ObjectMeta("sst/000001.sst", len(data), meta.mtime_ms)
        assert object_store.get("sst/000001.sst") == data
        assert object_store.head("sst/000001.sst").size == len(data)

    def test_put_file_mtime_is_store_time(self, object_store: ObjectStore, tmp_path: Path) -> None:
        local = tmp_path / "old"
        local.write_bytes(b"written long ago")
        os.utime(local, (1_000_000_000, 1_000_000_000))
        before = time.time_ns() // 1_000_000
        meta = object_store.put_file("k", str(local))
        assert meta.mtime_ms >= before - _CLOCK_SKEW_MS
        assert object_store.head("k").mtime_ms >= before - _CLOCK_SKEW_MS

    def test_put_file_overwrites(self, object_store: ObjectStore, tmp_path: Path) -> None:
        object_store.put("k", b"old contents")
        local = tmp_path / "new"
        local.write_bytes(b"new")
        object_store.put_file("k", str(local))
        assert object_store.get("k") == b"new"

    def test_put_file_missing_local_file(self, object_store: ObjectStore, tmp_path: Path) -> None:
        missing = str(tmp_path / "missing")
        with pytest.raises(NotFound, match="missing"):
            object_store.put_file("k", missing)
        assert list(object_store.list()) == []

    # -- put_if_absent --------------------------------------------------------------------------

    def test_put_if_absent(self, object_store: ObjectStore) -> None:
        assert object_store.put_if_absent("lock/owner", b"first") is True
        assert object_store.put_if_absent("lock/owner", b"second") is False
        assert object_store.get("lock/owner") == b"first"
        assert object_store.head("lock/owner").size == 5

    def test_put_if_absent_after_delete(self, object_store: ObjectStore) -> None:
        assert object_store.put_if_absent("k", b"1")
        assert object_store.delete("k")
        assert object_store.put_if_absent("k", b"2")
        assert object_store.get("k") == b"2"

    def test_put_if_absent_on_object_from_put(self, object_store: ObjectStore) -> None:
        object_store.put("k", b"")
        assert object_store.put_if_absent("k", b"other") is False
        assert object_store.get("k") == b""

    def test_put_if_absent_race_has_one_winner(self, object_store: ObjectStore) -> None:
        contenders = 8
        barrier = threading.Barrier(contenders)
        results: dict[int, bool] = {}

        def contend(i: int) -> None:
            barrier.wait()
            results[i] = object_store.put_if_absent("race", f"writer {i}".encode())

        threads = [threading.Thread(target=contend, args=(i,)) for i in range(contenders)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        winners = [i for i, won in results.items() if won]
        assert len(results) == contenders
        assert len(winners) == 1
        assert object_store.get("race") == f"writer {winners[0]}".encode()

    # -- get_range ------------------------------------------------------------------------------

    def test_get_range(self, object_store: ObjectStore) -> None:
        data = bytes(range(256)) * 4
        object_store.put("r", data)
        assert object_store.get_range("r", 0, 10) == data[:10]
        assert object_store.get_range("r", 100, 300) == data[100:400]
        assert object_store.get_range("r", len(data) - 5, 5) == data[-5:]
        assert object_store.get_range("r", 0, len(data)) == data
        assert object_store.get_range("r", 7, 0) == b""

    def test_get_range_beyond_end(self, object_store: ObjectStore) -> None:
        data = b"0123456789"
        object_store.put("r", data)
        assert object_store.get_range("r", 8, 100) == b"89"
        assert object_store.get_range("r", 0, 1 << 40) == data
        assert object_store.get_range("r", 10, 1) == b""
        assert object_store.get_range("r", 1000, 10) == b""

    def test_get_range_of_empty_object(self, object_store: ObjectStore) -> None:
        object_store.put("empty", b"")
        assert object_store.get_range("empty", 0, 10) == b""

    def test_get_range_large_object(self, object_store: ObjectStore) -> None:
        data = _payload(5 * MIB, seed=5)
        object_store.put("big", data)
        assert object_store.get_range("big", 2 * MIB + 3, MIB) == data[2 * MIB + 3 : 3 * MIB + 3]

    @pytest.mark.parametrize(("start", "length"), [(-1, 1), (0, -1), (-5, -5)])
    def test_get_range_rejects_negatives(
        self, object_store: ObjectStore, start: int, length: int
    ) -> None:
        object_store.put("r", b"data")
        with pytest.raises(InvalidArgument):
            object_store.get_range("r", start, length)

    # -- head -----------------------------------------------------------------------------------

    @pytest.mark.parametrize("size", [0, 1, 1000, 5 * MIB])
    def test_head_size(self, object_store: ObjectStore, size: int) -> None:
        put_meta = object_store.put("h", _payload(size))
        meta = object_store.head("h")
        assert meta.key == "h"
        assert meta.size == size
        assert abs(meta.mtime_ms - put_meta.mtime_ms) <= _CLOCK_SKEW_MS

    # -- list -----------------------------------------------------------------------------------

    def test_list_empty_store(self, object_store: ObjectStore) -> None:
        assert list(object_store.list()) == []
        assert list(object_store.list("a/")) == []

    def test_list_ascending_key_order(self, object_store: ObjectStore) -> None:
        # Put in a scrambled order so that insertion order cannot pass for key order.
        for i, key in enumerate(random.Random(1).sample(LISTING_KEYS, len(LISTING_KEYS))):
            object_store.put(key, b"x" * i)
        listed = list(object_store.list())
        assert _keys(listed) == sorted(LISTING_KEYS)
        for meta in listed:
            assert meta.size == object_store.head(meta.key).size

    @pytest.mark.parametrize(
        ("prefix", "expected"),
        [
            ("", sorted(LISTING_KEYS)),
            ("a", ["a.c", "a/b.x", "a/b/c", "a/b/d/e", "a/bc", "a0", "ab/c"]),
            ("a/", ["a/b.x", "a/b/c", "a/b/d/e", "a/bc"]),
            ("a/b", ["a/b.x", "a/b/c", "a/b/d/e", "a/bc"]),
            ("a/b/", ["a/b/c", "a/b/d/e"]),
            ("a/b/c", ["a/b/c"]),
            ("a/b/d/e", ["a/b/d/e"]),
            ("a/b/d/e/", []),
            ("a/b/c/", []),
            ("a.", ["a.c"]),
            ("ab", ["ab/c"]),
            ("\u00e9", ["\u00e9/x"]),
            ("zz", []),
            ("a/x/", []),
            ("/", []),
            ("../", []),
        ],
    )
    def test_list_prefix_is_a_string_prefix(
        self, object_store: ObjectStore, prefix: str, expected: list[str]
    ) -> None:
        for key in LISTING_KEYS:
            object_store.put(key, key.encode())
        assert _keys(list(object_store.list(prefix))) == expected

    def test_list_many_keys(self, object_store: ObjectStore) -> None:
        # Three segments each, from an alphabet around "/", so no key is a prefix-directory of
        # another and the order of ".", "-" and "0" relative to "/" is exercised throughout.
        rng = random.Random(7)
        alphabet = "ab.-0_"

        def segment() -> str:
            while True:
                s = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 3)))
                if s != "." and ".." not in s:
                    return s

        keys = sorted({f"{segment()}/{segment()}/{segment()}" for _ in range(150)})
        for key in keys:
            object_store.put(key, b"")
        assert _keys(list(object_store.list())) == keys
        for prefix in ["a", "a/", "b.", "-", "0/a", "a/b"]:
            assert _keys(list(object_store.list(prefix))) == [
                k for k in keys if k.startswith(prefix)
            ]

    # -- delete ---------------------------------------------------------------------------------

    def test_delete(self, object_store: ObjectStore) -> None:
        object_store.put("d/k", b"data")
        object_store.put("d/other", b"data")
        assert object_store.delete("d/k") is True
        assert object_store.delete("d/k") is False
        with pytest.raises(NotFound):
            object_store.get("d/k")
        assert _keys(list(object_store.list())) == ["d/other"]

    def test_delete_absent(self, object_store: ObjectStore) -> None:
        assert object_store.delete("never/written") is False

    def test_delete_of_a_prefix_is_not_an_object(self, object_store: ObjectStore) -> None:
        object_store.put("p/q/r", b"data")
        assert object_store.delete("p/q") is False
        assert object_store.delete("p") is False
        assert object_store.get("p/q/r") == b"data"

    def test_put_after_delete(self, object_store: ObjectStore) -> None:
        object_store.put("x/y/z", b"1")
        assert object_store.delete("x/y/z")
        object_store.put("x/y/z", b"2")
        assert object_store.get("x/y/z") == b"2"

    # -- errors ---------------------------------------------------------------------------------

    @pytest.mark.parametrize("key", INVALID_KEYS)
    def test_invalid_keys(self, object_store: ObjectStore, tmp_path: Path, key: str) -> None:
        for name, operation in _all_operations(object_store, tmp_path).items():
            try:
                operation(key)
            except InvalidArgument as e:
                assert repr(key) in str(e), f"{name}: message does not name the key: {e}"
            else:
                pytest.fail(f"{name}({key!r}) did not raise InvalidArgument")
        assert list(object_store.list()) == []

    def test_not_found(self, object_store: ObjectStore) -> None:
        object_store.put("present/k", b"data")
        for key in ["absent", "present/absent", "present", "present/k/below"]:
            with pytest.raises(NotFound, match=key):
                object_store.get(key)
            with pytest.raises(NotFound, match=key):
                object_store.get_range(key, 0, 1)
            with pytest.raises(NotFound, match=key):
                object_store.head(key)
            with pytest.raises(NotFound, match=key):
                object_store.open_input(key)

    # -- open_input -----------------------------------------------------------------------------

    def test_open_input_seek_and_read(self, object_store: ObjectStore) -> None:
        data = _payload(100_000, seed=11)
        object_store.put("f", data)
        with object_store.open_input("f") as f:
            assert f.seekable()
            assert f.readable()
            assert f.read(10) == data[:10]
            assert f.tell() == 10
            f.seek(50_000)
            assert f.read(5) == data[50_000:50_005]
            f.seek(-8, io.SEEK_END)
            assert f.read() == data[-8:]
            assert f.read(1) == b""
            f.seek(3)
            f.seek(4, io.SEEK_CUR)
            assert f.read(2) == data[7:9]
            f.seek(0)
            assert f.read() == data

    def test_open_input_reads_parquet(self, object_store: ObjectStore) -> None:
        table = pa.table(
            {
                "ts": pa.array(range(10_000), type=pa.int64()),
                "host": pa.array([f"h{i % 7}" for i in range(10_000)]),
                "value": pa.array([i * 0.5 for i in range(10_000)]),
            }
        )
        sink = io.BytesIO()
        pq.write_table(table, sink, row_group_size=3_000)
        object_store.put("tables/t/000001.parquet", sink.getvalue())

        with object_store.open_input("tables/t/000001.parquet") as f:
            parquet = pq.ParquetFile(f)
            assert parquet.metadata.num_rows == 10_000
            assert parquet.metadata.num_row_groups == 4
            assert parquet.read_row_group(2, columns=["ts"]).column("ts").to_pylist() == list(
                range(6_000, 9_000)
            )
            assert parquet.read().equals(table)

    # -- atomicity under concurrency ------------------------------------------------------------

    def test_concurrent_puts_never_expose_a_partial_object(self, object_store: ObjectStore) -> None:
        # Version v is the byte v repeated a size specific to v: a torn or mixed object has the
        # wrong length or more than one distinct byte.
        def version(v: int) -> bytes:
            return bytes([v]) * (256 * 1024 + v * 4099)

        def is_whole_version(data: bytes) -> bool:
            return bool(data) and data == version(data[0])

        object_store.put("hot", version(0))
        writers, puts_each = 4, 8
        stop = threading.Event()
        errors: list[BaseException] = []
        seen: set[int] = set()

        def write(w: int) -> None:
            try:
                for i in range(puts_each):
                    object_store.put("hot", version(1 + w * puts_each + i))
            except BaseException as e:
                errors.append(e)

        def read() -> None:
            try:
                while not stop.is_set():
                    data = object_store.get("hot")
                    assert is_whole_version(data), f"partial object of {len(data)} bytes"
                    seen.add(data[0])
                    with object_store.open_input("hot") as f:
                        head = f.read(1)
                        f.seek(0, io.SEEK_END)
                        assert f.tell() == len(version(head[0]))
            except BaseException as e:
                errors.append(e)

        readers = [threading.Thread(target=read) for _ in range(2)]
        writer_threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
        for t in readers + writer_threads:
            t.start()
        for t in writer_threads:
            t.join()
        stop.set()
        for t in readers:
            t.join()

        assert errors == []
        assert seen, "readers never completed a read"
        final = object_store.get("hot")
        assert is_whole_version(final)
        assert final[0] != 0
        assert object_store.head("hot").size == len(final)

    def test_concurrent_puts_of_distinct_keys(self, object_store: ObjectStore) -> None:
        errors: list[BaseException] = []

        def write(w: int) -> None:
            try:
                for i in range(20):
                    object_store.put(f"shared/dir/w{w}/k{i}", f"{w}:{i}".encode())
            except BaseException as e:
                errors.append(e)

        threads = [threading.Thread(target=write, args=(w,)) for w in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        listed = list(object_store.list("shared/"))
        assert len(listed) == 80
        for meta in listed:
            w, k = meta.key.split("/")[2:]
            assert object_store.get(meta.key) == f"{w[1:]}:{k[1:]}".encode()
