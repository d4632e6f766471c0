"""The table-source seam's contract (node/tables.py): one suite of reads run against the local
implementation (this node's engine) and the remote one (the same tables read over a real
Flight endpoint on 127.0.0.1), so both answer every scan request alike; and the catalog and
writer contract of the local implementation, the only one that has them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from gnomon.errors import NotFound
from gnomon.flight.client import FlightClient
from node.backends import open_standalone
from node.cluster.remote import FlightTableReader
from node.engine.engine import Engine
from node.engine.schema import Column, ColumnType
from node.server.flight import FlightService
from node.sql.executor import SqlExecutor
from node.tables import LocalTables, ScanRequest, TableReader

DDL = (
    "CREATE TABLE t (host string TAG, region string, v double, n bigint, "
    "ts timestamp NOT NULL, TIMESTAMP KEY(ts))"
)
FIRST = (
    "INSERT INTO t (host, region, v, n, ts) VALUES "
    "('a', 'eu', 1.0, 1, 1000), ('b', NULL, 2.5, NULL, 2000), ('c', 'us', -1.0, 3, 3000)"
)
SECOND = "INSERT INTO t (host, region, v, n, ts) VALUES ('d', 'eu', 4.0, 4, 4000)"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Engine, FlightService, int]]:
    """An engine holding ``t`` (three rows flushed as manifest version ``version``, one more
    in the memtable) and its Flight endpoint."""
    engine = open_standalone(str(tmp_path / "owner"))
    sql = SqlExecutor(engine)
    sql.execute(DDL)
    sql.execute(FIRST)
    engine.flush()
    version = engine.pin("t").version.version
    sql.execute(SECOND)
    service = FlightService(LocalTables(engine), port=0)
    yield engine, service, version
    service.shutdown()
    engine.close()


@pytest.fixture(params=["local", "remote"])
def reader(
    request: pytest.FixtureRequest, served: tuple[Engine, FlightService, int]
) -> Iterator[TableReader]:
    engine, service, _ = served
    if request.param == "local":
        yield LocalTables(engine)
        return
    client = FlightClient(f"127.0.0.1:{service.port}")
    yield FlightTableReader("owner:1", client)
    client.close()


def _read(reader: TableReader, request: ScanRequest) -> pa.Table:
    """The scan's rows, tags plain (a reader may return them dictionary encoded)."""
    batches = list(reader.scan(request))
    table = pa.Table.from_batches(batches) if batches else None
    assert table is not None, "a scan of a table with rows returns batches"
    plain = pa.schema(
        [
            f.with_type(f.type.value_type) if pa.types.is_dictionary(f.type) else f
            for f in table.schema
        ]
    )
    return table.cast(plain)


def _all(engine: Engine) -> pa.Table:
    return engine.read_all("t")


def test_schema_is_the_tables(
    reader: TableReader, served: tuple[Engine, FlightService, int]
) -> None:
    assert reader.schema("t") == served[0].describe("t").schema


def test_unknown_table_is_not_found(reader: TableReader) -> None:
    with pytest.raises(NotFound):
        reader.schema("nope")


def test_whole_table(reader: TableReader, served: tuple[Engine, FlightService, int]) -> None:
    got = _read(reader, ScanRequest("t"))
    assert got.num_rows == 4
    assert got.column_names == served[0].describe("t").schema.names
    assert sorted(got.column("host").to_pylist()) == ["a", "b", "c", "d"]


def test_projection_keeps_the_order_asked(reader: TableReader) -> None:
    got = _read(reader, ScanRequest("t", columns=["v", "host"]))
    assert got.column_names == ["v", "host"]
    assert sorted(got.column("host").to_pylist()) == ["a", "b", "c", "d"]


@pytest.mark.parametrize(
    "predicate",
    [
        pc.field("host") == "a",
        (pc.field("v") > 0.0) & pc.field("region").is_null(),
        pc.field("n").isin(pa.array([1, 4], pa.int64())) | (pc.field("region") == "us"),
    ],
    ids=["tag", "field-and-null", "in-or"],
)
def test_predicate_on_columns_not_projected(
    reader: TableReader, served: tuple[Engine, FlightService, int], predicate: pc.Expression
) -> None:
    got = _read(reader, ScanRequest("t", columns=["ts"], predicate=predicate))
    want = _all(served[0]).filter(predicate).select(["ts"]).sort_by("ts")
    assert got.column_names == ["ts"]
    assert sorted(got.column("ts").to_pylist()) == want.column("ts").to_pylist()
    assert 0 < got.num_rows < 4


def test_time_range_is_start_inclusive_end_exclusive(reader: TableReader) -> None:
    got = _read(reader, ScanRequest("t", columns=["host"], time_range=(2000, 4000)))
    assert sorted(got.column("host").to_pylist()) == ["b", "c"]


def test_version_reads_that_snapshot(
    reader: TableReader, served: tuple[Engine, FlightService, int]
) -> None:
    got = _read(reader, ScanRequest("t", columns=["host"], version=served[2]))
    assert sorted(got.column("host").to_pylist()) == ["a", "b", "c"]


def test_local_catalog_and_writer(tmp_path: Path) -> None:
    engine = open_standalone(str(tmp_path / "local"))
    try:
        tables = LocalTables(engine)
        SqlExecutor(tables).execute(DDL)
        assert tables.list_tables() == ["t"]
        info = tables.alter_table("t", add_columns=[Column("z", ColumnType.STRING)])
        assert info.schema.has_column("z")
        assert tables.describe("t").schema == info.schema
        rows = pa.table(
            {
                "host": ["a", "b"],
                "v": [1.0, 2.0],
                "ts": pa.array([1000, 2000], pa.timestamp("ms")),
            }
        )
        assert tables.write("t", rows) == 2
        assert tables.delete_rows("t", rows.select(["host", "ts"]).slice(0, 1)) == 1
        left = _read(tables, ScanRequest("t", columns=["host"]))
        assert left.column("host").to_pylist() == ["b"]
        assert tables.max_write_bytes == engine.config.max_write_bytes
        assert tables.drop_table("t") is True
        assert tables.list_tables() == []
    finally:
        engine.close()
