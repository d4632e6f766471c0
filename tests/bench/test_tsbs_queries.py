"""The TSBS cpu-only queries run on gnomon's SQL layer over generated data, and agree with a
direct pyarrow computation where one is simple to write."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from bench.engine_ingest import SCHEMA
from bench.tsbs.cpu_only import cpu_only_batches
from bench.tsbs.queries import QUERY_TYPES, Span, generate
from node.backends import open_standalone
from node.sql.executor import SqlExecutor

pytestmark = pytest.mark.unit

START = 1_451_606_400_000
SPAN = Span(hosts=10, start_ms=START, duration_ms=24 * 3_600_000)


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SqlExecutor, pa.Table]]:
    engine = open_standalone(str(tmp_path_factory.mktemp("tsbs") / "db"), wal_sync="never")
    engine.create_table("cpu", SCHEMA)
    batches = list(cpu_only_batches(SPAN.hosts, SPAN.duration_ms // 10_000, start_ms=START))
    for b in batches:
        engine.write("cpu", b)
    engine.flush()
    yield SqlExecutor(engine), pa.concat_tables(batches)
    engine.close()


def test_every_query_type_runs(loaded: tuple[SqlExecutor, pa.Table]) -> None:
    sql, _ = loaded
    queries = generate(SPAN, seed=7)
    assert [q.name for q in queries] == list(QUERY_TYPES)
    for q in queries:
        result = sql.execute(q.gnomon).table()
        assert result.num_rows > 0, q.name


def test_high_cpu_all_matches_pyarrow(loaded: tuple[SqlExecutor, pa.Table]) -> None:
    sql, data = loaded
    q = next(q for q in generate(SPAN, seed=3) if q.name == "high-cpu-all")
    got = sql.execute(q.gnomon).table()
    ts = data.column("timestamp").cast(pa.int64())
    lo = got.column("timestamp").cast(pa.int64())
    assert got.num_rows > 0
    mask = pc.and_(
        pc.greater(data.column("usage_user"), 90.0),
        pc.and_(pc.greater_equal(ts, pc.min(lo)), pc.less_equal(ts, pc.max(lo))),
    )
    assert got.num_rows == pc.sum(mask).as_py()


def test_lastpoint_is_the_last_reading_per_host(loaded: tuple[SqlExecutor, pa.Table]) -> None:
    sql, data = loaded
    q = next(q for q in generate(SPAN) if q.name == "lastpoint")
    got = sql.execute(q.gnomon).table()
    last = data.column("timestamp").cast(pa.int64()).to_numpy().max()
    assert got.num_rows == SPAN.hosts
    assert set(got.column("timestamp").cast(pa.int64()).to_pylist()) == {int(last)}
