"""InfluxQL translated to gnomon's SQL and answered as InfluxDB's JSON, on a real engine."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gnomon.errors import InvalidArgument
from node.backends import open_standalone
from node.sql import influxql
from node.sql.executor import SqlExecutor

pytestmark = pytest.mark.unit

MIN = 60_000


@pytest.fixture(scope="module")
def sql() -> Iterator[SqlExecutor]:
    with tempfile.TemporaryDirectory(prefix="gnomon-influxql-") as tmp:
        engine = open_standalone(
            str(Path(tmp) / "db"), wal_sync="never", compaction_threads=0, gc_interval_s=0
        )
        executor = SqlExecutor(engine)
        executor.execute(
            "CREATE TABLE h2o (time timestamp NOT NULL, location string TAG, "
            "kind string TAG, level double, n bigint, TIMESTAMP KEY(time))"
        )
        # Two series; coyote has rows at minutes 0, 6 and 7, santa at 0 and 11.
        executor.execute(
            "INSERT INTO h2o (time, location, kind, level, n) VALUES "
            f"(0, 'coyote', 'a', 8.0, 1), ({6 * MIN}, 'coyote', 'a', 6.0, 2), "
            f"({7 * MIN}, 'coyote', 'a', 7.0, 3), "
            f"(0, 'santa', 'b', 2.0, 4), ({11 * MIN}, 'santa', 'b', 3.0, 5)"
        )
        yield executor
        engine.close()


def ask(sql: SqlExecutor, q: str, epoch: str | None = "ms") -> dict[str, Any]:
    return influxql.answer(q, sql.execute, epoch=epoch)


def series(doc: dict[str, Any], statement: int = 0) -> list[dict[str, Any]]:
    result = doc["results"][statement]
    assert "error" not in result, result
    return list(result.get("series", []))


def test_raw_select_of_fields_and_tags(sql: SqlExecutor) -> None:
    doc = ask(sql, "SELECT \"level\", location FROM h2o WHERE location = 'santa'")
    assert series(doc) == [
        {
            "name": "h2o",
            "columns": ["time", "level", "location"],
            "values": [[0, 2.0, "santa"], [11 * MIN, 3.0, "santa"]],
        }
    ]


def test_star_is_tags_and_fields_sorted_without_tsid(sql: SqlExecutor) -> None:
    [s] = series(ask(sql, "SELECT * FROM h2o WHERE time >= 11m"))
    assert s["columns"] == ["time", "kind", "level", "location", "n"]
    assert s["values"] == [[11 * MIN, "b", 3.0, "santa", 5]]


def test_times_are_rfc3339_unless_epoch_asks(sql: SqlExecutor) -> None:
    [s] = series(ask(sql, "SELECT level FROM h2o WHERE time = 6m", epoch=None))
    assert s["values"] == [["1970-01-01T00:06:00Z", 6.0]]
    [s] = series(ask(sql, "SELECT level FROM h2o WHERE time = 6m", epoch="s"))
    assert s["values"] == [[360, 6.0]]
    with pytest.raises(InvalidArgument, match="epoch"):
        ask(sql, "SELECT level FROM h2o", epoch="fortnight")


def test_aggregates_grouped_by_tag_are_one_series_per_tag_value(sql: SqlExecutor) -> None:
    doc = ask(sql, "SELECT count(level), mean(level), max(n) AS top FROM h2o GROUP BY location")
    assert series(doc) == [
        {
            "name": "h2o",
            "tags": {"location": "coyote"},
            "columns": ["time", "count", "mean", "top"],
            "values": [[0, 3, 7.0, 3]],
        },
        {
            "name": "h2o",
            "tags": {"location": "santa"},
            "columns": ["time", "count", "mean", "top"],
            "values": [[0, 2, 2.5, 5]],
        },
    ]


def test_group_by_time_fills_empty_buckets(sql: SqlExecutor) -> None:
    q = "SELECT count(level) FROM h2o WHERE time < 20m GROUP BY location, time(5m)"
    coyote, santa = series(ask(sql, q))
    assert coyote["values"] == [[0, 1], [5 * MIN, 2], [10 * MIN, None], [15 * MIN, None]]
    assert santa["values"] == [[0, 1], [5 * MIN, None], [10 * MIN, 1], [15 * MIN, None]]
    coyote, _ = series(ask(sql, q + " fill(666)"))
    assert [v for _, v in coyote["values"]] == [1, 2, 666, 666]
    coyote, _ = series(ask(sql, q + " fill(none)"))
    assert [v for _, v in coyote["values"]] == [1, 2]
    coyote, _ = series(ask(sql, q + " fill(previous)"))
    assert [v for _, v in coyote["values"]] == [1, 2, 2, 2]


def test_fill_linear_and_time_offset(sql: SqlExecutor) -> None:
    q = (
        "SELECT max(level) FROM h2o WHERE location = 'santa' AND time >= 0ms "
        "AND time < 12m GROUP BY time(4m) fill(linear)"
    )
    [s] = series(ask(sql, q))
    assert s["values"] == [[0, 2.0], [4 * MIN, 2.5], [8 * MIN, 3.0]]
    [s] = series(ask(sql, "SELECT count(n) FROM h2o WHERE time < 8m GROUP BY time(5m, 1m)"))
    # Buckets start at minute 1 + 5k: [-4, 1) holds minute 0, [1, 6) nothing, [6, 11) two.
    assert s["values"] == [[-4 * MIN, 2], [MIN, None], [6 * MIN, 2]]


def test_order_by_time_desc_limit_and_offset_per_series(sql: SqlExecutor) -> None:
    doc = ask(sql, "SELECT level FROM h2o GROUP BY location ORDER BY time DESC LIMIT 1 OFFSET 1")
    assert [(s["tags"]["location"], s["values"]) for s in series(doc)] == [
        ("coyote", [[6 * MIN, 6.0]]),
        ("santa", [[0, 2.0]]),
    ]


def test_first_last_and_last_star(sql: SqlExecutor) -> None:
    q = "SELECT first(level), last(level), spread(level) FROM h2o WHERE location = 'coyote'"
    [s] = series(ask(sql, q))
    assert s["columns"] == ["time", "first", "last", "spread"]
    assert s["values"] == [[0, 8.0, 7.0, 2.0]]
    doc = ask(sql, "SELECT last(*) FROM h2o GROUP BY location")
    assert [(s["tags"]["location"], s["columns"], s["values"]) for s in series(doc)] == [
        ("coyote", ["time", "last_level", "last_n"], [[0, 7.0, 3]]),
        ("santa", ["time", "last_level", "last_n"], [[0, 3.0, 5]]),
    ]


def test_time_bounds_in_every_form(sql: SqlExecutor) -> None:
    forms = [
        "time >= 360000ms AND time <= 420000ms",
        f"time >= {6 * MIN * 1_000_000} AND time < {8 * MIN * 1_000_000}",
        "time >= '1970-01-01T00:06:00Z' AND time < '1970-01-01T00:08:00Z'",
        "time >= 6m AND time < now() - 1h",
    ]
    for where in forms:
        [s] = series(ask(sql, f"SELECT level FROM h2o WHERE {where} AND location = 'coyote'"))
        assert [v[0] for v in s["values"]] == [6 * MIN, 7 * MIN], where


def test_show_statements_and_several_statements(sql: SqlExecutor) -> None:
    doc = ask(sql, "SHOW MEASUREMENTS; SHOW TAG KEYS FROM h2o; SHOW FIELD KEYS FROM h2o")
    assert series(doc, 0) == [{"name": "measurements", "columns": ["name"], "values": [["h2o"]]}]
    assert series(doc, 1)[0]["values"] == [["kind"], ["location"]]
    assert series(doc, 2)[0]["values"] == [["level", "float"], ["n", "integer"]]
    assert [r["statement_id"] for r in doc["results"]] == [0, 1, 2]


def test_a_failing_statement_answers_its_error_and_the_others_run(sql: SqlExecutor) -> None:
    doc = ask(sql, "SELECT level FROM nowhere; SELECT count(level) FROM h2o")
    assert "nowhere" in doc["results"][0]["error"]
    assert series(doc, 1)[0]["values"] == [[0, 5]]
    doc = ask(sql, "SELECT count(colour) FROM h2o")
    assert "colour" in doc["results"][0]["error"]


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("SELECT level FROM h2o WHERE location =~ /coy/", "regular expressions"),
        ("SELECT derivative(level) FROM h2o", "derivative"),
        ("SELECT level FROM h2o GROUP BY time(5m)", "needs an aggregate"),
        ("SELECT count(level), level FROM h2o", "mixing"),
        ("DELETE FROM h2o", "expected SELECT or SHOW"),
        ("SELECT count(level) FROM h2o WHERE time < 30m GROUP BY time(1ms)", "buckets"),
        ("", "empty"),
    ],
)
def test_refusals_name_the_problem(sql: SqlExecutor, query: str, message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        doc = ask(sql, query)
        raise InvalidArgument(doc["results"][0].get("error", "no error"))


def test_time_bounds_beside_an_or_of_tags_still_bound_the_buckets(sql: SqlExecutor) -> None:
    q = (
        "SELECT count(level) FROM h2o WHERE (location = 'coyote' OR location = 'santa') "
        "AND time >= 10m AND time < 20m GROUP BY time(5m)"
    )
    [s] = series(ask(sql, q))
    assert s["values"] == [[10 * MIN, 1], [15 * MIN, None]]
    # Under an OR a time comparison bounds nothing: the buckets are those with rows.
    q = "SELECT count(level) FROM h2o WHERE time >= 10m OR location = 'coyote' GROUP BY time(5m)"
    [s] = series(ask(sql, q))
    assert s["values"] == [[0, 1], [5 * MIN, 2], [10 * MIN, 1]]
