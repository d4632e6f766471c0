"""A Spark write whose task fails midway and is retried ends with each row once: the rows the
failed attempt already sent the node are not published with the job, on a plain APPEND table
and on a partition table (whose sub-tables each get a revision)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyarrow as pa
import pytest

from gnomon_app.spark.session import local_session

from .conftest import Node, reader, writer

pytestmark = pytest.mark.integration

#: Enough rows that the failing attempt's first quarter outgrows the buffer (64 KiB,
#: ``spark.buffer.size``) between Spark and the writer's Python worker: the writer gets them,
#: sends them to the node and, its input ending there, ends its puts as if done.
ROWS = 40_000
#: Rows per Arrow batch between Spark and the Python workers.
BATCH_ROWS = 100


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    """A local session that tries a failed task once more."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    session = local_session(
        "gnomon-retry-tests",
        max_failures=2,
        spark_sql_execution_arrow_maxRecordsPerBatch=str(BATCH_ROWS),
    )
    yield session
    session.stop()


def _frame(spark: Any, failed: Path) -> Any:
    """The test rows, read through a step whose first attempt of the first partition fails
    (touching ``failed``) once a quarter of the rows have gone out to the writer."""
    from pyspark.sql import functions as F

    def fail_first_attempt(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        fail = ctx is not None and ctx.partitionId() == 0 and ctx.attemptNumber() == 0
        sent = 0
        for b in batches:
            yield b
            sent += b.num_rows
            if fail and sent >= ROWS // 4:
                failed.touch()
                raise RuntimeError("the first attempt fails midway")

    rows = spark.range(ROWS, numPartitions=2).select(
        F.format_string("host_%02d", F.col("id") % 10).alias("host"),
        F.col("id").cast("double").alias("v"),
        F.timestamp_millis(F.col("id") * 1000).alias("ts"),
    )
    return rows.mapInArrow(fail_first_attempt, rows.schema)


def _written_once(spark: Any, node: Node, table: str, failed: Path) -> None:
    writer(_frame(spark, failed), node, table).save()
    assert failed.exists()  # the job did go through a failed attempt
    got = reader(spark, node, table).load()
    assert got.count() == ROWS
    assert got.select("v").distinct().count() == ROWS


@pytest.mark.long
def test_a_retried_task_stages_its_rows_once(spark: Any, node: Node, tmp_path: Path) -> None:
    node.sql(
        "CREATE TABLE retried (host string TAG, v double, ts timestamp NOT NULL, "
        "TIMESTAMP KEY(ts)) WITH (segment_duration='1h', update_mode='APPEND')"
    )
    _written_once(spark, node, "retried", tmp_path / "failed")


def test_a_retried_task_stages_its_rows_once_in_a_partition_table(
    spark: Any, node: Node, tmp_path: Path
) -> None:
    node.sql(
        "CREATE TABLE retried_parts (host string TAG, v double, ts timestamp NOT NULL, "
        "TIMESTAMP KEY(ts)) PARTITION BY KEY(host) PARTITIONS 3 "
        "WITH (segment_duration='1h', update_mode='APPEND')"
    )
    _written_once(spark, node, "retried_parts", tmp_path / "failed")


def test_a_job_missing_a_task_commit_message_is_not_published() -> None:
    from gnomon.errors import Conflict
    from gnomon_app.spark.datasource import GnomonCommit, GnomonWriter

    # The check comes before any owner is called: a writer with no revisions will do.
    job = SimpleNamespace(revisions=[])
    with pytest.raises(Conflict, match="sent no gnomon commit message"):
        GnomonWriter.commit(job, [GnomonCommit(0, {}), None])  # type: ignore[arg-type]
