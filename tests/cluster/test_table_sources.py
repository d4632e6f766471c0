"""The table-source seam's contract (node/tables.py): one suite of reads run against the local
implementation (this node's engine) and the remote one (the same tables read over a real
Flight endpoint on 127.0.0.1), so both answer every scan request alike, and both prune by a
request's bounds (the remote one at the owner); and the catalog and writer contract of the
local implementation, the only one that has them."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from gnomon.errors import NotFound
from gnomon.flight.client import FlightClient
from node.backends import open_standalone
from node.cluster.remote import FlightTableReader, RemoteScan
from node.engine.bounds import Bounds, Range
from node.engine.engine import Engine
from node.engine.scan import Scan, ScanRequest, ScanStats
from node.engine.schema import Column, ColumnType
from node.server.flight import FlightService
from node.sql.executor import SqlExecutor
from node.tables import LocalTables, TableReader

pytestmark = pytest.mark.unit

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


BOUNDS: list[Bounds] = [
    {"host": Range(values=frozenset({"a", "d"}))},
    {"v": Range(lo=0.0, lo_inclusive=False, hi=4.0, hi_inclusive=False)},
    {"n": Range(values=frozenset({1, 3, 4}), lo=2)},
    {"ts": Range(lo=2000, hi=3000)},
    {"region": Range(hi="f"), "host": Range(lo="a", lo_inclusive=False)},
    {"host": Range(values=frozenset())},
]


@pytest.mark.parametrize(
    "bounds", BOUNDS, ids=["tag-in", "open-range", "in-and-range", "time", "two-columns", "none"]
)
def test_bounds_keep_the_rows_that_meet_them(
    reader: TableReader, served: tuple[Engine, FlightService, int], bounds: Bounds
) -> None:
    request = ScanRequest("t", columns=["ts", "host"], bounds=bounds)
    everything = _all(served[0]).to_pylist()
    want = sorted(
        r["ts"] for r in everything if all(b.admits(_ms(r[c])) for c, b in bounds.items())
    )
    # A request nothing meets may return no batches at all.
    assert sorted(r["ts"] for b in reader.scan(request) for r in b.to_pylist()) == want


def test_bounds_and_predicate_and_time_range_together(
    reader: TableReader, served: tuple[Engine, FlightService, int]
) -> None:
    request = ScanRequest(
        "t",
        columns=["host"],
        time_range=(1000, 4001),
        predicate=pc.is_valid(pc.field("region")),
        bounds={"n": Range(lo=1, lo_inclusive=False)},
    )
    assert sorted(_read(reader, request).column("host").to_pylist(), key=str) == ["c", "d"]


def test_bounds_prune_at_the_owner(
    reader: TableReader, served: tuple[Engine, FlightService, int]
) -> None:
    """A bound no flushed row meets (hosts a to c are flushed, d is in the memtable) leaves
    the SST unread, whether the scan runs here or at the owner."""
    scan = reader.scan(
        ScanRequest("t", columns=["host"], bounds={"host": Range(values=frozenset({"d"}))})
    )
    assert [r["host"] for b in scan for r in b.to_pylist()] == ["d"]
    stats = _stats(scan, served[1])
    assert (stats.ssts_read, stats.ssts_total) == (0, 1)


def _stats(scan: Iterable[pa.RecordBatch], service: FlightService) -> ScanStats:
    """What ``scan`` (read to its end) touched: its own statistics, or those the owner keeps
    under its scan id."""
    if isinstance(scan, Scan):
        return scan.stats
    assert isinstance(scan, RemoteScan)
    with FlightClient(f"127.0.0.1:{service.port}") as client:
        kept = client.scan_stats(scan.scan_id)
    return ScanStats(ssts_total=kept["ssts_total"], ssts_read=kept["ssts_read"])


def _ms(value: object) -> object:
    """A row's value as bounds take it (timestamps in milliseconds)."""
    if isinstance(value, datetime):
        return int(value.replace(tzinfo=UTC).timestamp() * 1000)
    return value


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
