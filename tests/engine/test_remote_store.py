"""The engine over an object store whose objects are not local files: SSTs are read through the
bounded local cache and stay pinned while a scan runs."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import pyarrow as pa
import pytest

from gnomon.store.sqlite import SqliteStore
from node.engine.config import EngineConfig
from node.engine.engine import Engine
from node.engine.shard import STANDALONE_SHARD
from node.wal.disk import DiskWal
from objectstore.api import ObjectMeta
from objectstore.local import LocalObjectStore

from .conftest import CPU, cpu_batch

pytestmark = pytest.mark.unit


class RemoteLike:
    """A store that hands out bytes only, as S3 does (no local paths)."""

    def __init__(self, inner: LocalObjectStore) -> None:
        self.inner = inner
        self.gets = 0

    def put(self, key: str, data: bytes) -> ObjectMeta:
        return self.inner.put(key, data)

    def put_file(self, key: str, path: str) -> ObjectMeta:
        return self.inner.put_file(key, path)

    def put_if_absent(self, key: str, data: bytes) -> bool:
        return self.inner.put_if_absent(key, data)

    def get(self, key: str) -> bytes:
        self.gets += 1
        return self.inner.get(key)

    def get_range(self, key: str, start: int, length: int) -> bytes:
        self.gets += 1
        return self.inner.get_range(key, start, length)

    def open_input(self, key: str) -> BinaryIO:
        self.gets += 1
        return self.inner.open_input(key)

    def head(self, key: str) -> ObjectMeta:
        return self.inner.head(key)

    def list(self, prefix: str = "") -> Iterator[ObjectMeta]:
        return self.inner.list(prefix)

    def delete(self, key: str) -> bool:
        return self.inner.delete(key)


def test_engine_reads_through_the_cache(tmp_path: Path) -> None:
    data_dir = str(tmp_path / "node")
    os.makedirs(data_dir)
    store = RemoteLike(LocalObjectStore(str(tmp_path / "bucket")))
    engine = Engine(
        EngineConfig(data_dir=data_dir),
        meta=SqliteStore(str(tmp_path / "meta.db")),
        wal=DiskWal(os.path.join(data_dir, "wal")),
        store=store,
    )
    try:
        engine.open_shard(STANDALONE_SHARD)
        engine.create_table("cpu", CPU)
        for i in range(3):
            engine.write("cpu", cpu_batch(["a", "b"], [i, i], [1.0, 2.0]))
            engine.flush()
        first = engine.read_all("cpu")
        downloads = store.gets
        assert first.num_rows == 6 and downloads > 0
        again = engine.read_all("cpu")
        assert again.num_rows == 6
        assert store.gets == downloads, "cached SSTs were downloaded again"
        assert pa.Table.from_batches(list(engine.scan("cpu", order="asc"))).num_rows == 6
    finally:
        engine.close()
