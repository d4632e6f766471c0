"""Queries that need only each series' newest row ("last point per host": a table joined with
its newest timestamp per group of tags) read the table's latest rows, and answer as DuckDB
does over the same rows: with overwrites, late rows and a memtable; after deletes (the
engine then merges everything); in APPEND mode (the rule does not apply); and in the shapes
the rule must refuse."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import duckdb
import pyarrow as pa
import pytest

import node.sql.session as session_module
from node.backends import open_standalone
from node.sql.executor import SqlExecutor

pytestmark = pytest.mark.unit

SERIES = [("h0", "eu"), ("h1", "eu"), ("h1", "us"), ("h2", "us"), ("h3", "ap")]
STEP = 1_000

LATEST = [
    # TSBS's lastpoint, as the benchmark asks it.
    "SELECT c.host, c.ts, c.v FROM {t} c JOIN (SELECT host, max(ts) AS last FROM {t} "
    "GROUP BY host) l ON c.host = l.host AND c.ts = l.last ORDER BY c.host, c.ts, c.v",
    # Per series, the join's sides swapped, the answer sorted and cut.
    "SELECT l.region, c.host, c.v FROM (SELECT host, region, max(ts) AS m FROM {t} "
    "GROUP BY host, region) l JOIN {t} c ON c.region = l.region AND c.host = l.host "
    "AND c.ts = l.m ORDER BY l.region DESC, c.host LIMIT 3",
    # Per region: several series share the newest timestamp of their group, or not.
    "SELECT c.region, c.host, c.ts FROM {t} c JOIN (SELECT region, max(ts) AS last FROM {t} "
    "GROUP BY region) l ON c.region = l.region AND c.ts = l.last ORDER BY 1, 2",
]
#: Same joins the rule must leave alone: each reads rows other than the newest.
REFUSED = [
    "SELECT c.host, c.ts FROM {t} c JOIN (SELECT host, min(ts) AS first FROM {t} "
    "GROUP BY host) l ON c.host = l.host AND c.ts = l.first ORDER BY 1, 2",
    "SELECT c.host, c.ts FROM {t} c JOIN (SELECT host, max(ts) AS last FROM {t} "
    "WHERE v < 50 GROUP BY host) l ON c.host = l.host AND c.ts = l.last ORDER BY 1, 2",
    "SELECT c.host, count(*) AS n FROM {t} c LEFT JOIN (SELECT host, max(ts) AS last "
    "FROM {t} GROUP BY host) l ON c.host = l.host AND c.ts = l.last GROUP BY c.host "
    "ORDER BY 1",
    "SELECT c.host, c.ts, (SELECT count(*) FROM {t}) AS n FROM {t} c JOIN (SELECT host, "
    "max(ts) AS last FROM {t} GROUP BY host) l ON c.host = l.host AND c.ts = l.last "
    "ORDER BY 1, 2",
]


def _rows(rng: random.Random, keys: list[tuple[str, str, int]]) -> pa.Table:
    return pa.table(
        {
            "host": [k[0] for k in keys],
            "region": [k[1] for k in keys],
            "v": pa.array([round(rng.uniform(0, 100), 2) for _ in keys], pa.float64()),
            "ts": pa.array([k[2] for k in keys], pa.timestamp("ms")),
        }
    )


def _load(sql: SqlExecutor, table: str, mode: str, seed: int) -> None:
    """Two flushes (the second overwriting and adding late rows), then rows left in the
    memtable; two series end at the same newest timestamp, the others earlier."""
    rng = random.Random(seed)
    sql.execute(
        f"CREATE TABLE {table} (host string TAG, region string TAG, v double, ts timestamp "
        f"NOT NULL, TIMESTAMP KEY(ts)) WITH (update_mode='{mode}', segment_duration='10s', "
        "num_rows_per_row_group='8')"
    )
    ends = [40, 40, 33, 25, 38]
    keys = [(h, r, t * STEP) for (h, r), end in zip(SERIES, ends, strict=True) for t in range(end)]
    engine = sql.tables.engine
    engine.write(table, _rows(rng, [k for k in keys if k[2] < 20 * STEP]))
    engine.flush(table)
    again = rng.sample([k for k in keys if k[2] < 20 * STEP], 15)
    engine.write(table, _rows(rng, [k for k in keys if 20 * STEP <= k[2] < 30 * STEP] + again))
    engine.flush(table)
    engine.write(table, _rows(rng, [k for k in keys if k[2] >= 30 * STEP] + again[:3]))


@pytest.fixture(scope="module", params=["read up front", "streamed"])
def both(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[tuple[SqlExecutor, Any]]:
    small = session_module.SMALL_SCAN_VALUES
    if request.param == "streamed":
        session_module.SMALL_SCAN_VALUES = -1
    engine = open_standalone(
        str(tmp_path_factory.mktemp("latest") / "db"), compaction_threads=0, gc_interval_s=0
    )
    sql = SqlExecutor(engine)
    _load(sql, "ow", "OVERWRITE", 1)
    _load(sql, "ap", "APPEND", 2)
    yield sql, duckdb.connect()
    engine.close()
    session_module.SMALL_SCAN_VALUES = small


def _duck(sql: SqlExecutor, con: Any, table: str, query: str) -> list[tuple[Any, ...]]:
    rows = sql.execute(f"SELECT host, region, v, ts FROM {table}").table()
    con.register(table, rows)
    try:
        return [tuple(r) for r in con.execute(query.format(t=table)).fetchall()]
    finally:
        con.unregister(table)


def _ours(sql: SqlExecutor, table: str, query: str) -> tuple[list[tuple[Any, ...]], bool]:
    result = sql.execute(query.format(t=table))
    answer = result.table()
    got = list(zip(*(c.to_pylist() for c in answer.columns), strict=True))
    latest = any(s.stats.latest for s in result.scans)
    return got, latest


@pytest.mark.parametrize("query", LATEST)
def test_latest_row_queries_read_the_latest_rows_and_answer_as_duckdb(
    both: tuple[SqlExecutor, Any], query: str
) -> None:
    sql, con = both
    got, latest = _ours(sql, "ow", query)
    assert latest, "the query read every row"
    assert got == _duck(sql, con, "ow", query)
    # APPEND mode keeps duplicates of a key: the rule does not hold there.
    got, latest = _ours(sql, "ap", query)
    assert not latest
    assert sorted(got) == sorted(_duck(sql, con, "ap", query))


@pytest.mark.parametrize("query", REFUSED)
def test_other_joins_read_every_row(both: tuple[SqlExecutor, Any], query: str) -> None:
    sql, con = both
    got, latest = _ours(sql, "ow", query)
    assert not latest
    assert got == _duck(sql, con, "ow", query)


def test_after_deletes_the_answer_holds(tmp_path: Any) -> None:
    """A deleted newest row: the engine merges everything (the rows before it are the
    series' newest now), the query still asks for the latest rows."""
    engine = open_standalone(str(tmp_path / "db"), compaction_threads=0, gc_interval_s=0)
    try:
        sql = SqlExecutor(engine)
        _load(sql, "t", "OVERWRITE", 3)
        engine.delete_rows(
            "t",
            pa.table(
                {"host": ["h0"], "region": ["eu"], "ts": pa.array([39 * STEP], pa.timestamp("ms"))}
            ),
        )
        engine.flush("t")
        con = duckdb.connect()
        for query in LATEST:
            got, latest = _ours(sql, "t", query)
            assert not latest
            assert got == _duck(sql, con, "t", query)
    finally:
        engine.close()
