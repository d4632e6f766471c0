"""Bucketed aggregations answered without DataFusion (node/sql/direct.py): which queries are
taken, and the same answers as DataFusion's on random data and queries."""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from node.engine.sst.reader import LocatedArrays
from node.sql import direct, fastpath, select
from node.sql.executor import SqlExecutor
from node.sql.lexer import tokenize
from node.sql.prescan import analyse
from node.sql.session import QueryContext
from testkit.sql import executor_over

pytestmark = pytest.mark.unit

DDL = (
    "CREATE TABLE m (host string TAG, v double, n int64, f float, ts timestamp NOT NULL, "
    "TIMESTAMP KEY(ts)) WITH (num_rows_per_row_group='64')"
)


@pytest.fixture
def sql(tmp_path: Path) -> Iterator[SqlExecutor]:
    rng = random.Random(7)
    rows = []
    for i in range(600):
        v = "NULL" if rng.random() < 0.1 else repr(round(rng.uniform(-50, 50), 3))
        n = "NULL" if rng.random() < 0.1 else str(rng.randint(-1000, 1000))
        ts = rng.randint(-3_600_000, 7_200_000)  # before and after the epoch
        host = "NULL" if i % 50 == 0 else f"'h{i % 7}'"
        rows.append(f"({host}, {v}, {n}, 1.5, {ts})")
    insert = "INSERT INTO m (host, v, n, f, ts) VALUES"
    fresh = "('h1', 3.5, 7, 1.5, 10)"
    with executor_over(tmp_path / "db", DDL, insert, rows, fresh) as ex:
        yield ex


def _plan(sql: SqlExecutor, query: str) -> fastpath.FastPath | None:
    tokens = tokenize(query)
    schema = sql.tables.engine.describe("m").schema
    p = analyse(tokens, "m", schema, mentions=1)
    return fastpath.plan(select.read(tokens), tokens, "m", schema, exact_where=p.exact)


def test_the_shape_taken(sql: SqlExecutor) -> None:
    p = _plan(
        sql,
        "SELECT date_bin(INTERVAL '5 minutes', ts) AS b, max(v) AS hi, count(*) AS k FROM m "
        "WHERE host IN ('h1', 'h2') AND ts >= 0 GROUP BY b ORDER BY b DESC LIMIT 3;",
    )
    assert isinstance(p, direct.BucketedAggregation)
    assert (p.stride_ms, p.bucket, p.descending, p.limit) == (300_000, "b", True, 3)
    assert p.outputs == (
        "__bucket",
        direct.Aggregate("max", "v", "hi"),
        direct.Aggregate("count", None, "k"),
    )


@pytest.mark.parametrize(
    "query",
    [
        # A WHERE term that bounds nothing, so the scan keeps more rows than the clause.
        "SELECT date_bin(interval '1 hour', ts) AS b, max(v) AS x FROM m WHERE v > n GROUP BY b",
        "SELECT date_bin(interval '1 hour', ts) AS b, max(v) FROM m GROUP BY b",  # no alias
        "SELECT date_bin(interval '1 month', ts) AS b, max(v) AS x FROM m GROUP BY b",
        "SELECT date_bin(interval '1 hour', ts) AS b, max(f) AS x FROM m GROUP BY b",  # float32
        "SELECT date_bin(interval '1 hour', ts) AS b, max(host) AS x FROM m GROUP BY b",
        "SELECT date_bin(interval '1 hour', ts) AS b, stddev(v) AS x FROM m GROUP BY b",
        "SELECT date_bin(interval '1 hour', ts) AS b, host, max(v) AS x FROM m GROUP BY b, host",
        "SELECT date_bin(interval '1 hour', ts) AS b, max(v) AS x FROM m GROUP BY b HAVING x > 1",
        "SELECT date_bin(interval '1 hour', ts) AS v, max(n) AS x FROM m GROUP BY v",  # a column
        "SELECT date_bin(interval '1 hour', ts) AS b, max(v) AS b FROM m GROUP BY b",
        "SELECT max(v) AS x FROM m",
        "SELECT date_bin(interval '1 hour', ts) AS b, max(v) AS x FROM m AS y z GROUP BY b",
        "SELECT date_bin(interval '1 hour', ts) AS b, max(v) AS x FROM m GROUP BY b "
        "LIMIT 1 OFFSET 1",
    ],
)
def test_other_shapes_go_to_datafusion(sql: SqlExecutor, query: str) -> None:
    assert _plan(sql, query) is None


def _without_fast_paths(sql: SqlExecutor, monkeypatch: pytest.MonkeyPatch) -> SqlExecutor:
    """An executor over the same engine that plans every query anew, with no fast path
    (``sql`` keeps each query shape's analysis, fast path included)."""
    monkeypatch.setattr(direct, "plan", lambda *a, **k: None)
    return SqlExecutor(sql.tables.engine)


def _answer(sql: SqlExecutor, query: str) -> list[dict[str, Any]]:
    return sql.execute(query).table().to_pylist()


def _same(got: list[dict[str, Any]], want: list[dict[str, Any]]) -> bool:
    if len(got) != len(want):
        return False
    for g, w in zip(got, want, strict=True):
        if g.keys() != w.keys():
            return False
        for k in g:
            a, b = g[k], w[k]
            if isinstance(a, float) and isinstance(b, float):
                if not (math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9) or a == b):
                    return False
            elif a != b:
                return False
    return True


def _random_query(rng: random.Random) -> str:
    interval = rng.choice(["30 seconds", "5 minutes", "1 hour", "2 hours", "1 day", "1 week"])
    aggs = rng.sample(
        ["max(v)", "min(v)", "sum(v)", "avg(v)", "count(v)", "max(n)", "min(n)", "sum(n)",
         "avg(n)", "count(n)", "count(*)"],
        rng.randint(1, 4),
    )  # fmt: skip
    select = ", ".join(f"{a} AS a{i}" for i, a in enumerate(aggs))
    where = rng.choice(
        [
            "",
            " WHERE host = 'h1'",
            " WHERE host IN ('h2', 'h5') AND ts >= -1800000",
            " WHERE ts BETWEEN 0 AND 3600000",
            " WHERE ts < to_timestamp_millis(100000) AND host > 'h3'",
            " WHERE host = 'nobody'",
        ]
    )
    order = rng.choice(["", " ORDER BY b", " ORDER BY b ASC", " ORDER BY b DESC"])
    limit = f" LIMIT {rng.randint(0, 5)}" if order and rng.random() < 0.4 else ""
    return (
        f"SELECT date_bin(interval '{interval}', ts) AS b, {select} FROM m{where} "
        f"GROUP BY b{order}{limit}"
    )


def test_answers_agree_with_datafusion(sql: SqlExecutor, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(11)
    queries = [_random_query(rng) for _ in range(60)]
    taken = [q for q in queries if _plan(sql, q) is not None]
    assert len(taken) == len(queries)
    direct_answers = [_answer(sql, q) for q in queries]
    datafusion = _without_fast_paths(sql, monkeypatch)
    for q, got in zip(queries, direct_answers, strict=True):
        want = _answer(datafusion, q)
        if "ORDER BY" not in q:
            got = sorted(got, key=lambda r: r["b"])
            want = sorted(want, key=lambda r: r["b"])
        assert _same(got, want), f"{q}\ndirect:     {got}\ndatafusion: {want}"


def test_types_match_datafusions(sql: SqlExecutor, monkeypatch: pytest.MonkeyPatch) -> None:
    q = (
        "SELECT date_bin(interval '1 hour', ts) AS b, max(v) AS a, sum(n) AS s, avg(n) AS m, "
        "count(*) AS k FROM m GROUP BY b ORDER BY b"
    )
    ours = sql.execute(q).table().schema
    theirs = _without_fast_paths(sql, monkeypatch).execute(q).table().schema
    assert [(f.name, f.type) for f in ours] == [(f.name, f.type) for f in theirs]


def test_nan_under_max_and_min_as_datafusion(
    sql: SqlExecutor, monkeypatch: pytest.MonkeyPatch
) -> None:
    nan = float("nan")
    sql.tables.engine.write(
        "m",
        pa.table(
            {
                "host": ["h9"] * 4,
                "v": [nan, 2.0, nan, nan],
                "n": pa.array([1] * 4, pa.int64()),
                "f": pa.array([1.5] * 4, pa.float32()),
                "ts": pa.array([20, 30, 4_000_000, 4_000_001], pa.timestamp("ms")),
            }
        ),
    )
    q = (
        "SELECT date_bin(interval '1 hour', ts) AS b, max(v) AS hi, min(v) AS lo FROM m "
        "WHERE host = 'h9' GROUP BY b ORDER BY b"
    )
    ours = [repr(r) for r in _answer(sql, q)]
    assert ours == [repr(r) for r in _answer(_without_fast_paths(sql, monkeypatch), q)]
    assert "nan" in ours[1] and "2.0" in ours[0]


def test_sorted_rows_shape(sql: SqlExecutor) -> None:
    p = _plan(
        sql, "SELECT host, ts, v FROM m WHERE host = 'h1' ORDER BY host DESC, ts DESC LIMIT 4"
    )
    desc = direct.SortKey("host", True, True), direct.SortKey("ts", True, True)
    assert p == direct.SortedRows(("host", "ts", "v"), desc, 4)
    p = _plan(sql, "SELECT n FROM m ORDER BY n NULLS FIRST, ts DESC NULLS LAST")
    keys = direct.SortKey("n", False, True), direct.SortKey("ts", True, False)
    assert p == direct.SortedRows(("n",), keys, None)
    p = _plan(sql, "SELECT m.v FROM m")
    assert p == direct.SortedRows(("v",), (), None)


@pytest.mark.parametrize(
    "query",
    [
        "SELECT host, ts FROM m ORDER BY v",  # a float key
        "SELECT host, ts FROM m ORDER BY host NULLS",
        "SELECT host AS h FROM m ORDER BY host",
        "SELECT host, host FROM m",
        "SELECT * FROM m ORDER BY ts",
        "SELECT host, ts + 1 FROM m ORDER BY ts",
        "SELECT DISTINCT host FROM m ORDER BY host",
        "SELECT host FROM m ORDER BY 1",
        "SELECT host FROM m WHERE v > n ORDER BY host",
        "SELECT host FROM m ORDER BY host LIMIT 2 OFFSET 1",
    ],
)
def test_other_row_shapes_go_to_datafusion(sql: SqlExecutor, query: str) -> None:
    assert _plan(sql, query) is None


def _random_sorted_query(rng: random.Random) -> tuple[str, list[str]]:
    columns = rng.sample(["host", "v", "n", "f", "ts"], rng.randint(1, 5))
    keys = rng.sample(["host", "n", "ts"], rng.randint(0, 3))
    directions = ["", " ASC", " DESC", " ASC NULLS FIRST", " DESC NULLS LAST", " NULLS LAST"]
    where = rng.choice(
        ["", " WHERE host = 'h1'", " WHERE host IN ('h2', 'h5') AND ts >= -1800000",
         " WHERE ts BETWEEN 0 AND 3600000", " WHERE n > 10 AND host >= 'h3'"]
    )  # fmt: skip
    order = f" ORDER BY {', '.join(k + rng.choice(directions) for k in keys)}" if keys else ""
    limit = f" LIMIT {rng.randint(0, 30)}" if keys and rng.random() < 0.4 else ""
    return f"SELECT {', '.join(columns)} FROM m{where}{order}{limit}", keys


def test_sorted_rows_agree_with_datafusion(
    sql: SqlExecutor, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(5)
    queries = [_random_sorted_query(rng) for _ in range(100)]
    assert all(_plan(sql, q) is not None for q, _ in queries)
    ours = [sql.execute(q).table() for q, _ in queries]
    datafusion = _without_fast_paths(sql, monkeypatch)
    for (q, keys), got in zip(queries, ours, strict=True):
        want = datafusion.execute(q).table()
        assert got.schema == want.schema, q
        # Rows equal in their keys may come in any order: the keys must come in the same
        # order, and without a LIMIT the same rows.
        key_rows = [k for k in keys if k in got.column_names]
        assert got.select(key_rows).to_pylist() == want.select(key_rows).to_pylist(), q
        if "LIMIT" not in q:
            assert sorted(map(repr, got.to_pylist())) == sorted(map(repr, want.to_pylist())), q


def test_taken_queries_skip_datafusion(sql: SqlExecutor, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_datafusion(*_: object, **__: object) -> pa.Table:
        raise AssertionError("DataFusion ran")

    monkeypatch.setattr(QueryContext, "collect", no_datafusion)
    got = _answer(
        sql,
        "SELECT date_bin(interval '1 hour', ts) AS b, count(*) AS k FROM m WHERE host = 'h1' "
        "AND ts >= 0 AND ts < 3600000 GROUP BY b",
    )
    assert got and all(r["k"] > 0 for r in got)


def test_dictionary_sort_keys_sort_as_their_values() -> None:
    # Chunks with dictionaries of their own, null rows, a null dictionary value, ties.
    chunks = [
        pa.DictionaryArray.from_arrays(pa.array([0, 1, None, 2, 1], pa.int32()), ["b", "a", None]),
        pa.DictionaryArray.from_arrays(pa.array([1, 0, 0], pa.int32()), ["c", "a"]),
    ]
    values = pa.chunked_array(chunks)
    decoded = values.cast(pa.string())
    for order in ("ascending", "descending"):
        for nulls in ("at_start", "at_end"):
            keys: Any = [("k", order, nulls)]
            want = pc.sort_indices(pa.table({"k": decoded}), options=pc.SortOptions(keys))
            got = pc.sort_indices(
                pa.table({"k": direct.sort_key(values)}), options=pc.SortOptions(keys)
            )
            assert decoded.take(got).to_pylist() == decoded.take(want).to_pylist()
    empty = pa.chunked_array([], pa.dictionary(pa.int32(), pa.string()))
    assert direct.sort_key(empty).type == pa.string()


def test_rows_in_bucket_order_or_not_give_one_answer(sql: SqlExecutor) -> None:
    p = _plan(
        sql,
        "SELECT date_bin(interval '1 hour', ts) AS b, max(v) AS hi, sum(n) AS s, avg(v) AS m, "
        "count(n) AS c, count(*) AS k FROM m GROUP BY b ORDER BY b",
    )
    assert isinstance(p, direct.BucketedAggregation)
    ts = pa.array([0, 10, 3_600_000, 3_600_001, 7_200_000, 7_200_005], pa.timestamp("ms"))
    rows = pa.table(
        {
            "ts": ts,
            "v": [1.0, None, float("nan"), 4.0, None, None],
            "n": pa.array([1, 2, None, 4, 5, None], pa.int64()),
        }
    )
    in_order = direct.run(p, rows)
    shuffled = direct.run(p, rows.take([5, 2, 0, 4, 3, 1]))
    assert repr(in_order.to_pylist()) == repr(shuffled.to_pylist())
    assert in_order.column("k").to_pylist() == [2, 2, 2]
    assert in_order.column("hi").to_pylist()[::2] == [1.0, None]
    assert in_order.column("c").to_pylist() == [2, 1, 1]


@pytest.fixture
def settled(tmp_path: Path) -> Iterator[SqlExecutor]:
    """Null-free readings of 16 hosts over three hours, each hour flushed to a file of its
    own, a row group holding at most three hosts: point queries read them located."""
    rng = random.Random(3)
    rows = [
        f"('h{i % 16}', {rng.uniform(-50, 50)!r}, {rng.randint(-1000, 1000)}, 1.5, "
        f"{hour * 3_600_000 + i * 5_000})"
        for hour in range(3)
        for i in range(700)
    ]
    insert = "INSERT INTO m (host, v, n, f, ts) VALUES"
    with executor_over(tmp_path / "db", DDL, insert, rows[:1400], rows[1400]) as ex:
        ex.execute(f"{insert} {', '.join(rows[1401:])}")
        ex.tables.engine.flush()
        yield ex


def test_located_reads_aggregate_as_read_with_datafusions_answers(
    settled: SqlExecutor, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(13)
    aggs = ["max(v)", "min(v)", "sum(v)", "avg(v)", "count(v)", "max(n)", "min(n)", "sum(n)",
            "avg(n)", "count(n)", "count(*)"]  # fmt: skip
    queries = []
    for _ in range(40):
        select = ", ".join(f"{a} AS a{i}" for i, a in enumerate(rng.sample(aggs, 3)))
        # A few hosts, or every one: a row group's runs then lie side by side (read as one
        # slice, several series in it, none of them in time order with the others).
        wanted = rng.sample(range(17), rng.randint(1, 3)) if rng.random() < 0.7 else range(16)
        hosts = ", ".join(f"'h{h}'" for h in wanted)
        lo = rng.randint(-1, 10) * 1_200_000
        interval = rng.choice(["1 minute", "5 minutes", "1 hour"])
        queries.append(
            f"SELECT date_bin(interval '{interval}', ts) AS b, {select} FROM m WHERE host IN "
            f"({hosts}) AND ts >= {lo} AND ts < {lo + rng.randint(1, 4) * 1_800_000} "
            f"GROUP BY b ORDER BY b"
        )
    taken: list[direct.BucketedAggregation] = []
    aggregate = direct.aggregate

    def counted(agg: direct.BucketedAggregation, arrays: LocatedArrays) -> pa.Table:
        taken.append(agg)
        return aggregate(agg, arrays)

    monkeypatch.setattr(direct, "aggregate", counted)
    answers = [_answer(settled, q) for q in queries]
    # Every query is a located read (those reading no row go by the table, empty).
    assert len(taken) == sum(1 for a in answers if a) > 20
    datafusion = _without_fast_paths(settled, monkeypatch)
    for q, got in zip(queries, answers, strict=True):
        want = _answer(datafusion, q)
        assert _same(got, want), f"{q}\ndirect:     {got}\ndatafusion: {want}"


def test_series_side_by_side_in_a_row_group_aggregate_by_bucket(tmp_path: Path) -> None:
    """Eight series over the same hour in one row group, all asked for: their runs lie side
    by side, one slice, which is no time order; the buckets are DataFusion's, one each."""
    ddl = "CREATE TABLE s (host string TAG, v double, ts timestamp NOT NULL, TIMESTAMP KEY(ts))"
    insert = "INSERT INTO s (host, v, ts) VALUES"
    rows = [f"('h{h}', {h * 100 + i}.0, {i * 10_000})" for h in range(8) for i in range(360)]
    hosts = ", ".join(f"'h{h}'" for h in range(8))
    query = (
        "SELECT date_bin(interval '5 minutes', ts) AS b, max(v) AS hi, min(v) AS lo FROM s "
        f"WHERE host IN ({hosts}) AND ts >= 0 AND ts < 3600000 GROUP BY b ORDER BY b"
    )
    # The row left fresh is flushed to a file of its own, after the hour asked for.
    with executor_over(tmp_path / "db", ddl, insert, rows, "('h1', 1.0, 7200000)") as ex:
        ex.tables.engine.flush()
        taken: list[LocatedArrays] = []
        aggregate = direct.aggregate

        def counted(agg: direct.BucketedAggregation, arrays: LocatedArrays) -> pa.Table:
            taken.append(arrays)
            return aggregate(agg, arrays)

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(direct, "aggregate", counted)
            got = _answer(ex, query)
        assert len(taken) == 1 and not taken[0].in_run_order
        assert [r["hi"] for r in got] == [700.0 + 30 * k + 29 for k in range(12)]
        assert [r["lo"] for r in got] == [30.0 * k for k in range(12)]
