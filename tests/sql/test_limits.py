"""Bounds on what reaches DataFusion, long ORs as IN lists, names of literal SELECT items,
integer overflow in constant arithmetic, and error messages free of internal names."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gnomon.errors import InvalidArgument
from node.backends import open_standalone
from node.sql import session as session_module
from node.sql.executor import SqlExecutor
from node.sql.lexer import (
    MAX_EXPRESSION_DEPTH,
    MAX_NESTING,
    MAX_QUERY_CHARS,
    check_bounds,
    extent,
    tokenize,
)
from node.sql.rewrite import in_lists
from node.sql.session import translate

pytestmark = pytest.mark.unit

DDL = (
    "CREATE TABLE cpu (host string TAG, usage double, n bigint, ts timestamp NOT NULL, "
    "TIMESTAMP KEY(ts))"
)


@pytest.fixture
def sql(tmp_path: Path) -> Iterator[SqlExecutor]:
    engine = open_standalone(str(tmp_path / "db"))
    x = SqlExecutor(engine)
    x.execute(DDL)
    values = ", ".join(f"('h{i % 50}', {i}.5, {i}, {1000 + i})" for i in range(500))
    x.execute(f"INSERT INTO cpu (host, usage, n, ts) VALUES {values}")
    yield x
    engine.close()


def error(x: SqlExecutor, q: str) -> str:
    with pytest.raises(InvalidArgument) as e:
        x.execute(q)
    return e.value.message


# -- bounds -----------------------------------------------------------------------------------


def test_extent_counts_chains_nesting_and_operators() -> None:
    found = extent(tokenize("SELECT a + b * 2, f(c - 1) FROM t WHERE (x = 1 OR y = 2) AND z"))
    assert found.nesting == 1
    # The WHERE clause: AND at the top, and inside the parentheses a chain of three.
    assert found.depth == 4
    assert found.operators == 7


@pytest.mark.parametrize(
    ("query", "named"),
    [
        ("SELECT 1 WHERE " + " OR ".join(f"{i} = 1" for i in range(10_000)), "chains 19999"),
        ("SELECT " + ", ".join(f"{i} + 1 + 2 AS c{i}" for i in range(1100)), "MAX_OPERATORS"),
        ("SELECT " + " + ".join(["1"] * 20_000), "MAX_EXPRESSION_DEPTH"),
        ("SELECT " + " || ".join(["'a'"] * 20_000), "MAX_EXPRESSION_DEPTH"),
        ("SELECT 1 WHERE " + "(" * 5000 + "1 = 1" + ")" * 5000, "MAX_NESTING"),
    ],
)
def test_statements_beyond_a_bound_are_refused_naming_it(
    sql: SqlExecutor, query: str, named: str
) -> None:
    message = error(sql, query)
    assert named in message and "query too complex" in message


def test_nesting_in_where_on_a_table_is_a_clean_error(sql: SqlExecutor) -> None:
    # Once a RecursionError in the prescan's pass over the WHERE clause.
    deep = "(" * 5000 + "usage > 1" + ")" * 5000
    assert "parentheses nested 5000 deep" in error(sql, f"SELECT host FROM cpu WHERE {deep}")
    assert "MAX_NESTING" in error(sql, f"DELETE FROM cpu WHERE {deep}")
    assert sql.execute("SELECT count(*) AS n FROM cpu").table().to_pylist() == [{"n": 500}]


def test_bounds_admit_their_maximum() -> None:
    nested = "SELECT 1 WHERE " + "(" * MAX_NESTING + "1 = 1" + ")" * MAX_NESTING
    assert check_bounds(tokenize(nested)).nesting == MAX_NESTING
    chain = "SELECT " + " + ".join(["1"] * (MAX_EXPRESSION_DEPTH + 1))
    assert check_bounds(tokenize(chain)).depth == MAX_EXPRESSION_DEPTH
    with pytest.raises(InvalidArgument, match="MAX_EXPRESSION_DEPTH"):
        check_bounds(tokenize(chain + " + 1"))


def test_query_size_is_bounded(sql: SqlExecutor) -> None:
    long = "SELECT '" + "x" * MAX_QUERY_CHARS + "'"
    assert "MAX_QUERY_CHARS" in error(sql, long)


def test_deep_queries_run_on_big_stack_threads(sql: SqlExecutor) -> None:
    calls: list[int] = []
    real = session_module._DEEP.call

    def counted(fn):  # type: ignore[no-untyped-def]
        calls.append(1)
        return real(fn)

    session_module._DEEP.call = counted  # type: ignore[method-assign]
    try:
        deep = "SELECT " + " + ".join(["n"] * 200) + " AS s FROM cpu WHERE n = 2"
        assert sql.execute(deep).table().to_pylist() == [{"s": 400}]
        assert sql.execute("SELECT n + 1 AS s FROM cpu WHERE n = 2").table().to_pylist() == [
            {"s": 3}
        ]
    finally:
        del session_module._DEEP.call
    assert calls == [1]


# -- OR chains as IN lists --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        (
            "SELECT * FROM t WHERE host = 'a' OR host = 'b' OR host = 'it''s'",
            "SELECT * FROM t WHERE host IN ('a', 'b', 'it''s')",
        ),
        # AND binds tighter: the term next to it stays as written.
        (
            "SELECT 1 WHERE x AND a = 1 OR a = 2 OR a = -3 OR b = 1",
            "SELECT 1 WHERE x AND a = 1 OR a IN (2, -3) OR b = 1",
        ),
        (
            "SELECT * FROM t WHERE a <> 1 AND a != 2 AND t.a <> 3",
            "SELECT * FROM t WHERE a NOT IN (1, 2) AND t.a <> 3",
        ),
        ("SELECT * FROM t WHERE b BETWEEN 1 AND c <> 2 AND c <> 3", None),
        ("SELECT * FROM t WHERE a = 1 OR a = 'x'", None),
        ("SELECT * FROM t WHERE a = 1 OR a > 2", None),
    ],
)
def test_in_lists(query: str, expected: str | None) -> None:
    assert in_lists(query, tokenize(query)) == expected


def test_long_or_answers_as_the_chain_would(sql: SqlExecutor) -> None:
    hosts = " OR ".join(f"host = 'h{i}'" for i in range(0, 6000, 3))
    numbers = " OR ".join(f"n = {i}" for i in range(0, 12_000, 7))
    got = sql.execute(f"SELECT host, n FROM cpu WHERE ({hosts}) AND ({numbers}) ORDER BY n").table()
    expected = [
        {"host": f"h{i % 50}", "n": i} for i in range(500) if (i % 50) % 3 == 0 and i % 7 == 0
    ]
    assert got.to_pylist() == expected
    excluded = " AND ".join(f"n <> {i}" for i in range(2, 5000))
    assert sql.execute(f"SELECT n FROM cpu WHERE {excluded} ORDER BY n").table().to_pylist() == [
        {"n": 0},
        {"n": 1},
    ]


# -- names of literal SELECT items -------------------------------------------------------------


def test_literal_items_are_named_by_their_text(sql: SqlExecutor) -> None:
    got = sql.execute(
        "SELECT 1, 'a', 1 + 1, n * 2, count(1), 3 AS three, host FROM cpu "
        "WHERE n = 4 GROUP BY n, host"
    ).table()
    assert got.column_names == ["1", "'a'", "1 + 1", "n * 2", "count(1)", "three", "host"]
    assert got.to_pylist() == [
        {"1": 1, "'a'": "a", "1 + 1": 2, "n * 2": 8, "count(1)": 1, "three": 3, "host": "h4"}
    ]
    # Items that may carry an alias without AS keep DataFusion's name.
    assert sql.execute("SELECT 1 x, [1, 2] AS xs").table().column_names == ["x", "xs"]


# -- integer overflow -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "query",
    [
        "SELECT 9223372036854775807 + 1",
        "SELECT -9223372036854775807 - 2",
        "SELECT 4611686018427387904 * 2",
        "SELECT n FROM cpu WHERE n < abs(9223372036854775807 * 2)",
        "SELECT (9223372036854775807 + 1) * n FROM cpu",
    ],
)
def test_constant_integer_overflow_is_an_error(sql: SqlExecutor, query: str) -> None:
    assert "bigint out of range" in error(sql, query)


def test_constant_arithmetic_in_range_answers(sql: SqlExecutor) -> None:
    got = sql.execute("SELECT -9223372036854775807 - 1 AS lo, 3037000499 * 3037000499 AS sq")
    assert got.table().to_pylist() == [{"lo": -(2**63), "sq": 3037000499**2}]
    # The same shape with other literals is checked again.
    assert "bigint out of range" in error(sql, "SELECT -9223372036854775807 - 2 AS lo, 1 AS sq")


# -- error messages -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "absent"),
    [
        ("SELECT * FROM cpu WHERE ts > 'garbage'", "Optimizer rule"),
        ("SELECT CAST('x' AS bigint)", "simplify_expressions"),
        ("SELECT nope FROM cpu VERSION AS OF 1", "__travel_"),
        ("SELECT 1/0", "DataFusion error"),
    ],
)
def test_errors_carry_no_internal_names(sql: SqlExecutor, query: str, absent: str) -> None:
    message = error(sql, query)
    assert absent not in message
    assert "__" not in message and "Traceback" not in message


def test_translate_rephrases_internal_names() -> None:
    e = Exception(
        "DataFusion error: Optimizer rule 'simplify_expressions' failed\ncaused by\n"
        'Execution error: Traceback (most recent call last):\n  File "x.py", line 1\n'
        "ValueError: bad value in __scan_2 read from manifest_versions"
    )
    message = translate(e, {"__scan_2": "cpu"}).message
    assert message == "Execution error: ValueError: bad value in cpu read from the table manifest"
    nested = translate(Exception("SQL error: RecursionLimitExceeded (current limit: 50)"), {})
    assert "nested deeper" in nested.message
