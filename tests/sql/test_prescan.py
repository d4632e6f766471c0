"""What a single-table query tells the engine before DataFusion runs it (node/sql/prescan.py),
and the executor using it: same answers, fewer row groups read."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import node.sql.session as session_module
from node.backends import open_standalone
from node.engine.bounds import Range
from node.engine.schema import Column, ColumnType, Schema
from node.sql.executor import SqlExecutor
from node.sql.lexer import tokenize
from node.sql.prescan import Prescan, analyse

pytestmark = pytest.mark.unit

SCHEMA = Schema.build(
    [
        Column("host", ColumnType.STRING, is_tag=True),
        Column("usage", ColumnType.DOUBLE),
        Column("n", ColumnType.INT8),
        Column("ts", ColumnType.TIMESTAMP),
    ],
    timestamp_key="ts",
)


def _analyse(sql: str, mentions: int = 1) -> Prescan:
    return analyse(tokenize(sql), "cpu", SCHEMA, mentions=mentions)


def test_where_terms_become_bounds() -> None:
    p = _analyse(
        "SELECT host, max(usage) AS m FROM cpu WHERE host IN ('a', 'b') AND ts >= 1000 "
        "AND ts < to_timestamp_millis(5000) AND usage > 90 GROUP BY host"
    )
    assert p is not None
    assert p.request.columns == ["host", "usage", "ts"]
    assert p.bounds == {
        "host": Range(values=frozenset(["a", "b"])),
        "ts": Range(lo=1000, hi=5000, hi_inclusive=False),
        "usage": Range(lo=90.0, lo_inclusive=False),
    }


def test_literal_first_between_qualified_and_parenthesised_terms() -> None:
    p = _analyse(
        "SELECT c.usage FROM cpu AS c WHERE (5 <= c.n AND (usage BETWEEN -1.5 AND 2)) "
        "AND cpu.host = 'x'"
    )
    assert p is not None
    assert p.bounds == {
        "n": Range(lo=5),
        "usage": Range(lo=-1.5, hi=2.0),
        "host": Range(values=frozenset(["x"])),
    }


@pytest.mark.parametrize(
    "where",
    [
        "host = 'a' OR usage > 1",  # a disjunction
        "NOT host = 'a'",
        "host NOT IN ('a')",
        "usage NOT BETWEEN 1 AND 2",
        "host IS NULL",
        "usage > n",  # no literal
        "usage > 1 + 1",  # an expression
        "lower(host) = 'a'",
        "host = 5",  # a literal of another kind
        "n = 1000",  # out of the column type's range
        "n = 1.5",
        "ts > '2024-01-01'",  # strings as timestamps are DataFusion's to read
        "other.host = 'a'",  # another relation's column
    ],
)
def test_terms_that_bound_nothing(where: str) -> None:
    assert _analyse(f"SELECT usage FROM cpu WHERE {where}").bounds == {}


@pytest.mark.parametrize(
    ("sql", "mentions", "columns"),
    [
        ("SELECT d.n FROM cpu JOIN cpu AS d ON cpu.host = d.host WHERE usage > 1", 2,
         ["host", "usage", "n"]),
        ("SELECT usage FROM cpu WHERE host IN (SELECT host FROM cpu WHERE n > 1)", 2,
         ["host", "usage", "n"]),
        ("SELECT usage FROM cpu WHERE usage > 1 UNION ALL SELECT n FROM cpu", 2,
         ["usage", "n"]),
        ("WITH x AS (SELECT * FROM cpu WHERE usage > 1) SELECT * FROM x", 1, None),
        ("SELECT usage FROM cpu, other WHERE usage > 1", 1, ["usage"]),
        ("SELECT usage FROM cpu c, cpu d WHERE c.usage > 1", 2, ["usage"]),
        ("SELECT usage FROM cpu NATURAL JOIN other WHERE usage > 1", 1, None),
    ],
)  # fmt: skip
def test_queries_reading_the_table_in_several_places_get_no_bounds(
    sql: str, mentions: int, columns: list[str] | None
) -> None:
    p = _analyse(sql, mentions)
    assert p.request.columns == columns
    assert p.bounds == {}


def test_a_limit_without_order_stops_early() -> None:
    assert _analyse("SELECT * FROM cpu LIMIT 10").stops_early
    assert not _analyse("SELECT * FROM cpu ORDER BY ts LIMIT 10").stops_early
    assert not _analyse("SELECT host, count(*) AS n FROM cpu GROUP BY host LIMIT 3").stops_early
    assert not _analyse("SELECT host FROM cpu").stops_early


def test_columns_read() -> None:
    assert _analyse("SELECT * FROM cpu WHERE host = 'a'").request.columns is None
    assert _analyse("SELECT count(*) AS k FROM cpu").request.columns == ["ts"]


@pytest.fixture
def sql(tmp_path: Path) -> Iterator[SqlExecutor]:
    engine = open_standalone(str(tmp_path / "db"), compaction_threads=0, gc_interval_s=0)
    ex = SqlExecutor(engine)
    ex.execute(
        "CREATE TABLE cpu (host string TAG, usage double, ts timestamp NOT NULL, "
        "TIMESTAMP KEY(ts)) WITH (num_rows_per_row_group='50')"
    )
    values = ", ".join(f"('h{i % 10}', {float(i)}, {i * 1000})" for i in range(1000))
    ex.execute(f"INSERT INTO cpu (host, usage, ts) VALUES {values}")
    engine.flush()
    ex.execute("INSERT INTO cpu (host, usage, ts) VALUES ('h3', -1.0, 2000000)")
    yield ex
    engine.close()


QUERIES = [
    "SELECT host, count(*) AS k, max(usage) AS m FROM cpu WHERE host IN ('h3', 'h4') "
    "AND ts >= 100000 GROUP BY host ORDER BY host",
    "SELECT * FROM cpu WHERE usage > 990 ORDER BY ts",
    "SELECT count(*) AS k FROM cpu",
    "SELECT date_bin(interval '1 minute', ts) AS m, avg(usage) AS a FROM cpu "
    "WHERE host = 'h3' AND ts < to_timestamp_millis(300000) GROUP BY m ORDER BY m",
    "SELECT host FROM cpu WHERE host = 'h3' AND host = 'h4'",
    "SELECT nope FROM cpu WHERE host = 'h3'",
    "SELECT c.host, c.ts, c.usage FROM cpu c JOIN (SELECT host, max(ts) AS last FROM cpu "
    "GROUP BY host) l ON c.host = l.host AND c.ts = l.last ORDER BY c.host",
    "SELECT host, usage FROM cpu WHERE host = 'h1' LIMIT 3",
    "SELECT host, usage FROM cpu WHERE usage > 995 UNION ALL SELECT host, usage FROM cpu "
    "WHERE usage < 2 ORDER BY usage",
]


@pytest.mark.parametrize("query", QUERIES)
def test_in_memory_and_streamed_scans_answer_alike(
    sql: SqlExecutor, query: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def answer() -> object:
        try:
            return sql.execute(query).table().to_pylist()
        except Exception as e:
            return f"{type(e).__name__}: {e}"

    in_memory = answer()
    monkeypatch.setattr(session_module, "SMALL_SCAN_VALUES", -1)
    assert answer() == in_memory


def test_bounds_prune_the_scan_of_a_query(sql: SqlExecutor) -> None:
    r = sql.execute("SELECT count(*) AS k FROM cpu WHERE host = 'h3' AND ts < 100000")
    assert r.table().to_pylist() == [{"k": 10}]
    (scan,) = r.scans
    assert scan.stats.row_groups_total == 20
    assert scan.stats.row_groups_read <= 2
    assert scan.filter is not None and "h3" in scan.filter


def test_small_scans_are_read_up_front_whatever_the_table_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = open_standalone(str(tmp_path / "db"), compaction_threads=0, gc_interval_s=0)
    ex = SqlExecutor(engine)
    ex.execute(
        'CREATE TABLE "Odd.Name" (host string TAG, v double, ts timestamp NOT NULL, '
        "TIMESTAMP KEY(ts))"
    )
    ex.execute("INSERT INTO \"Odd.Name\" (host, v, ts) VALUES ('a', 1.0, 1), ('b', 2.0, 2)")

    def streamed(*_: object, **__: object) -> None:
        raise AssertionError("the table was streamed, not read up front")

    monkeypatch.setattr(session_module, "EngineDataset", streamed)
    got = ex.execute('SELECT host, sum(v) AS s FROM "Odd.Name" GROUP BY host ORDER BY host')
    assert got.table().to_pylist() == [{"host": "a", "s": 1.0}, {"host": "b", "s": 2.0}]
    assert got.table().schema.field("host").type == "string"
    engine.close()
