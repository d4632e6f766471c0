"""The SQL layer end to end on a real engine: DDL, INSERT, SELECT on DataFusion with pushdown,
time travel, SHOW/DESCRIBE/EXPLAIN and the errors bad statements get."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from gnomon.errors import AlreadyExists, GnomonError, InvalidArgument, NotFound
from node.backends import open_standalone
from node.engine.schema import TSID_ZERO_UNTAGGED, Column, ColumnType, Schema
from node.sql.executor import SqlExecutor
from node.sql.parser import parse

pytestmark = pytest.mark.unit

DDL = (
    "CREATE TABLE cpu (host string TAG, region string TAG, usage double, "
    "ts timestamp NOT NULL, TIMESTAMP KEY(ts)) ENGINE=Analytic "
    "WITH (segment_duration='1h', num_rows_per_row_group='100')"
)


@pytest.fixture
def sql(tmp_path: Path) -> Iterator[SqlExecutor]:
    engine = open_standalone(str(tmp_path / "db"))
    yield SqlExecutor(engine)
    engine.close()


def rows(x: SqlExecutor, q: str) -> list[dict[str, object]]:
    return x.execute(q).table().to_pylist()


def test_create_insert_select(sql: SqlExecutor) -> None:
    assert sql.execute(DDL).affected_rows == 0
    r = sql.execute(
        "INSERT INTO cpu (ts, host, region, usage) VALUES "
        "(1000, 'a', 'eu', 1.5), (2000, 'b', 'us', 2.5), ('1970-01-01 00:00:03', 'a', 'eu', 3.5)"
    )
    assert r.affected_rows == 3
    assert rows(sql, "SELECT host, usage FROM cpu WHERE usage > 2 ORDER BY usage") == [
        {"host": "b", "usage": 2.5},
        {"host": "a", "usage": 3.5},
    ]
    assert rows(sql, "SELECT count(*) AS n FROM cpu") == [{"n": 3}]
    # HoraeDB lets integer milliseconds stand for timestamps in comparisons.
    assert rows(sql, "SELECT usage FROM cpu WHERE ts >= 2000 AND 3000 > ts") == [{"usage": 2.5}]
    assert rows(sql, "SELECT count(*) AS n FROM cpu WHERE ts BETWEEN 1000 AND 2000") == [{"n": 2}]


def test_insert_without_column_list_and_defaults(sql: SqlExecutor) -> None:
    sql.execute(
        "CREATE TABLE t (name string TAG, level int32 DEFAULT 3, v double, ts timestamp NOT NULL, "
        "TIMESTAMP KEY(ts))"
    )
    # Without a column list the values follow the table's order: the key first.
    sql.execute("INSERT INTO t VALUES (5, 'x', 1, 1.0)")
    sql.execute("INSERT INTO t (ts, name, v) VALUES (6, 'y', 2.0)")
    assert rows(sql, "SELECT name, level FROM t ORDER BY ts") == [
        {"name": "x", "level": 1},
        {"name": "y", "level": 3},
    ]
    with pytest.raises(InvalidArgument, match="needs 4 values"):
        sql.execute("INSERT INTO t VALUES ('x', 1)")


def test_a_table_stored_in_declared_order_keeps_it(tmp_path: Path) -> None:
    """Tables CREATE TABLE made before columns were stored key first kept their declared
    order: their catalog entry loads as it is, and SELECT * and INSERT without a column
    list still follow it (DESCRIBE and SHOW CREATE TABLE list the key first, as always)."""
    declared = Schema.build(
        [
            Column("host", ColumnType.STRING, is_tag=True),
            Column("v", ColumnType.DOUBLE),
            Column("ts", ColumnType.TIMESTAMP, nullable=False),
        ],
        timestamp_key="ts",
        tsid_version=TSID_ZERO_UNTAGGED,
    )
    path = str(tmp_path / "db")
    with open_standalone(path) as engine:
        engine.create_table("old", declared)
    with open_standalone(path) as engine:
        sql = SqlExecutor(engine)
        sql.execute("INSERT INTO old VALUES ('a', 1.5, 1000)")
        table = sql.execute("SELECT * FROM old").table()
        assert table.column_names == ["tsid", "host", "v", "ts"]
        assert table.drop_columns(["tsid"]).to_pylist() == [
            {"host": "a", "v": 1.5, "ts": datetime(1970, 1, 1, 0, 0, 1)}
        ]
        assert [r["name"] for r in rows(sql, "DESCRIBE old")] == ["tsid", "ts", "host", "v"]


def test_overwrite_keeps_newest_and_time_travel(sql: SqlExecutor) -> None:
    sql.execute(DDL)
    sql.execute("INSERT INTO cpu (ts, host, region, usage) VALUES (1000, 'a', 'eu', 1.0)")
    sql.tables.engine.flush()
    sql.execute("INSERT INTO cpu (ts, host, region, usage) VALUES (1000, 'a', 'eu', 2.0)")
    sql.tables.engine.flush()
    assert rows(sql, "SELECT usage FROM cpu") == [{"usage": 2.0}]
    assert rows(sql, "SELECT usage FROM cpu VERSION AS OF 1") == [{"usage": 1.0}]
    assert rows(sql, "SELECT c.usage FROM cpu VERSION AS OF 2 AS c") == [{"usage": 2.0}]
    both = rows(
        sql,
        "SELECT a.usage AS old, b.usage AS new FROM cpu VERSION AS OF 1 a "
        "JOIN cpu b ON a.host = b.host",
    )
    assert both == [{"old": 1.0, "new": 2.0}]
    with pytest.raises(NotFound, match="version 9"):
        sql.execute("SELECT * FROM cpu VERSION AS OF 9")


def test_filter_pushdown_prunes_row_groups(sql: SqlExecutor) -> None:
    sql.execute(DDL)
    values = ", ".join(f"({i}, 'h{i % 10}', 'eu', {float(i)})" for i in range(1000))
    sql.execute(f"INSERT INTO cpu (ts, host, region, usage) VALUES {values}")
    sql.tables.engine.flush()
    r = sql.execute("SELECT count(*) AS n FROM cpu WHERE host = 'h3'")
    assert r.table().to_pylist() == [{"n": 100}]
    (scan,) = r.scans
    assert "h3" in (scan.filter or "")
    assert scan.stats.row_groups_total == 10 and scan.stats.row_groups_read <= 2
    explain = rows(sql, "EXPLAIN ANALYZE SELECT usage FROM cpu WHERE host = 'h3'")
    gnomon = [e["plan"] for e in explain if e["plan_type"] == "gnomon_scan"]
    assert len(gnomon) == 1
    assert "row_groups_read=1/10" in gnomon[0] or "row_groups_read=2/10" in gnomon[0]
    plan = rows(sql, "EXPLAIN SELECT usage FROM cpu WHERE host = 'h3'")
    physical = next(e["plan"] for e in plan if e["plan_type"] == "physical_plan")
    # The tag reaches DataFusion dictionary encoded, so the literal is a dictionary scalar.
    assert "filter_expr=(host == " in physical and '"h3"' in physical


def test_explain_names_the_route_that_answers(sql: SqlExecutor) -> None:
    sql.execute(DDL)
    sql.execute("INSERT INTO cpu (ts, host, region, usage) VALUES (1, 'a', 'eu', 1.0)")

    def route(query: str) -> str:
        (found,) = [e["plan"] for e in rows(sql, query) if e["plan_type"] == "gnomon_route"]
        return str(found)

    sorted_rows = route("EXPLAIN SELECT host, usage FROM cpu WHERE ts >= 0 ORDER BY host LIMIT 5")
    assert sorted_rows == "fast path: sorted rows by host asc limit 5, sorted by Arrow"
    bucketed = route(
        "EXPLAIN SELECT date_bin(INTERVAL '1 minute', ts) AS m, max(usage) AS peak FROM cpu "
        "GROUP BY m ORDER BY m"
    )
    assert bucketed.startswith("fast path: bucketed aggregation of max(usage) over 60000 ms")
    joined = "EXPLAIN SELECT a.host FROM cpu a JOIN cpu b ON a.host = b.host"
    assert route(joined) == route(f"{joined.replace('EXPLAIN', 'EXPLAIN ANALYZE')}")
    assert route(joined) == "DataFusion"
    # The route's row leads; DataFusion's plans follow it as before.
    assert [e["plan_type"] for e in rows(sql, joined)][:3] == [
        "gnomon_route",
        "logical_plan",
        "physical_plan",
    ]


def test_functions(sql: SqlExecutor) -> None:
    sql.execute(DDL)
    sql.execute(
        "INSERT INTO cpu (ts, host, region, usage) VALUES "
        "(0, 'a', 'eu', 1.0), (59000, 'b', 'eu', 2.0), (61000, 'a', 'eu', 3.0)"
    )
    got = rows(
        sql,
        "SELECT time_bucket(ts, 'PT1M') AS b, count(*) AS n, approx_distinct(host) AS hosts "
        "FROM cpu GROUP BY b ORDER BY b",
    )
    assert [(g["n"], g["hosts"]) for g in got] == [(2, 2), (1, 1)]
    got = rows(
        sql,
        "SELECT date_bin(interval '1 minute', ts) AS b, max(usage) AS m FROM cpu "
        "GROUP BY b ORDER BY b",
    )
    assert [g["m"] for g in got] == [2.0, 3.0]


def test_show_describe_and_show_create_round_trip(sql: SqlExecutor) -> None:
    sql.execute(DDL)
    sql.execute(
        "CREATE TABLE `Other` (k string, v double, t timestamp NOT NULL, "
        "PRIMARY KEY(k, t), TIMESTAMP KEY(t)) WITH (update_mode='APPEND')"
    )
    assert rows(sql, "SHOW TABLES") == [{"Tables": "Other"}, {"Tables": "cpu"}]
    assert rows(sql, "SHOW TABLES LIKE 'c%'") == [{"Tables": "cpu"}]
    desc = {r["name"]: r for r in rows(sql, "DESCRIBE cpu")}
    assert desc["tsid"]["is_primary"] and desc["host"]["is_tag"] and not desc["ts"]["is_nullable"]
    # gnomon's own options, each away from its default: SHOW CREATE TABLE prints them
    # (and HoraeDB's option set whatever their values) so that its statement makes the
    # same table.
    sql.execute(
        "CREATE TABLE own (v double, t timestamp NOT NULL, TIMESTAMP KEY(t)) WITH ("
        "enable_compaction='false', compaction_min_threshold='3', compaction_max_threshold='9', "
        "compaction_target_size='64mb', compaction_full_after='1d', compaction_mode='local', "
        "time_travel='2h', max_versions='7')"
    )
    for name in ("cpu", "Other", "own"):
        ddl = rows(sql, f"SHOW CREATE TABLE `{name}`")[0]["Create Table"]
        info = sql.tables.engine.describe(name)
        sql.execute(f"DROP TABLE `{name}`")
        sql.execute(ddl)
        again = sql.tables.engine.describe(name)
        assert (again.schema, again.options) == (info.schema, info.options)


def test_identifiers_keep_their_case(sql: SqlExecutor) -> None:
    sql.execute("CREATE TABLE Mixed (Host string TAG, ts timestamp NOT NULL, TIMESTAMP KEY(ts))")
    assert sql.tables.engine.list_tables() == ["Mixed"]
    sql.execute("INSERT INTO Mixed (Host, ts) VALUES ('a', 1)")
    assert rows(sql, "SELECT Host FROM Mixed") == [{"Host": "a"}]
    assert rows(sql, 'SELECT "Host" FROM `Mixed`') == [{"Host": "a"}]
    for other_case in ("SELECT Host FROM mixed", "SELECT * FROM MIXED", "SELECT HOST FROM Mixed"):
        with pytest.raises(GnomonError):
            sql.execute(other_case)


def test_names_folded_before_are_found_unquoted_in_any_case(sql: SqlExecutor) -> None:
    # A table made when gnomon folded unquoted names to lower case.
    sql.execute(
        "CREATE TABLE cpu (host string TAG, v double, ts timestamp NOT NULL, TIMESTAMP KEY(ts))"
    )
    sql.execute("INSERT INTO CPU (HOST, V, Ts) VALUES ('a', 1.5, 1)")
    assert rows(sql, "SELECT Host, V FROM Cpu WHERE HOST = 'a'") == [{"host": "a", "v": 1.5}]
    assert sql.execute("DESCRIBE CPU").table().column("name").to_pylist() == [
        "tsid",
        "ts",
        "host",
        "v",
    ]
    with pytest.raises(GnomonError):
        sql.execute('SELECT "Host" FROM cpu')  # a quoted name is taken as written


@pytest.mark.parametrize(
    ("statement", "error", "message"),
    [
        ("SELEC 1", InvalidArgument, "expected a statement"),
        ("CREATE TABLE x (a int", InvalidArgument, "syntax error"),
        ("CREATE TABLE x (a string)", InvalidArgument, "TIMESTAMP KEY"),
        (
            "CREATE TABLE x (t timestamp, TIMESTAMP KEY(t)) WITH (bogus='1')",
            InvalidArgument,
            "unknown table option 'bogus'",
        ),
        (
            "CREATE TABLE x (t timestamp, v blob, TIMESTAMP KEY(t))",
            InvalidArgument,
            "unknown column type 'blob'",
        ),
        ("SELECT * FROM nope", NotFound, "'nope'"),
        ("SELECT nope FROM cpu", InvalidArgument, "nope"),
        ("INSERT INTO cpu (ts, host) VALUES ('x', 'a')", InvalidArgument, "column 'ts'"),
        ("INSERT INTO cpu (ts, nope) VALUES (1, 'a')", InvalidArgument, "nope"),
        ("INSERT INTO cpu (ts, usage) VALUES (1, 'high')", InvalidArgument, "column 'usage'"),
        ("INSERT INTO nope (ts) VALUES (1)", NotFound, "'nope'"),
        ("DROP TABLE nope", NotFound, "'nope'"),
        ("SELECT * FROM cpu TIMESTAMP AS OF 'yesterday'", InvalidArgument, "TIMESTAMP AS OF"),
        ("SHOW CREATE TABLE nope", NotFound, "'nope'"),
    ],
)
def test_bad_statements_get_clear_errors_and_change_nothing(
    sql: SqlExecutor, statement: str, error: type[Exception], message: str
) -> None:
    sql.execute(DDL)
    with pytest.raises(error, match=message):
        sql.execute(statement)
    assert sql.tables.engine.list_tables() == ["cpu"]
    assert rows(sql, "SELECT count(*) AS n FROM cpu") == [{"n": 0}]


def test_create_twice(sql: SqlExecutor) -> None:
    sql.execute(DDL)
    with pytest.raises(AlreadyExists):
        sql.execute(DDL)
    sql.execute(DDL.replace("CREATE TABLE", "CREATE TABLE IF NOT EXISTS"))


def test_parser_keeps_partition_clause() -> None:
    stmt = parse(
        "CREATE TABLE p (h string TAG, t timestamp NOT NULL, TIMESTAMP KEY(t)) "
        "PARTITION BY KEY(h) PARTITIONS 4 ENGINE=Analytic"
    )
    assert stmt.partition_by == ["h"] and stmt.partitions == 4  # type: ignore[union-attr]


def test_delete_where(sql: SqlExecutor) -> None:
    sql.execute(DDL)
    sql.execute(
        "INSERT INTO cpu (ts, host, region, usage) VALUES "
        "(1000, 'a', 'eu', 1.0), (2000, 'a', 'eu', 2.0), (1000, 'b', 'us', 3.0)"
    )
    sql.tables.engine.flush()
    assert sql.execute("DELETE FROM cpu WHERE host = 'a' AND ts >= 2000").affected_rows == 1
    assert rows(sql, "SELECT host, usage FROM cpu ORDER BY usage") == [
        {"host": "a", "usage": 1.0},
        {"host": "b", "usage": 3.0},
    ]
    assert sql.execute("DELETE FROM cpu WHERE usage > 100").affected_rows == 0
    sql.tables.engine.compact("cpu")
    assert rows(sql, "SELECT count(*) AS n FROM cpu") == [{"n": 2}]
    assert sql.execute("DELETE FROM cpu").affected_rows == 2
    assert rows(sql, "SELECT count(*) AS n FROM cpu") == [{"n": 0}]


def test_alter_table(sql: SqlExecutor) -> None:
    sql.execute(DDL)
    sql.execute("INSERT INTO cpu (ts, host, region, usage) VALUES (1000, 'a', 'eu', 1.0)")
    sql.tables.engine.flush()
    sql.execute("ALTER TABLE cpu ADD COLUMN idle double DEFAULT 5.5, ADD COLUMN note string")
    sql.execute(
        "INSERT INTO cpu (ts, host, region, usage, note) VALUES (2000, 'a', 'eu', 2.0, 'x')"
    )
    assert rows(sql, "SELECT idle, note FROM cpu ORDER BY ts") == [
        {"idle": 5.5, "note": None},
        {"idle": 5.5, "note": "x"},
    ]
    sql.execute("ALTER TABLE cpu MODIFY SETTING ttl='30d', enable_ttl='false'")
    ddl = rows(sql, "SHOW CREATE TABLE cpu")[0]["Create Table"]
    assert "`idle` double DEFAULT 5.5" in ddl and "ttl='30d'" in ddl
    with pytest.raises(InvalidArgument, match="already exists"):
        sql.execute("ALTER TABLE cpu ADD COLUMN idle double")
    with pytest.raises(InvalidArgument, match="unknown table option"):
        sql.execute("ALTER TABLE cpu MODIFY SETTING nope='1'")
