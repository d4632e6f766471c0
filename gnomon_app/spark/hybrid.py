"""The hybrid read: a gnomon table as one Spark DataFrame, its flushed SSTs that need
no merge read by Spark's own vectorized Parquet reader, the rest (merge groups, memtables,
older schema versions) through the ``gnomon`` data source from each owner, unioned.

Each owner holds its snapshot (manifest version and memtables, nothing flushed) from planning
on, under a lease the driver renews while the session runs (at most ``hold_seconds``, default
an hour: a DataFrame does not say when its last job ran) and each task's read renews too, so
retention cannot delete a file the job has still to read. Spark
pushes the DataFrame's filters to both halves (Parquet filters on one, the data source's
``pushFilters`` on the other) and prunes the Parquet half's columns; ``columns`` prunes the
other's.

Spark reads SSTs at their ``file:`` URIs (a node's local object store on this machine) or
``s3a:`` ones when the session has the s3a filesystem (hadoop-aws and the AWS SDK supplied by
the deployment, ``spark.jars.packages``); otherwise it says so once and everything is read over
Flight.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Sequence
from dataclasses import replace
from typing import Any
from urllib.parse import urlparse

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from gnomon.errors import InvalidArgument
from gnomon.flight.ticket import ScanSpec
from gnomon_app.spark import planning
from gnomon_app.spark.datasource import columns_of, follower_reads, spark_schema, table_schema

log = logging.getLogger("gnomon_app.spark")

#: Sessions already told that Spark cannot reach the store (said once per session).
_warned: set[str] = set()
#: Whether each session (by application id) has the s3a filesystem: asked of its JVM once,
#: since a miss costs a Java exception converted through py4j on every read.
_s3a: dict[str, bool] = {}


def _has_s3a(spark: SparkSession) -> bool:
    app = spark.sparkContext.applicationId
    if app not in _s3a:
        _s3a[app] = _jvm_has_s3a(spark)
    return _s3a[app]


def _jvm_has_s3a(spark: SparkSession) -> bool:
    jvm = spark.sparkContext._jvm
    if jvm is None:
        return False
    try:
        loader = jvm.Thread.currentThread().getContextClassLoader()
        jvm.java.lang.Class.forName("org.apache.hadoop.fs.s3a.S3AFileSystem", False, loader)
    except Exception:  # py4j raises its own error for a class the JVM lacks
        return False
    return True


def _readable(uri: str) -> bool:
    """Whether this driver sees a ``file:`` URI's file (the node shares the machine)."""
    parsed = urlparse(uri)
    return parsed.scheme != "file" or os.path.exists(parsed.path)


def read(
    spark: SparkSession,
    table: str,
    *,
    endpoint: str,
    columns: Sequence[str] | None = None,
    time_range: tuple[int | None, int | None] = (None, None),
    native: bool = True,
    lease_seconds: float = 600.0,
    hold_seconds: float = 3600.0,
    scan_id: str | None = None,
    max_splits: int = 64,
    min_split_rows: int = 1_000_000,
    read: str = "leader",
) -> DataFrame:
    """``table`` (served anywhere in the cluster ``endpoint``, a node's Flight endpoint, is
    part of) as one DataFrame of one snapshot per owner: ``columns`` (default all) of the rows
    in ``time_range`` ([lo, hi) ms). ``native=False`` reads everything over Flight.
    ``scan_id`` names the read on the owners (their ``scan_stats``). ``read="follower"``
    plans and reads each part at one of its followers where it has some."""
    follower = follower_reads(read)
    where = planning.route(endpoint, table)
    described = table_schema(endpoint, table, where)
    all_columns = columns_of(described)
    names = [c.name for c in all_columns]
    wanted = list(columns) if columns is not None else names
    unknown = [c for c in wanted if c not in names]
    if unknown:
        raise InvalidArgument(f"table {table!r} has no columns {unknown}")
    schema = spark_schema([c for c in all_columns if c.name in wanted])
    schemes = ["file", *(["s3a"] if _has_s3a(spark) else [])] if native else []
    spec = ScanSpec(
        table=table,
        columns=wanted,
        time_range=time_range,
        lease_ms=int(lease_seconds * 1000),
        native=schemes,
        scan_id=scan_id or uuid.uuid4().hex,
        max_splits=max_splits,
        min_split_rows=min_split_rows,
    )
    plan = planning.plan(endpoint, spec, where, follower=follower)
    if not all(_readable(u) for u in plan.native[:1]):
        # The node's files are on another machine: plan again, all of it over Flight.
        planning.release(plan.held)
        plan = planning.plan(endpoint, replace(spec, native=[]), where, follower=follower)
    unreachable = plan.stores - set(schemes)
    if native and unreachable and spark.sparkContext.applicationId not in _warned:
        _warned.add(spark.sparkContext.applicationId)
        log.warning(
            "Spark cannot read the SSTs where they are stored, so every row is read over "
            "Flight; supply the s3a filesystem (hadoop-aws, spark.jars.packages) to read "
            "flushed SSTs directly",
            extra={"table": table, "stores": sorted(unreachable)},
        )
    keeper = planning.LeaseKeeper(
        plan.held, max_s=hold_seconds, until=lambda: spark.sparkContext._jsc is None
    )
    log.info(
        "hybrid read planned",
        extra={
            "table": table,
            "native_files": len(plan.native),
            "native_rows": plan.native_rows,
            "flight_splits": len(plan.splits),
            "owners": len({h.owner for h in keeper.held}),
        },
    )
    frames: list[DataFrame] = []
    if plan.native:
        ts = described["timestamp_key"]
        read_as = spark_schema([c for c in all_columns if c.name in wanted or c.name == ts])
        native_rows = _native(spark, plan, read_as, ts, time_range)
        # Each select is a round trip to the JVM: only when the timestamp was read for the
        # filters alone, or the order differs.
        frames.append(native_rows if read_as.names == wanted else native_rows.select(*wanted))
    if plan.splits or not frames:
        frames.append(
            spark.read.format("gnomon")
            .schema(schema)
            .option("endpoint", endpoint)
            .option("table", table)
            .option("leaseSeconds", str(lease_seconds))
            .option("plan", plan.splits_json())
            .load()
        )
    out = frames[0]
    for other in frames[1:]:
        out = out.unionByName(other)
    return out


def _native(
    spark: SparkSession,
    plan: planning.Plan,
    schema: Any,
    ts: str,
    time_range: tuple[int | None, int | None],
) -> DataFrame:
    """The plan's SSTs as Spark reads Parquet: the explicit schema (``ts`` is stored without
    a zone, which Spark would infer as timestamp_ntz), the time range and the TTL floor as
    filters Spark pushes into the Parquet reader."""
    frame = spark.read.schema(schema).parquet(*plan.native)
    lo, hi = time_range
    floor = plan.ttl_floor_ms
    lo = floor if lo is None else lo if floor is None else max(lo, floor)
    if lo is not None:
        frame = frame.where(F.col(ts) >= F.timestamp_millis(F.lit(lo)))
    if hi is not None:
        frame = frame.where(F.col(ts) < F.timestamp_millis(F.lit(hi)))
    return frame
