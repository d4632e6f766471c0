from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pytest

from gnomon.store.sqlite import SqliteStore
from node.backends import open_standalone
from node.engine.config import EngineConfig
from node.engine.engine import Engine
from node.engine.schema import Column, ColumnType, Schema
from node.wal.disk import DiskWal
from objectstore.local import LocalObjectStore

if TYPE_CHECKING:
    from gnomon.wal.api import Wal

CPU = Schema.build(
    [
        Column("host", ColumnType.STRING, is_tag=True),
        Column("region", ColumnType.STRING, is_tag=True),
        Column("usage", ColumnType.DOUBLE),
        Column("ts", ColumnType.TIMESTAMP),
    ],
    timestamp_key="ts",
)


def cpu_batch(hosts: list[str], ts: list[int], usage: list[float], region: str = "eu") -> pa.Table:
    return pa.table(
        {
            "host": hosts,
            "region": [region] * len(hosts),
            "usage": pa.array(usage, pa.float64()),
            "ts": pa.array(ts, pa.timestamp("ms")),
        }
    )


def rows(table: pa.Table, *cols: str) -> list[tuple[object, ...]]:
    cols = cols or tuple(table.column_names)
    return sorted(zip(*(table.column(c).to_pylist() for c in cols), strict=True))


def shared_node(root: Path, name: str, wal: Wal | None = None) -> Engine:
    """An engine standing for node ``name``, sharing with the others under ``root`` what a
    cluster shares (catalog and manifests, SSTs, WAL regions; a real cluster puts the WAL on
    Kafka and the SSTs on S3)."""
    data_dir = root / name
    os.makedirs(data_dir, exist_ok=True)
    return Engine(
        EngineConfig(data_dir=str(data_dir), compaction_threads=0, gc_interval_s=0),
        meta=SqliteStore(str(root / "catalog.db")),
        wal=wal or DiskWal(str(root / "wal")),
        store=LocalObjectStore(str(root / "sst")),
    )


@pytest.fixture
def nodes(tmp_path: Path) -> Iterator[tuple[Engine, Engine]]:
    """Two engines sharing what a cluster shares (:func:`shared_node`)."""
    a, b = shared_node(tmp_path, "a"), shared_node(tmp_path, "b")
    yield a, b
    a.close()
    b.close()


@pytest.fixture
def data_dir(tmp_path: Path) -> str:
    return str(tmp_path / "db")


@pytest.fixture
def engine(data_dir: str) -> Iterator[Engine]:

    e = open_standalone(data_dir)
    yield e
    e.close()


@pytest.fixture
def quiet(data_dir: str) -> Iterator[Engine]:
    """An engine without background compaction or GC, so tests decide when they run."""

    e = open_standalone(data_dir, compaction_threads=0, gc_interval_s=0)
    yield e
    e.close()


def flushed_hosts_table(engine: Engine) -> pa.Table:
    """Table ``m`` made through SQL with 100 rows of two hosts, flushed to an SST; its rows
    as read back, by time."""
    from node.sql.executor import SqlExecutor

    SqlExecutor(engine).execute(
        "CREATE TABLE m (host string TAG, v double, ts timestamp NOT NULL, TIMESTAMP KEY(ts))"
    )
    engine.write(
        "m",
        pa.table(
            {
                "host": ["a", "b"] * 50,
                "v": [float(i) for i in range(100)],
                "ts": pa.array(list(range(100)), pa.timestamp("ms")),
            }
        ),
    )
    engine.flush()
    return engine.read_all("m").sort_by("ts")
