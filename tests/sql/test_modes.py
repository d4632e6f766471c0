"""How a query's tables reach DataFusion, decided before it runs (node/sql/modes.py): each
case that once ran a query again after matching DataFusion's error text answers the first
time, its tables streamed (the datasets DataFusion pushes filters into) and read up front."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import datafusion
import pyarrow as pa
import pyarrow.dataset as ds
import pytest

from gnomon.errors import InvalidArgument
from node.backends import open_standalone
from node.engine.schema import Column, ColumnType, Schema
from node.sql import modes, session
from node.sql.executor import SqlExecutor
from node.sql.lexer import tokenize

pytestmark = pytest.mark.unit

DDL = (
    "CREATE TABLE m (host string TAG, region string TAG, v double, n bigint, "
    "ts timestamp NOT NULL, TIMESTAMP KEY(ts))"
)
SCHEMA = Schema.build(
    [
        Column("host", ColumnType.STRING, is_tag=True),
        Column("v", ColumnType.DOUBLE),
        Column("n", ColumnType.INT64),
        Column("ts", ColumnType.TIMESTAMP, nullable=False),
    ],
    timestamp_key="ts",
)
ROWS = (
    "INSERT INTO m (host, region, v, n, ts) VALUES ('a', 'eu', 1.0, 1, 1000), "
    "('b', 'eu', 2.0, 2, 2000), ('a', 'us', 3.0, 3, 3000)"
)


@pytest.fixture(params=["read-up-front", "streamed"])
def sql(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[SqlExecutor]:
    if request.param == "streamed":
        monkeypatch.setattr(session, "SMALL_SCAN_VALUES", 0)
    engine = open_standalone(str(tmp_path / "db"))
    x = SqlExecutor(engine)
    x.execute(DDL)
    x.execute(ROWS)
    yield x
    engine.close()


def _rows(sql: SqlExecutor, query: str) -> list[dict[str, object]]:
    return sql.execute(query).table().to_pylist()


@pytest.mark.parametrize(
    "where",
    [
        "host = 'a' AND host = 'b'",
        "(host = 'a' AND host = 'b') AND region = 'eu'",
        "host IN ('a') AND host IN ('b')",
        "n = 1 AND (n = 2)",
        "n + 1 = 2 AND n + 1 = 3",
    ],
)
def test_a_filter_simplified_to_false_answers_nothing(sql: SqlExecutor, where: str) -> None:
    assert _rows(sql, f"SELECT host FROM m WHERE {where}") == []
    assert _rows(sql, f"SELECT count(*) AS k FROM m WHERE {where}") == [{"k": 0}]


def test_equalities_that_do_not_contradict_keep_their_rows(sql: SqlExecutor) -> None:
    got = _rows(sql, "SELECT n FROM m WHERE host = 'a' OR host = 'b' ORDER BY n")
    assert got == [{"n": 1}, {"n": 2}, {"n": 3}]
    assert _rows(sql, "SELECT n FROM m WHERE host = 'a' AND host = 'a' ORDER BY n") == [
        {"n": 1},
        {"n": 3},
    ]


def test_approx_distinct_of_a_tag(sql: SqlExecutor) -> None:
    got = _rows(sql, "SELECT approx_distinct(host) AS h, count(DISTINCT region) AS r FROM m")
    assert got == [{"h": 2, "r": 2}]


def test_a_numeric_function_of_a_tag_names_its_declared_type(sql: SqlExecutor) -> None:
    with pytest.raises(InvalidArgument) as e:
        sql.execute("SELECT sum(host) FROM m")
    assert "Dictionary" not in e.value.message and "String" in e.value.message


def test_plain_tags_only_where_a_tag_meets_a_function_without_a_dictionary_kernel() -> None:
    def plain(query: str) -> bool:
        return modes.plain_tags(tokenize(query), [("m", SCHEMA)])

    assert plain("SELECT approx_distinct(host) FROM m")
    assert plain("SELECT avg(length(m.host)) FROM m")
    assert not plain("SELECT avg(v), max(host) FROM m GROUP BY host")
    assert not plain("SELECT approx_distinct(n) FROM m")


def test_equates_twice_finds_the_shapes_datafusion_simplifies() -> None:
    def twice(where: str) -> bool:
        return modes.equates_twice(tokenize(f"SELECT * FROM m WHERE {where}"))

    assert twice("host = 'a' AND host = 'b'")
    assert twice("'a' = host AND host IN ('b')")
    assert twice("n + 1 = 2 AND n + 1 = 3")
    assert not twice("host = 'a' AND n = 1")
    assert not twice("host IN ('a', 'b') AND n > 1")


def test_literal_scan_filter_is_read_off_the_optimized_plan() -> None:
    ctx = datafusion.SessionContext()
    ctx.register_dataset("x", ds.dataset(pa.table({"host": ["a"], "v": [1.0]})))

    def literal(where: str) -> bool:
        plan = ctx.sql(f"SELECT v FROM x WHERE {where}").optimized_logical_plan()
        return modes.literal_scan_filter(plan)

    assert literal("host = 'a' AND host = 'b'")
    assert not literal("host = 'a' OR host = 'b'")
