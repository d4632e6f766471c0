"""Spark reads gnomon over Flight (and writes it back): every column type round-trips,
filters are pushed down (the node's scan statistics show the pruning), every task of a read
sees one pinned version while a writer commits, and versions can be read back."""

from __future__ import annotations

import datetime as dt
import json
import threading
import uuid
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

from gnomon.flight.ticket import ScanSpec

from .conftest import Node, reader, writer

pytestmark = pytest.mark.integration

HOUR = 3_600_000
UTC = dt.UTC


def _ts(ms: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(ms / 1000, UTC).replace(tzinfo=None)


def test_every_column_type_round_trips(spark: Any, node: Node) -> None:
    node.sql(
        "CREATE TABLE all_types (host string TAG, d double, f float, s string, b varbinary, "
        "ok boolean, day date, i8 int8, i16 int16, i32 int32, i64 int64, u8 uint8, "
        "u16 uint16, u32 uint32, u64 uint64, ts timestamp NOT NULL, TIMESTAMP KEY(ts))"
    )
    schema = reader(spark, node, "all_types").load().schema
    # The table's order: the timestamp key first, then the columns as declared.
    assert schema.fieldNames()[:2] == ["ts", "host"]
    assert schema["ts"].dataType.typeName() == "timestamp"
    assert schema["u64"].dataType.simpleString() == "decimal(20,0)"
    declared = [
        (
            "h1", 1.5, 2.5, "héllo", b"\x00\xff", True, dt.date(2024, 2, 29), -128, -32768,
            -(2**31), -(2**63), 255, 65535, 2**32 - 1, Decimal(2**64 - 1), _ts(1_700_000_000_123),
        ),
        (
            "h2", -0.0, None, None, None, None, None, None, None, None, None, None, None, None,
            None, _ts(1_700_000_000_124),
        ),
        (
            "h3", 1e300, -1.0, "", b"", False, dt.date(1970, 1, 1), 127, 32767, 2**31 - 1,
            2**63 - 1, 0, 0, 0, Decimal(0), _ts(0),
        ),
    ]  # fmt: skip
    rows = [(r[-1], *r[:-1]) for r in declared]
    df = spark.createDataFrame(rows, schema)
    writer(df, node, "all_types").save()
    back = reader(spark, node, "all_types").load().collect()
    assert sorted(tuple(r) for r in back) == sorted(rows)


@pytest.fixture(scope="module")
def metrics(node: Node) -> pa.Table:
    """24 hourly windows, 10 hosts, a row a minute: one SST per window."""
    node.sql(
        "CREATE TABLE metrics (host string TAG, v double, ts timestamp NOT NULL, "
        "TIMESTAMP KEY(ts)) WITH (segment_duration='1h')"
    )
    n = 24 * 60
    ts = [i * 60_000 for i in range(n)]
    table = pa.table(
        {
            "host": [f"h{k}" for k in range(10) for _ in range(n)],
            "v": pa.array([float(i) for _ in range(10) for i in range(n)]),
            "ts": pa.array(ts * 10, pa.timestamp("ms")),
        }
    )
    with node.client() as c:
        c.put("metrics", table.to_batches(), table.schema)
        # Planned without a lease, a scan flushes first: the windows become SSTs to prune.
        c.plan(ScanSpec(table="metrics"))
    return table


def test_filters_are_pushed_down(spark: Any, node: Node, metrics: pa.Table) -> None:
    from pyspark.sql import functions as F

    scan_id = uuid.uuid4().hex
    df = reader(spark, node, "metrics", scanId=scan_id, minSplitRows=1).load()
    got = df.filter(
        (F.col("host") == "h3")
        & (F.col("ts") >= F.lit(_ts(20 * HOUR)))
        & (F.col("v").isin(1230.0, 1300.0, 5.0))
        & F.col("v").isNotNull()
    ).collect()
    assert sorted(r.v for r in got) == [1230.0, 1300.0]
    with node.client() as c:
        stats = c.scan_stats(scan_id)
    # At most the 4 windows from hour 20 are read (min/max of v prune more); the other
    # windows are pruned by time, and rows by the filters.
    assert 1 <= stats["ssts_read"] <= 4 and stats["rows_returned"] == 2
    assert stats["ssts_total"] == 24 * stats["tickets"]

    # A filter Spark must keep (LIKE '%..%' is pushable; a UDF-like expression is not).
    full_id = uuid.uuid4().hex
    rows = reader(spark, node, "metrics", scanId=full_id).load()
    odd = rows.filter((F.col("v") % 2) == 1).count()
    assert odd == metrics.num_rows // 2
    with node.client() as c:
        full = c.scan_stats(full_id)
    assert full["ssts_read"] == full["ssts_total"] == 24
    assert full["rows_returned"] == metrics.num_rows


def test_column_pruning_by_schema(spark: Any, node: Node, metrics: pa.Table) -> None:
    df = reader(spark, node, "metrics").schema("host string, v double").load()
    assert df.columns == ["host", "v"]
    assert df.filter("host = 'h0'").count() == metrics.num_rows // 10


def test_unknown_table_or_column_is_a_clear_error(spark: Any, node: Node) -> None:
    with pytest.raises(Exception, match="table 'nope' does not exist"):
        reader(spark, node, "nope").load().collect()
    with pytest.raises(Exception, match="has no column 'zz'"):
        reader(spark, node, "metrics").schema("zz string").load().collect()


def test_reads_see_one_version_while_a_writer_commits(spark: Any, node: Node) -> None:
    """Each writer job adds 1000 rows spread over 4 windows; a read whose tasks saw
    different versions would count a part of a job."""
    node.sql(
        "CREATE TABLE busy (job string TAG, i int64, ts timestamp NOT NULL, "
        "TIMESTAMP KEY(ts)) WITH (segment_duration='1h', update_mode='APPEND')"
    )
    stop = threading.Event()
    jobs: list[int] = []
    errors: list[BaseException] = []

    def write() -> None:
        try:
            with node.client() as c:
                for j in range(40):
                    if stop.is_set():
                        return
                    rows = pa.table(
                        {
                            "job": [f"j{j}"] * 1000,
                            "i": pa.array(range(1000), pa.int64()),
                            "ts": pa.array([k * 14_400 for k in range(1000)], pa.timestamp("ms")),
                        }
                    )
                    rev = c.reserve("busy")
                    c.put("busy", rows.to_batches(max_chunksize=100), rows.schema, revision=rev)
                    c.commit("busy", rev)
                    jobs.append(j)
                    stop.wait(0.2)  # spread the commits over the reads
        except BaseException as e:  # reported by the test thread
            errors.append(e)

    thread = threading.Thread(target=write)
    thread.start()
    counts = []
    try:
        for _ in range(6):
            df = reader(spark, node, "busy", minSplitRows=1, maxSplits=4).load()
            counts.append(df.count())
    finally:
        stop.set()
        thread.join(timeout=120)
    assert not errors, errors
    assert all(c % 1000 == 0 for c in counts), counts
    assert counts == sorted(counts)


def test_time_travel(spark: Any, node: Node) -> None:
    node.sql("CREATE TABLE tt (v int64, ts timestamp NOT NULL, TIMESTAMP KEY(ts))")
    with node.client() as c:
        for k in range(3):
            rows = pa.table({"v": [k], "ts": pa.array([k * 1000], pa.timestamp("ms"))})
            rev = c.reserve("tt")
            c.put("tt", rows.to_batches(), rows.schema, revision=rev)
            c.commit("tt", rev)
        info = c.plan(ScanSpec("tt"))
        latest = int(json.loads(info.app_metadata)["version"])
    old = reader(spark, node, "tt", versionAsOf=latest - 1).load()
    assert sorted(r.v for r in old.collect()) == [0, 1]
    now = reader(spark, node, "tt", timestampAsOf=dt.datetime.now(UTC).isoformat()).load()
    assert sorted(r.v for r in now.collect()) == [0, 1, 2]
