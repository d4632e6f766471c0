"""A standalone gnomon (subprocess, with its Flight endpoint) and a local Spark session per
test module; Spark's Python workers run the venv's interpreter, so they import gnomon too."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gnomon.flight.client import FlightClient
from gnomon_app.spark.session import local_session
from tests.server.conftest import Running, start_standalone


@dataclass
class Node:
    running: Running

    @property
    def flight(self) -> str:
        return f"127.0.0.1:{self.running.flight_port}"

    @property
    def http(self) -> str:
        return f"127.0.0.1:{self.running.http_port}"

    def sql(self, query: str) -> Any:
        status, body = self.running.sql(query)
        assert status == 200, body
        return body

    def client(self) -> FlightClient:
        return FlightClient(self.flight)

    def table_files(self, table: str) -> set[str]:
        """The object-store keys of the table's files (the server's local object store)."""
        with self.client() as c:
            table_id = c.action("describe", table=table)["table_id"]
        root = self.running.data_dir / "sst" / "tables" / str(table_id)
        return {str(p.relative_to(root)) for p in root.rglob("*.parquet")}


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    root = tmp_path_factory.mktemp("gnomon")
    running = start_standalone(root / "data", root / "server.log")
    try:
        yield Node(running)
    finally:
        running.server.stop()


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    # The tests' workers must run this interpreter, whatever the environment says.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    session = local_session("gnomon-tests")
    yield session
    session.stop()


def reader(spark: Any, node: Node, table: str, **options: Any) -> Any:
    r = spark.read.format("gnomon").option("endpoint", node.flight).option("table", table)
    for k, v in options.items():
        r = r.option(k, str(v))
    return r


def writer(df: Any, node: Node, table: str, mode: str = "append", **options: Any) -> Any:
    w = df.write.format("gnomon").option("endpoint", node.flight).option("table", table)
    for k, v in options.items():
        w = w.option(k, str(v))
    return w.mode(mode)


REPO = Path(__file__).resolve().parents[2]
