"""The InfluxQL forms of the TSBS cpu-only queries answer what their SQL forms answer, on a
real engine, compared as the benchmark compares systems."""

from __future__ import annotations

import random
import tempfile
from pathlib import Path

import pytest

from bench.tsbs import check
from bench.tsbs.cpu_only import FIELDS
from bench.tsbs.influx import result_table
from bench.tsbs.queries import HOUR, Span, generate
from node.backends import open_standalone
from node.sql import influxql
from node.sql.executor import SqlExecutor

pytestmark = pytest.mark.unit

MIN = 60_000


def test_every_tsbs_query_answers_as_its_sql_form() -> None:
    """The InfluxQL forms of the TSBS cpu-only queries (bench/tsbs) answer what their gnomon
    SQL forms answer, compared as the benchmark compares systems."""
    # Minute-aligned rows: InfluxQL fills a bucket without rows at the end of a range with
    # null, which the comparison drops (the benchmark writes every 10 s, filling them all).
    span = Span(hosts=3, start_ms=1_699_999_980_000, duration_ms=13 * HOUR)
    with tempfile.TemporaryDirectory(prefix="gnomon-influxql-tsbs-") as tmp:
        engine = open_standalone(
            str(Path(tmp) / "db"), wal_sync="never", compaction_threads=0, gc_interval_s=0
        )
        try:
            sql = SqlExecutor(engine)
            sql.execute(
                "CREATE TABLE cpu (hostname string TAG, "
                + ", ".join(f"{f} double" for f in FIELDS)
                + ", timestamp timestamp NOT NULL, TIMESTAMP KEY(timestamp))"
            )
            rng = random.Random(7)
            step = MIN  # every minute bucket has rows, as in the benchmark's data
            for h in range(span.hosts):
                rows = [
                    f"('host_{h}', {t}, "
                    + ", ".join(f"{rng.uniform(0, 100):.3f}" for _ in FIELDS)
                    + ")"
                    for t in range(span.start_ms, span.start_ms + span.duration_ms, step)
                ]
                sql.execute(
                    f"INSERT INTO cpu (hostname, timestamp, {', '.join(FIELDS)}) VALUES "
                    + ", ".join(rows)
                )
            queries = generate(span, seed=3)
            for q in queries:
                reference = check.normalise_sql(sql.execute(q.gnomon).table())
                doc = influxql.answer(q.influxql, sql.execute, epoch="ms")
                got = check.normalise_influx(result_table(doc), reference)
                assert check.diff(("sql", reference), ("influxql", got)) is None, q.name
        finally:
            engine.close()
