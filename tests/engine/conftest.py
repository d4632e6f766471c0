from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pytest

from node.backends import open_standalone
from node.engine.schema import Column, ColumnType, Schema

if TYPE_CHECKING:
    from node.engine.engine import Engine

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
