"""LocalObjectStore: the conformance suite plus what only a filesystem backend has (staging,
directories, crash atomicity)."""

from __future__ import annotations

import gc
import hashlib
import os
import random
import select
import signal
import struct
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import objectstore.local
from gnomon.errors import InvalidArgument, NotFound
from objectstore.api import ObjectStore
from objectstore.local import STAGING_DIR, LocalObjectStore

from .conformance import ObjectStoreConformance

pytestmark = pytest.mark.integration


class TestLocalObjectStore(ObjectStoreConformance):
    @pytest.fixture
    def object_store(self, tmp_path: Path) -> Iterator[ObjectStore]:
        yield LocalObjectStore(str(tmp_path / "store"))


def _staging_dirs(root: Path) -> list[Path]:
    return sorted((root / STAGING_DIR).iterdir())


def _files_under(path: Path) -> list[Path]:
    return sorted(p for p in path.rglob("*") if not p.is_dir())


def _dirs_under(root: Path) -> list[str]:
    """Directories below ``root`` other than the staging area, relative to it."""
    return sorted(
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_dir() and p.relative_to(root).parts[0] != STAGING_DIR
    )


# -- keys and layout --------------------------------------------------------------------------


def test_root_is_created(tmp_path: Path) -> None:
    root = tmp_path / "x" / "y" / "store"
    store = LocalObjectStore(str(root))
    store.put("k", b"v")
    assert (root / "k").read_bytes() == b"v"
    assert store.root == str(root)


@pytest.mark.parametrize("key", [STAGING_DIR, f"{STAGING_DIR}/x", f"{STAGING_DIR}/a/b"])
def test_staging_name_is_reserved(tmp_path: Path, key: str) -> None:
    store = LocalObjectStore(str(tmp_path))
    with pytest.raises(InvalidArgument, match="reserved"):
        store.put(key, b"x")
    with pytest.raises(InvalidArgument):
        store.get(key)
    with pytest.raises(InvalidArgument):
        store.delete(key)


def test_staging_name_is_allowed_below_the_root(tmp_path: Path) -> None:
    store = LocalObjectStore(str(tmp_path))
    store.put(f"a/{STAGING_DIR}", b"1")
    store.put(f"{STAGING_DIR}2/b", b"2")
    assert [m.key for m in store.list()] == [f"{STAGING_DIR}2/b", f"a/{STAGING_DIR}"]


def test_list_never_shows_staging(tmp_path: Path) -> None:
    store = LocalObjectStore(str(tmp_path))
    (tmp_path / STAGING_DIR / "orphan").write_bytes(b"x")  # as if a writer were mid-put
    store.put("k", b"v")
    assert [m.key for m in store.list()] == ["k"]
    assert list(store.list(".st")) == []
    assert list(store.list(f"{STAGING_DIR}/")) == []


def test_list_ignores_foreign_names(tmp_path: Path) -> None:
    store = LocalObjectStore(str(tmp_path))
    store.put("d/ok", b"v")
    (tmp_path / "d" / "a\\b").write_bytes(b"not a valid key")
    (tmp_path / "d" / "x..y").write_bytes(b"not a valid key")
    assert [m.key for m in store.list()] == ["d/ok"]


def test_key_and_keys_below_it_conflict(tmp_path: Path) -> None:
    store = LocalObjectStore(str(tmp_path))
    store.put("file", b"v")
    store.put("dir/k", b"v")
    with pytest.raises(InvalidArgument, match="conflicts"):
        store.put("file/below", b"x")
    with pytest.raises(InvalidArgument, match="conflicts"):
        store.put("dir", b"x")
    with pytest.raises(InvalidArgument, match="conflicts"):
        store.put_if_absent("dir", b"x")
    with pytest.raises(NotFound):
        store.get("file/below")
    with pytest.raises(NotFound):
        store.head("dir")
    assert store.delete("dir") is False
    assert [m.key for m in store.list()] == ["dir/k", "file"]


def test_empty_directory_left_by_a_crash_does_not_block_a_key(tmp_path: Path) -> None:
    store = LocalObjectStore(str(tmp_path))
    (tmp_path / "x" / "y").mkdir(parents=True)
    store.put("x/y", b"1")
    (tmp_path / "z").mkdir()
    assert store.put_if_absent("z", b"2") is True
    assert store.get("x/y") == b"1"
    assert store.get("z") == b"2"


def test_local_path(tmp_path: Path) -> None:
    store = LocalObjectStore(str(tmp_path))
    store.put("a/b", b"v1")
    path = store.local_path("a/b")
    assert path == str(tmp_path / "a" / "b")
    with open(path, "rb") as f:
        store.put("a/b", b"v2")  # replaces the file: the open one still reads v1
        assert f.read() == b"v1"
    assert Path(store.local_path("a/b")).read_bytes() == b"v2"
    for absent in ["a/c", "a", "a/b/c"]:
        with pytest.raises(NotFound, match=absent):
            store.local_path(absent)
    with pytest.raises(InvalidArgument):
        store.local_path("../etc/passwd")


# -- delete prunes directories ----------------------------------------------------------------


def test_delete_removes_empty_parents(tmp_path: Path) -> None:
    store = LocalObjectStore(str(tmp_path))
    store.put("a/b/c/d/k", b"v")
    store.put("a/b/sibling", b"v")
    assert store.delete("a/b/c/d/k")
    assert _dirs_under(tmp_path) == ["a", "a/b"]
    assert store.delete("a/b/sibling")
    assert _dirs_under(tmp_path) == []
    assert (tmp_path / STAGING_DIR).is_dir()


def test_delete_racing_puts_in_the_same_directory(tmp_path: Path) -> None:
    # One thread keeps emptying (and so pruning) a directory while another keeps putting into
    # it: every put must land even when its parent vanishes between mkdir and rename.
    store = LocalObjectStore(str(tmp_path))
    stop = threading.Event()
    errors: list[BaseException] = []

    def churn() -> None:
        try:
            while not stop.is_set():
                store.put("p/q/r/churn", b"c")
                store.delete("p/q/r/churn")
        except BaseException as e:
            errors.append(e)

    churner = threading.Thread(target=churn)
    churner.start()
    try:
        for i in range(600):
            store.put(f"p/q/r/k{i}", str(i).encode())
            assert store.get(f"p/q/r/k{i}") == str(i).encode()
            assert store.delete(f"p/q/r/k{i}")
        for i in range(50):
            assert store.put_if_absent(f"p/q/s/k{i}", b"x")
    finally:
        stop.set()
        churner.join()
    assert errors == []
    assert [m.key for m in store.list("p/q/s/")] == sorted(f"p/q/s/k{i}" for i in range(50))


# -- durability -------------------------------------------------------------------------------


def test_put_syncs_new_directories_and_the_parent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = LocalObjectStore(str(tmp_path))
    synced: list[str] = []
    real_fsync_dir = objectstore.local._fsync_dir

    def recording_fsync_dir(path: str) -> None:
        synced.append(os.path.relpath(path, tmp_path))
        real_fsync_dir(path)

    monkeypatch.setattr(objectstore.local, "_fsync_dir", recording_fsync_dir)
    store.put("a/b/k", b"v")
    # "a" was created in the root, "b" in "a", and "k" renamed into "a/b".
    assert synced == [".", "a", "a/b"]
    synced.clear()
    store.put("a/b/k2", b"v")
    assert synced == ["a/b"]


def test_put_file_across_filesystems(tmp_path: Path) -> None:
    shm = Path("/dev/shm")
    if not shm.is_dir() or shm.stat().st_dev == tmp_path.stat().st_dev:
        pytest.skip("needs a second filesystem at /dev/shm")
    store = LocalObjectStore(str(tmp_path / "store"))
    local = shm / f"gnomon-test-{os.getpid()}-{random.getrandbits(32)}"
    try:
        local.write_bytes(b"copied, not moved")
        meta = store.put_file("k", str(local))
        assert meta.size == len(b"copied, not moved")
        assert store.get("k") == b"copied, not moved"
    finally:
        local.unlink(missing_ok=True)
    assert _files_under(tmp_path / "store" / STAGING_DIR) == []


def test_put_file_rejects_a_directory(tmp_path: Path) -> None:
    store = LocalObjectStore(str(tmp_path / "store"))
    with pytest.raises(InvalidArgument, match="regular file"):
        store.put_file("k", str(tmp_path))


# -- staging ----------------------------------------------------------------------------------


def test_stale_staging_is_removed_on_open(tmp_path: Path) -> None:
    staging = tmp_path / STAGING_DIR
    (staging / "crashed-writer").mkdir(parents=True)
    (staging / "crashed-writer" / "half-written").write_bytes(b"partial")
    (staging / "stray-file").write_bytes(b"partial")

    store = LocalObjectStore(str(tmp_path))
    assert _files_under(staging) == []
    assert len(_staging_dirs(tmp_path)) == 1  # the new store's own
    store.put("k", b"v")
    assert store.get("k") == b"v"


def test_open_store_keeps_its_staging_when_another_opens(tmp_path: Path) -> None:
    first = LocalObjectStore(str(tmp_path))
    second = LocalObjectStore(str(tmp_path))
    assert len(_staging_dirs(tmp_path)) == 2
    first.put("a", b"1")
    second.put("b", b"2")
    assert first.get("b") == b"2"
    assert second.get("a") == b"1"


def test_staging_released_when_store_is_dropped(tmp_path: Path) -> None:
    store = LocalObjectStore(str(tmp_path))
    store.put("k", b"v")
    del store
    gc.collect()
    assert _staging_dirs(tmp_path) == []
    assert LocalObjectStore(str(tmp_path)).get("k") == b"v"


def test_failed_put_leaves_no_staging_file(tmp_path: Path) -> None:
    root = tmp_path / "store"
    store = LocalObjectStore(str(root))
    store.put("file", b"v")
    with pytest.raises(InvalidArgument):
        store.put("file/below", b"x")
    with pytest.raises(InvalidArgument):
        store.put_if_absent("file/below", b"x")
    local = tmp_path / "local"
    local.write_bytes(b"x")
    with pytest.raises(InvalidArgument):
        store.put_file("file/below", str(local))
    assert _files_under(root / STAGING_DIR) == []


# -- crash atomicity --------------------------------------------------------------------------

_MAGIC = b"GNOMTEST"
_HEADER = struct.Struct(">8sQ32s")  # magic, body length, sha256 of the body

# Puts self-checking objects forever (put, put_file and put_if_absent, overwriting and deleting
# some keys) and prints one line per completed operation.
_CRASH_WRITER = textwrap.dedent(
    """
    import hashlib, os, random, struct, sys
    from objectstore.local import LocalObjectStore

    root, scratch, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
    store = LocalObjectStore(root)
    rng = random.Random(seed)
    header = struct.Struct(">8sQ32s")
    for i in range(1_000_000):
        body = rng.randbytes(rng.randint(1, 4) * 1024 * 1024 + rng.randint(0, 4095))
        data = header.pack(b"GNOMTEST", len(body), hashlib.sha256(body).digest()) + body
        key = f"crash/d{rng.randint(0, 5)}/obj{rng.randint(0, 3)}"
        if i % 4 == 0:
            store.put(key, data)
        elif i % 4 == 1:
            local = os.path.join(scratch, f"upload-{i}")
            with open(local, "wb") as f:
                f.write(data)
            store.put_file(key, local)
        elif i % 4 == 2:
            store.put_if_absent(key, data)
        else:
            store.delete(key)
        print(i, flush=True)
    """
)


def _check_object(data: bytes) -> None:
    assert len(data) >= _HEADER.size, f"truncated header ({len(data)} bytes)"
    magic, length, digest = _HEADER.unpack_from(data)
    body = data[_HEADER.size :]
    body_length = len(body)
    assert magic == _MAGIC
    assert body_length == length, f"torn object: {body_length} of {length} body bytes"
    assert hashlib.sha256(body).digest() == digest, "object body does not match its checksum"


def _wait_for_lines(proc: subprocess.Popen[bytes], count: int, deadline: float) -> None:
    """Block until ``proc`` printed ``count`` lines; fails on exit or at ``deadline``."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    seen = 0
    while seen < count:
        remaining = deadline - time.monotonic()
        assert remaining > 0, "crash writer too slow"
        ready, _, _ = select.select([fd], [], [], remaining)
        if not ready:
            continue
        chunk = os.read(fd, 4096)
        if not chunk:
            assert proc.stderr is not None
            pytest.fail(f"crash writer exited early: {proc.stderr.read().decode()}")
        seen += chunk.count(b"\n")


@pytest.mark.long
@pytest.mark.timeout(60)
def test_sigkill_never_leaves_a_partial_object(tmp_path: Path) -> None:
    root = tmp_path / "store"
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    started = time.monotonic()
    deadline = started + 15
    rng = random.Random(42)
    checked = 0
    for round_ in range(4):
        proc = subprocess.Popen(
            [sys.executable, "-c", _CRASH_WRITER, str(root), str(scratch), str(round_)],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            _wait_for_lines(proc, rng.randint(2, 6), deadline)
            # Land the kill at a random point of the following operation.
            time.sleep(rng.uniform(0, 0.05))
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=5)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            assert proc.stdout is not None and proc.stderr is not None
            proc.stdout.close()
            proc.stderr.close()

        store = LocalObjectStore(str(root))
        # The dead writer's staging directory was unlocked by its death and reaped by the open.
        assert len(_staging_dirs(root)) == 1
        assert _files_under(root / STAGING_DIR) == []
        objects = list(store.list())
        assert objects, "the writer completed puts, so some objects must exist"
        on_disk = {str(p.relative_to(root)) for p in _files_under(root)}
        assert on_disk == {m.key for m in objects}
        for meta in objects:
            data = store.get(meta.key)
            assert len(data) == meta.size
            _check_object(data)
            checked += 1
        del store

    assert checked > 0
    assert time.monotonic() - started < 20
