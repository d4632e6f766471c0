"""A query's analysis kept per shape (node/sql/analysis.py): a query of a shape seen before
binds the kept analysis to its own literals and gets what analysing it afresh gives, and
the analysis is found again when the tables change."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gnomon.errors import InvalidArgument
from node.engine.engine import Engine
from node.sql import direct, fastpath, prescan, select
from node.sql.analysis import Analyses, Analysis, analyse
from node.sql.executor import SqlExecutor
from node.sql.lexer import tokenize
from testkit.sql import executor_over

pytestmark = pytest.mark.unit

DDL = (
    "CREATE TABLE m (host string TAG, v double, n int8, ts timestamp NOT NULL, "
    "TIMESTAMP KEY(ts)) WITH (num_rows_per_row_group='64')"
)


@pytest.fixture
def sql(tmp_path: Path) -> Iterator[SqlExecutor]:
    rng = random.Random(3)
    rows = [
        f"('h{i % 5}', {rng.uniform(-10, 10):.3f}, {rng.randint(-100, 100)}, {i * 7_000})"
        for i in range(500)
    ]
    insert = "INSERT INTO m (host, v, n, ts) VALUES"
    with executor_over(tmp_path / "db", DDL, insert, rows, "('h1', 0.5, 3, 3500000)") as ex:
        yield ex


def _of(kept: Analyses, query: str, engine: Engine) -> Analysis:
    return kept.of(query, tokenize(query), engine)


Literals = Callable[[random.Random], dict[str, str]]


def _literals(rng: random.Random) -> dict[str, str]:
    # Literals of several lengths: a kept analysis's token positions are not the query's.
    hosts = [f"'h{rng.randint(0, 12)}'" for _ in range(2)]  # as many in every query
    lo = rng.randint(0, 10 ** rng.randint(1, 6))
    return {
        "host": hosts[0],
        "hosts": ", ".join(hosts),
        "lo": str(lo),
        "hi": str(lo + rng.randint(0, 900_000)),
        "neg": str(rng.randint(1, 50)),
        "v": rng.choice(["1.5", "0.25", "7.25", "3.0"]),
        "n": str(rng.choice([5, 50, 127, 128, 300])),  # over 127: no int8, bounds nothing
        "k": str(rng.randint(0, 20)),
        "unit": rng.choice(["second", "minute", "hour", "day"]),
        "every": str(rng.randint(1, 30)),
    }


# Query shapes with {slots} for literals: those the engine bounds, the two it answers
# itself, and those left to DataFusion.
SHAPES = [
    "SELECT date_bin(INTERVAL '{every} {unit}s', ts) AS b, max(v) AS hi, count(*) AS c "
    "FROM m WHERE host IN ({hosts}) AND ts >= {lo} AND ts < to_timestamp_millis({hi}) "
    "GROUP BY b ORDER BY b DESC LIMIT {k}",
    "SELECT date_bin(INTERVAL '{every} {unit}', ts) AS b, avg(v) AS a FROM m "
    "WHERE host = {host} AND n < {n} GROUP BY b",
    "SELECT host, v, ts FROM m WHERE ts BETWEEN {lo} AND {hi} AND v > {v} "
    "ORDER BY host, ts DESC LIMIT {k}",
    "SELECT host, ts FROM m WHERE ts IN ({lo}, -{neg}, {hi}) OR {lo} < ts ORDER BY ts",
    "SELECT host, max(v) AS hi FROM m WHERE {lo} <= ts AND ts <= {hi} AND n >= -{neg} "
    "GROUP BY host ORDER BY host",
    "SELECT count(*) AS c FROM m WHERE ts NOT BETWEEN -{neg} AND {hi} AND host <> {host}",
    "SELECT a.host, count(*) AS c FROM m AS a JOIN m AS b ON a.ts = b.ts "
    "WHERE a.ts > {lo} AND b.v < {v} GROUP BY a.host ORDER BY a.host",
    "SELECT host, v FROM m VERSION AS OF {n} WHERE ts < {hi} ORDER BY host, v",
]


def _pairs(seed: int) -> Iterator[tuple[str, str]]:
    """Two queries of each shape, with random literals."""
    rng = random.Random(seed)
    for shape in SHAPES:
        for _ in range(6):
            yield shape.format(**_literals(rng)), shape.format(**_literals(rng))


def test_a_query_of_a_kept_shape_gets_what_a_fresh_analysis_gives(sql: SqlExecutor) -> None:
    engine = sql.tables.engine
    schema = engine.describe("m").schema
    checked = {"prescan": 0, "direct": 0, "rewritten": 0}
    for first, second in _pairs(1):
        kept = Analyses()
        found = _of(kept, first, engine)
        hit = kept.bound(second, engine)  # the same shape: no new analysis, no tokenizing
        assert hit is not None and hit[0] is found
        tokens = tokenize(second)
        assert [(t.kind, t.text) for t in hit[1]] == [(t.kind, t.text) for t in tokens]
        fresh = analyse(tokens, engine, second)
        assert (found.plain, found.travel, found.timestamps) == (
            fresh.plain,
            fresh.travel,
            fresh.timestamps,
        )
        rewritten = found.rewrite(second, tokens)
        assert rewritten == fresh.rewrite(second, tokens)
        checked["rewritten"] += rewritten != second
        if fresh.prescan is None:
            assert found.prescan is None
            continue
        assert found.prescan is not None
        bound = found.prescan.bind(hit[1])
        expected = prescan.analyse(tokens, "m", schema, mentions=len(fresh.plain))
        assert bound == expected
        checked["prescan"] += bool(bound.bounds)
        planned = fastpath.plan(
            select.read(tokens), tokens, "m", schema, exact_where=expected.exact
        )
        got = found.fast.bind(hit[1]) if bound.exact and found.fast is not None else None
        assert got == planned, (first, second)
        if planned is not None:
            assert isinstance(got, direct.Direct) and isinstance(planned, direct.Direct)
            assert got.limit == planned.limit
            checked["direct"] += 1
    # The shapes above exercise every part.
    assert all(n >= 5 for n in checked.values()), checked


def test_answers_after_a_kept_shape_match_a_fresh_executor(sql: SqlExecutor) -> None:
    fresh = SqlExecutor(sql.tables.engine)
    for first, second in _pairs(2):
        if "VERSION AS OF" in first:
            continue  # versions of another table's history
        sql.execute(first)
        got = sql.execute(second).table()
        assert got.equals(SqlExecutor(sql.tables.engine).execute(second).table()), second
        assert got.equals(fresh.execute(second).table()), second


def test_literals_of_another_kind_are_another_shape(sql: SqlExecutor) -> None:
    kept = Analyses()
    by_string = _of(kept, "SELECT v FROM m WHERE host = 'h1'", sql.tables.engine)
    by_number = _of(kept, "SELECT v FROM m WHERE host = 1", sql.tables.engine)
    assert by_number is not by_string
    whole = _of(kept, "SELECT v FROM m WHERE ts > 5", sql.tables.engine)
    assert _of(kept, "SELECT v FROM m WHERE ts > 5.5", sql.tables.engine) is not whole
    fractional = _of(kept, "SELECT v FROM m WHERE ts > 5.5", sql.tables.engine)
    assert whole.timestamps and not fractional.timestamps


def test_tables_changing_find_the_analysis_again(sql: SqlExecutor) -> None:
    kept = Analyses()
    query = "SELECT * FROM m, x WHERE m.ts > 10 AND x.at > 20"
    tokens = tokenize(query)
    before = _of(kept, query, sql.tables.engine)
    assert before.plain == ("m", "m") and before.rewrite(query, tokens).count("to_timestamp") == 1
    sql.execute("CREATE TABLE x (at timestamp NOT NULL, TIMESTAMP KEY(at))")
    after = _of(kept, query, sql.tables.engine)
    assert after is not before
    assert (
        after.plain == ("m", "x", "m", "x")
        and after.rewrite(query, tokens).count("to_timestamp") == 2
    )
    assert _of(kept, query, sql.tables.engine) is after
    sql.execute("ALTER TABLE x ADD COLUMN (w double)")
    assert _of(kept, query, sql.tables.engine) is not after


def test_a_schema_changed_under_a_kept_shape_is_read_as_it_is_now(sql: SqlExecutor) -> None:
    query = "SELECT v, n FROM m WHERE host = '{}' ORDER BY ts LIMIT 3"
    assert sql.execute(query.format("h1")).table().num_rows == 3
    sql.execute("DROP TABLE m")
    sql.execute(
        "CREATE TABLE m (host string TAG, v string, ts timestamp NOT NULL, TIMESTAMP KEY(ts))"
    )
    sql.execute("INSERT INTO m (host, v, ts) VALUES ('h2', 'a', 1)")
    with pytest.raises(InvalidArgument, match="No field named n"):
        sql.execute(query.format("h2"))
    answer = sql.execute("SELECT v FROM m WHERE host = 'h2' ORDER BY ts LIMIT 3").table()
    assert answer.column("v").to_pylist() == ["a"]


def test_a_bad_time_travel_literal_fails_every_time(sql: SqlExecutor) -> None:
    for _ in range(2):
        with pytest.raises(InvalidArgument, match="TIMESTAMP AS OF takes"):
            sql.execute("SELECT * FROM m TIMESTAMP AS OF 'not a time'")
        with pytest.raises(InvalidArgument, match="VERSION AS OF takes"):
            sql.execute("SELECT * FROM m VERSION AS OF 1.5")


def test_rewrite_for_datafusion(sql: SqlExecutor) -> None:
    query = (
        "SELECT * FROM m VERSION AS OF 1 WHERE ts IN ({}, -{}) AND -{} < ts "
        "AND ts BETWEEN - {} AND {} AND n > 3 AND ts > 1.5"
    )
    expected = (
        'SELECT * FROM "__travel_1" AS "m" WHERE ts IN (to_timestamp_millis({}), '
        "to_timestamp_millis(-{})) AND to_timestamp_millis(-{}) < ts AND ts BETWEEN "
        "to_timestamp_millis(-{}) AND to_timestamp_millis({}) AND n > 3 AND ts > 1.5"
    )
    kept = Analyses()
    for values in ((5, 6, 7, 8, 9), (50, 600, 7000, 80000, 900000), (1, 2, 3, 4, 5)):
        text = query.format(*values)
        tokens = tokenize(text)
        assert _of(kept, text, sql.tables.engine).rewrite(text, tokens) == expected.format(*values)
