"""Spark writes gnomon as revisions: a job is visible whole or not at all, a failed job leaves
no file behind, concurrent jobs publish in revision order, and an overwrite replaces a time
range."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pyarrow as pa
import pytest

from testkit.wait import bound, wait_until

from .conftest import Node, reader, writer

pytestmark = pytest.mark.integration

UTC = dt.UTC


def _ts(ms: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(ms / 1000, UTC).replace(tzinfo=None)


def _frame(spark: Any, job: str, n: int, *, value: float = 1.0, partitions: int = 4) -> Any:
    rows = [(job, f"k{i}", value, _ts(i * 60_000)) for i in range(n)]
    return spark.createDataFrame(rows, "job string, k string, v double, ts timestamp").repartition(
        partitions
    )


@pytest.fixture(scope="module")
def jobs(node: Node) -> str:
    node.sql(
        "CREATE TABLE jobs (job string TAG, k string TAG, v double NOT NULL, "
        "ts timestamp NOT NULL, TIMESTAMP KEY(ts)) WITH (segment_duration='1h')"
    )
    return "jobs"


@pytest.mark.long
def test_a_job_failing_in_one_task_leaves_nothing(spark: Any, node: Node, jobs: str) -> None:
    writer(_frame(spark, "ok", 500), node, jobs).save()
    files = node.table_files(jobs)
    rows = [("bad", f"k{i}", None if i == 7 else 1.0, _ts(i * 60_000)) for i in range(400)]
    # Nulls in the NOT NULL field: the node rejects the task holding row 7; the others stage.
    bad = spark.createDataFrame(rows, "job string, k string, v double, ts timestamp")
    with pytest.raises(Exception, match="null"):
        writer(bad.repartition(4), node, jobs).save()
    assert reader(spark, node, jobs).load().filter("job = 'bad'").count() == 0
    assert reader(spark, node, jobs).load().count() == 500
    # Tasks still running when the job was aborted find their revision cancelled and delete
    # what they wrote: wait (bounded) for the last of them.
    wait_until(
        "the aborted tasks' files deleted",
        lambda: node.table_files(jobs) == files,
        timeout_s=bound(10),
    )


def test_concurrent_jobs_become_visible_in_revision_order(
    spark: Any, node: Node, jobs: str
) -> None:
    before = reader(spark, node, jobs).load().count()
    keys = pa.table(
        {
            "job": ["x"] * 300,
            "k": [f"k{i}" for i in range(300)],
            "v": pa.array([1.0] * 300),
            "ts": pa.array([i * 60_000 for i in range(300)], pa.timestamp("ms")),
        }
    )
    with node.client() as c:
        # Job A reserves first and is still writing when job B (Spark) finishes.
        first = c.reserve(jobs)
        writer(_frame(spark, "x", 300, value=2.0), node, jobs, commitWaitSeconds=0).save()
        # B is pending behind A: none of it is visible.
        assert reader(spark, node, jobs).load().count() == before
        c.put(jobs, keys.to_batches(max_chunksize=50), keys.schema, revision=first)
        assert c.commit(jobs, first) == "latest"
    both = reader(spark, node, jobs).load().filter("job = 'x'")
    # Same keys in both: B's rows (the later revision) win.
    assert both.count() == 300
    assert {r.v for r in both.select("v").distinct().collect()} == {2.0}


def test_overwrite_replaces_a_time_range(spark: Any, node: Node) -> None:
    node.sql(
        "CREATE TABLE ow (k string TAG, v double, ts timestamp NOT NULL, TIMESTAMP KEY(ts)) "
        "WITH (segment_duration='1h')"
    )
    old = [(f"k{i % 3}", 1.0, _ts(i * 600_000)) for i in range(60)]  # 10 hours
    writer(spark.createDataFrame(old, "k string, v double, ts timestamp"), node, "ow").save()
    new = [("z", 9.0, _ts(3 * 3_600_000 + i * 600_000)) for i in range(6)]
    writer(
        spark.createDataFrame(new, "k string, v double, ts timestamp"),
        node,
        "ow",
        mode="overwrite",
        overwriteFrom=3 * 3_600_000,
        overwriteTo="1970-01-01T05:00:00",
    ).save()
    got = reader(spark, node, "ow").load()
    inside = got.filter("ts >= '1970-01-01 03:00:00' AND ts < '1970-01-01 05:00:00'")
    assert sorted((r.k, r.v) for r in inside.collect()) == [("z", 9.0)] * 6
    assert got.filter("k != 'z'").count() == 60 - 12
