"""PostgreSQL's forms in a query as DataFusion reads them (node/server/pgwire/dialect.py):
each rule on its own, what it must leave alone, and the constant subquery run once."""

from __future__ import annotations

import pyarrow as pa
import pytest

from node.server.pgwire import dialect

pytestmark = pytest.mark.unit


class Recorder:
    """Answers every constant subquery with ``values``, keeping what it was asked."""

    def __init__(self, *values: object) -> None:
        self.values = list(values)
        self.asked: list[str] = []

    def __call__(self, sql: str) -> pa.Table:
        self.asked.append(sql.strip())
        return pa.table({"v": self.values})


def translate(sql: str, query: Recorder | None = None) -> str:
    return dialect.translate(sql, "ann", query or Recorder())


def test_the_session_user_keywords_are_the_users_name() -> None:
    assert translate("SELECT user, current_user AS u, session_user") == (
        "SELECT 'ann', 'ann' AS u, 'ann'"
    )
    # A column of that name, a quoted name and a function call are no keyword.
    assert translate('SELECT t.user, "user", user(1) FROM t') == (
        'SELECT t.user, "user", user(1) FROM t'
    )
    assert dialect.translate("SELECT user", "o'brien", Recorder()) == "SELECT 'o''brien'"


def test_a_function_in_from_names_its_column_after_its_alias() -> None:
    assert translate("SELECT i FROM generate_series(1, 3) AS i") == (
        "SELECT i FROM generate_series(1, 3) AS i(i)"
    )
    assert translate("SELECT s[1] FROM t, string_to_array('a,b', ',') s") == (
        "SELECT s[1] FROM t, (SELECT string_to_array('a,b', ',')) AS s(s)"
    )
    for unchanged in (
        "SELECT x FROM generate_series(1, 3) AS g(x)",  # its columns named already
        "SELECT * FROM generate_series(1, 3) WHERE value > 1",  # no alias
        "SELECT * FROM cpu AS c JOIN disk d ON c.host = d.host",  # tables
        "SELECT f(x) AS y FROM cpu",  # a function outside FROM
    ):
        assert translate(unchanged) == unchanged


def test_a_constant_in_subquery_runs_once_and_is_written_in() -> None:
    asked = Recorder("public", "o'x")
    sql = (
        "SELECT a FROM t WHERE s IN (SELECT trim(p[i]) FROM generate_series(1, 2) AS i, "
        "string_to_array('public', ',') p) ORDER BY 1"
    )
    assert translate(sql, asked) == "SELECT a FROM t WHERE s IN ('public', 'o''x') ORDER BY 1"
    assert asked.asked == [
        "SELECT trim(p[i]) FROM generate_series(1, 2) AS i(i), "
        "(SELECT string_to_array('public', ',')) AS p(p)"
    ]


def test_a_subquery_reading_a_table_or_an_outer_column_is_left_alone() -> None:
    asked = Recorder(1)
    for sql in (
        "SELECT a FROM t WHERE a IN (SELECT b FROM u)",
        "SELECT a FROM t WHERE a IN (SELECT t.b FROM generate_series(1, 2) AS i)",
        "SELECT a FROM t WHERE a IN (SELECT b + i FROM generate_series(1, 2) AS i)",
    ):
        assert "IN (SELECT" in translate(sql, asked)
    assert asked.asked == []


def test_an_empty_or_large_constant_subquery_is_left_to_the_engine() -> None:
    sql = "SELECT 1 WHERE 2 IN (SELECT i FROM generate_series(1, 2) AS i)"
    assert "IN (SELECT" in translate(sql, Recorder())
    too_many = Recorder(*range(dialect.MAX_CONSTANTS + 1))
    assert "IN (SELECT" in translate(sql, too_many)


def test_statements_other_than_queries_are_not_read() -> None:
    for sql in (
        "CREATE TABLE t (user string TAG, ts timestamp NOT NULL, TIMESTAMP KEY(ts))",
        "INSERT INTO t (user) VALUES ('x')",
        "SHOW TABLES",
        "SELECT 'unterminated",
    ):
        assert translate(sql) == sql


def test_catalog_functions_and_relation_oids() -> None:
    assert translate(
        "SELECT pg_catalog.pg_get_expr(d.adbin, d.adrelid), c.relname FROM pg_catalog.pg_class c "
        "JOIN pg_catalog.pg_description d ON d.classoid = 'pg_class'::regclass "
        "AND d.objsubid = 'pg_catalog.pg_attribute'::regclass"
    ) == (
        "SELECT pg_get_expr(d.adbin, d.adrelid), c.relname FROM pg_catalog.pg_class c "
        "JOIN pg_catalog.pg_description d ON d.classoid = 1259 AND d.objsubid = 1249"
    )
    # A relation gnomon's catalog does not hold is left to the engine, which names it.
    assert translate("SELECT 'pg_proc'::regclass") == "SELECT 'pg_proc'::regclass"
