"""The hybrid read with a real local Spark: flushed SSTs needing no merge read by Spark's own
Parquet reader, the rest over Flight from an in-process node (its engine at hand, so a test
can flush, delete ranges, compact and collect garbage). Its answers equal the Flight-only
read's and DuckDB's over the same rows, for tables with only flushed SSTs, overlapping SSTs,
row deletions and range tombstones, an ADD COLUMN in their history, and rows still in
memtables; a read planned before a writer ingests and compaction and garbage collection run
sees exactly the planned snapshot."""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Iterator
from dataclasses import replace
from decimal import Decimal
from typing import Any

import duckdb
import pyarrow as pa
import pytest

import gnomon_app.spark
from gnomon.errors import NotFound
from gnomon.flight.client import FlightClient
from gnomon.flight.ticket import ScanSpec
from gnomon_app.spark import planning
from node.backends import open_standalone
from node.engine.engine import Engine
from node.engine.schema import Column, ColumnType
from node.server.flight import FlightService
from node.sql.executor import SqlExecutor

pytestmark = pytest.mark.integration

HOUR = 3_600_000
HOSTS = 5
#: What every read is compared on: the rows themselves, and an aggregate Spark computes.
AGG = (
    "SELECT host, count(*) AS n, sum(v) AS s, min(ts) AS lo, max(ts) AS hi "
    "FROM t GROUP BY host ORDER BY host"
)


@pytest.fixture(scope="module")
def owner(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Engine, str]]:
    engine = open_standalone(str(tmp_path_factory.mktemp("owner")))
    service = FlightService(engine, port=0)
    yield engine, f"127.0.0.1:{service.port}"
    service.shutdown()
    engine.close()


def _create(engine: Engine, name: str, mode: str = "overwrite") -> None:
    SqlExecutor(engine).execute(
        f"CREATE TABLE {name} (host string TAG, v double, ts timestamp NOT NULL, "
        f"TIMESTAMP KEY(ts)) WITH (segment_duration='1h', update_mode='{mode}')"
    )


def _rows(hours: range, value: float, hosts: int = HOSTS, step_ms: int = 60_000) -> pa.Table:
    ts = [h * HOUR + i * step_ms for h in hours for i in range(HOUR // step_ms)]
    return pa.table(
        {
            "host": [f"h{k}" for k in range(hosts) for _ in ts],
            "v": pa.array([value + i for _ in range(hosts) for i in range(len(ts))], pa.float64()),
            "ts": pa.array(ts * hosts, pa.timestamp("ms")),
        }
    )


def _sorted(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return sorted(rows, key=lambda r: tuple((x is None, str(x)) for x in r))


def _answers(spark: Any, endpoint: str, table: str, engine: Engine) -> None:
    """The hybrid read, the Flight-only read and DuckDB over the engine's rows agree."""
    hybrid = gnomon_app.spark.read(spark, table, endpoint=endpoint)
    flight_only = gnomon_app.spark.read(spark, table, endpoint=endpoint, native=False)
    expected = engine.read_all(table)
    columns = hybrid.columns
    got = _sorted([tuple(r) for r in hybrid.collect()])
    assert got == _sorted([tuple(r) for r in flight_only.collect()])
    # pyarrow reads the engine's zone-less ms timestamps as naive, as Spark shows UTC ones.
    want = expected.select(columns).to_pylist()
    assert got == _sorted([tuple(r[c] for c in columns) for r in want])
    hybrid.createOrReplaceTempView("t")
    by_spark = [tuple(r) for r in spark.sql(AGG).collect()]
    with duckdb.connect() as con:
        con.register("t", expected)
        by_duckdb = con.execute(AGG).fetchall()
    assert [r[:3] for r in by_spark] == [r[:3] for r in by_duckdb]
    assert [r[3:] for r in by_spark] == [
        tuple(x.replace(tzinfo=None) for x in r[3:]) for r in by_duckdb
    ]


def _native(endpoint: str, table: str) -> planning.Plan:
    plan = planning.plan(endpoint, ScanSpec(table=table, lease_ms=60_000, native=["file"]))
    planning.release(plan.held)
    return plan


def test_only_flushed_ssts_read_natively(spark: Any, owner: tuple[Engine, str]) -> None:
    engine, endpoint = owner
    _create(engine, "flushed")
    engine.write("flushed", _rows(range(0, 3), 0.0))
    engine.flush("flushed")
    plan = _native(endpoint, "flushed")
    assert len(plan.native) == 3 and plan.native_rows == 3 * 60 * HOSTS and not plan.splits
    _answers(spark, endpoint, "flushed", engine)


def test_overlapping_ssts_go_over_flight(spark: Any, owner: tuple[Engine, str]) -> None:
    engine, endpoint = owner
    _create(engine, "overlap")
    engine.write("overlap", _rows(range(0, 4), 0.0))
    engine.flush("overlap")
    # Hour 1 again, newer values: its two SSTs must be merged (the newer row wins).
    engine.write("overlap", _rows(range(1, 2), 1000.0))
    engine.flush("overlap")
    plan = _native(endpoint, "overlap")
    assert plan.native_rows == 3 * 60 * HOSTS and plan.splits
    _answers(spark, endpoint, "overlap", engine)


def test_deletes_and_range_tombstones(spark: Any, owner: tuple[Engine, str]) -> None:
    engine, endpoint = owner
    _create(engine, "deleted")
    engine.write("deleted", _rows(range(0, 4), 0.0))
    engine.flush("deleted")
    SqlExecutor(engine).execute(
        f"DELETE FROM deleted WHERE host = 'h1' AND ts >= {HOUR} AND ts < {HOUR + 600_000}"
    )
    engine.delete_range("deleted", tags={"host": "h2"}, time_range=(2 * HOUR, 2 * HOUR + 1))
    engine.delete_range("deleted", time_range=(3 * HOUR + 1_800_000, None))
    engine.flush("deleted")
    plan = _native(endpoint, "deleted")
    assert plan.native_rows == 60 * HOSTS  # hour 0 alone is untouched
    _answers(spark, endpoint, "deleted", engine)


def test_add_column_history(spark: Any, owner: tuple[Engine, str]) -> None:
    engine, endpoint = owner
    _create(engine, "widened")
    engine.write("widened", _rows(range(0, 2), 0.0))
    engine.flush("widened")
    engine.alter_table("widened", add_columns=[Column("note", ColumnType.STRING, default="none")])
    later = _rows(range(2, 3), 5.0)
    engine.write("widened", later.append_column("note", pa.array(["x"] * later.num_rows)))
    engine.flush("widened")
    plan = _native(endpoint, "widened")
    assert plan.native_rows == 60 * HOSTS  # the file written after the ALTER
    _answers(spark, endpoint, "widened", engine)
    notes = gnomon_app.spark.read(spark, "widened", endpoint=endpoint, columns=["note"])
    assert sorted({r.note for r in notes.collect()}) == ["none", "x"]


def test_rows_in_memtables(spark: Any, owner: tuple[Engine, str]) -> None:
    engine, endpoint = owner
    _create(engine, "live", mode="append")
    engine.write("live", _rows(range(0, 2), 0.0))
    engine.flush("live")
    engine.write("live", _rows(range(5, 6), 7.0))  # not flushed
    plan = _native(endpoint, "live")
    assert plan.native_rows == 2 * 60 * HOSTS and plan.splits
    assert engine.table("live").stats().memtable_rows == 60 * HOSTS  # nothing was flushed
    _answers(spark, endpoint, "live", engine)


def test_filters_and_columns(spark: Any, owner: tuple[Engine, str]) -> None:
    engine, endpoint = owner
    from pyspark.sql import functions as F

    frame = gnomon_app.spark.read(
        spark, "overlap", endpoint=endpoint, columns=["host", "v"], time_range=(HOUR, 3 * HOUR)
    ).where(F.col("host") == "h3")
    want = [
        r
        for r in engine.read_all("overlap", time_range=(HOUR, 3 * HOUR)).to_pylist()
        if r["host"] == "h3"
    ]
    assert sorted(r.v for r in frame.collect()) == sorted(r["v"] for r in want)
    assert frame.columns == ["host", "v"]


def test_a_read_sees_one_snapshot(spark: Any, owner: tuple[Engine, str]) -> None:
    """Planned, then a writer ingests, compaction merges, garbage collection runs with no
    retention, before the job and while it runs: the job reads the planned rows, from files
    the lease kept."""
    engine, endpoint = owner
    _create(engine, "busy")
    SqlExecutor(engine).execute("ALTER TABLE busy MODIFY SETTING max_versions='1'")
    for h in range(4):
        engine.write("busy", _rows(range(h, h + 2), float(h)))
        engine.flush("busy")
    engine.write("busy", _rows(range(6, 7), 9.0))  # in the memtable
    before = engine.read_all("busy")
    frame = gnomon_app.spark.read(spark, "busy", endpoint=endpoint)
    for h in range(3):
        engine.write("busy", _rows(range(h, h + 8), 100.0 + h))
        engine.flush("busy")
    assert engine.compact("busy") > 0
    config = engine.config
    engine.config = replace(config, gc_grace_ms=0)
    try:
        engine.gc("busy")
    finally:
        engine.config = config
    # max_versions=1 would keep the current version alone: the lease keeps the planned one.
    table_id = engine.describe("busy").table_id
    assert len(engine.manifest.versions(table_id)) > 1

    def busy() -> None:
        for h in range(4):  # bounded: a few rounds while the job runs
            engine.write("busy", _rows(range(h, h + 3), 200.0 + h))
            engine.flush("busy")
            engine.compact("busy")
            engine.gc("busy")

    writer = threading.Thread(target=busy)
    writer.start()
    try:
        got = _sorted([(r["host"], r["v"], r["ts"]) for r in frame.collect()])
    finally:
        writer.join(timeout=120)
    assert not writer.is_alive()
    assert got == _sorted([(r["host"], r["v"], r["ts"]) for r in before.to_pylist()])
    assert got != _sorted(
        [(r["host"], r["v"], r["ts"]) for r in engine.read_all("busy").to_pylist()]
    )


def test_lease_runs_out(owner: tuple[Engine, str]) -> None:
    engine, endpoint = owner
    _create(engine, "released")
    plan = planning.plan(endpoint, ScanSpec(table="released", lease_ms=60_000))
    (held,) = plan.held
    with FlightClient(endpoint) as client:
        assert client.action("release", pin=held.pin)["released"]
        with pytest.raises(NotFound, match="no held snapshot"):
            client.action("renew", pin=held.pin)


def test_lease_keeper_releases_on_stop(owner: tuple[Engine, str]) -> None:
    engine, endpoint = owner
    _create(engine, "kept")
    plan = planning.plan(endpoint, ScanSpec(table="kept", lease_ms=60_000))
    keeper = planning.LeaseKeeper(plan.held, max_s=600)
    keeper.stop()
    (held,) = plan.held
    with FlightClient(endpoint) as client, pytest.raises(NotFound, match="no held snapshot"):
        client.action("renew", pin=held.pin)


def test_every_column_type_read_natively(spark: Any, owner: tuple[Engine, str]) -> None:
    """Spark's Parquet reader takes every column type as the data source gives it (unsigned
    integers widened, dates, binary, the zone-less timestamp as a UTC one)."""
    engine, endpoint = owner
    SqlExecutor(engine).execute(
        "CREATE TABLE typed (host string TAG, d double, f float, s string, b varbinary, "
        "ok boolean, day date, i8 int8, i16 int16, i32 int32, i64 int64, u8 uint8, "
        "u16 uint16, u32 uint32, u64 uint64, ts timestamp NOT NULL, TIMESTAMP KEY(ts))"
    )
    SqlExecutor(engine).execute(
        "INSERT INTO typed (host, d, f, s, b, ok, day, i8, i16, i32, i64, u8, u16, u32, u64, ts) "
        "VALUES ('h1', 1.5, 2.5, 'x', 'ab', true, '2024-02-29', -128, -32768, -2147483648, "
        "-9223372036854775808, 255, 65535, 4294967295, 18446744073709551615, 1700000000123), "
        "('h2', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, "
        "NULL, 1700000000124)"
    )
    engine.flush("typed")
    assert _native(endpoint, "typed").native_rows == 2
    hybrid = gnomon_app.spark.read(spark, "typed", endpoint=endpoint).collect()
    flight_only = gnomon_app.spark.read(spark, "typed", endpoint=endpoint, native=False).collect()
    assert _sorted([tuple(r) for r in hybrid]) == _sorted([tuple(r) for r in flight_only])
    (full,) = [r for r in hybrid if r.host == "h1"]
    assert (full.u64, full.u32, full.u8, full.day) == (
        Decimal(2**64 - 1),
        2**32 - 1,
        255,
        dt.date(2024, 2, 29),
    )
    assert full.ts == dt.datetime(2023, 11, 14, 22, 13, 20, 123000)


def test_a_settings_change_keeps_files_native(spark: Any, owner: tuple[Engine, str]) -> None:
    """MODIFY SETTING makes a new schema version with the same columns: files written before
    it still hold every column and are read as plain Parquet."""
    engine, endpoint = owner
    _create(engine, "retuned")
    engine.write("retuned", _rows(range(0, 2), 0.0))
    engine.flush("retuned")
    SqlExecutor(engine).execute("ALTER TABLE retuned MODIFY SETTING max_versions='50'")
    assert _native(endpoint, "retuned").native_rows == 2 * 60 * HOSTS
    _answers(spark, endpoint, "retuned", engine)
