"""Partition tables on a standalone engine: every sub-table local, the same mechanism as in
a cluster (tests/cluster/test_partition_tables.py)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from gnomon.errors import AlreadyExists, InvalidArgument
from node.backends import open_standalone
from node.engine.engine import Engine
from node.partition import pushdown
from node.partition.rule import KeyRule
from node.sql.executor import SqlExecutor
from node.sql.lexer import tokenize
from node.sql.select import read
from tests.partition import differential
from tests.sql import test_differential as diff

CPU = (
    "CREATE TABLE cpu (host string TAG, region string TAG, v double, "
    "ts timestamp NOT NULL, TIMESTAMP KEY(ts)) PARTITION BY KEY(host) PARTITIONS 4"
)


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    with open_standalone(str(tmp_path / "db"), wal_sync="never", compaction_threads=0) as e:
        yield e


def _rows(sql: SqlExecutor, query: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = sql.execute(query).table().to_pylist()
    return rows


def test_create_show_insert_drop(engine: Engine, tmp_path: Path) -> None:
    sql = SqlExecutor(engine)
    sql.execute(CPU)
    assert engine.list_tables() == ["__cpu_0", "__cpu_1", "__cpu_2", "__cpu_3"]
    assert _rows(sql, "SHOW TABLES") == [{"Tables": "cpu"}]
    (shown,) = _rows(sql, "SHOW CREATE TABLE cpu")
    assert "PARTITION BY KEY(`host`) PARTITIONS 4 ENGINE=Analytic" in shown["Create Table"]
    with pytest.raises(AlreadyExists):
        sql.execute(CPU)
    sql.execute(CPU.replace("CREATE TABLE", "CREATE TABLE IF NOT EXISTS"))
    assert (
        sql.execute(
            # Without a column list: the key first (ts), then host, region, v as declared.
            "INSERT INTO cpu VALUES (1000, 'a', 'eu', 1.0), (2000, 'b', 'eu', 2.0), "
            "(3000, 'c', 'us', 3.0), (4000, 'd', 'us', 4.5), (61000, 'a', 'eu', 5.0)"
        ).affected_rows
        == 5
    )
    # Each host's rows are in the one sub-table its key hashes to.
    rule = KeyRule(("host",), 4)
    for host in "abcd":
        (p,) = rule.of({"host": pa.array([host])}, 1)
        assert engine.read_all(f"__cpu_{p}").column("host").to_pylist().count(host) >= 1
    # SHOW CREATE TABLE round-trips: the statement makes the same table again.
    sql.execute("DROP TABLE cpu")
    assert engine.list_tables() == [] and _rows(sql, "SHOW TABLES") == []
    sql.execute(shown["Create Table"])
    (again,) = _rows(sql, "SHOW CREATE TABLE cpu")
    assert again == shown
    assert len(engine.list_tables()) == 4


def test_definitions_survive_a_restart(tmp_path: Path) -> None:
    path = str(tmp_path / "db")
    with open_standalone(path, wal_sync="never") as e:
        sql = SqlExecutor(e)
        sql.execute(CPU)
        sql.execute("INSERT INTO cpu VALUES (1000, 'a', 'eu', 1.0), (2000, 'b', 'eu', 2.0)")
    with open_standalone(path, wal_sync="never") as e:
        assert _rows(SqlExecutor(e), "SELECT host FROM cpu ORDER BY host") == [
            {"host": "a"},
            {"host": "b"},
        ]


def test_refusals(engine: Engine) -> None:
    sql = SqlExecutor(engine)
    with pytest.raises(InvalidArgument, match="must be a string TAG"):
        sql.execute(CPU.replace("KEY(host)", "KEY(v)"))
    with pytest.raises(InvalidArgument, match="not a column"):
        sql.execute(CPU.replace("KEY(host)", "KEY(nope)"))
    sql.execute(CPU)
    with pytest.raises(AlreadyExists):
        sql.execute("CREATE TABLE cpu (ts timestamp NOT NULL, TIMESTAMP KEY(ts))")
    with pytest.raises(InvalidArgument, match="partition table"):
        sql.execute("ALTER TABLE cpu ADD COLUMN x double")
    with pytest.raises(InvalidArgument, match="partition table"):
        sql.execute("DELETE FROM cpu WHERE host = 'a'")


def test_key_filters_prune_sub_tables(engine: Engine) -> None:
    sql = SqlExecutor(engine)
    sql.execute(CPU)
    hosts = [f"h{i}" for i in range(20)]
    values = ", ".join(f"({1000 * i}, '{h}', 'eu', {i}.0)" for i, h in enumerate(hosts))
    sql.execute(f"INSERT INTO cpu VALUES {values}")
    rule = KeyRule(("host",), 4)

    def read(query: str) -> set[str]:
        return {s.table for s in sql.execute(query).scans}

    (p,) = rule.of({"host": pa.array(["h3"])}, 1)
    assert read("SELECT count(*) FROM cpu WHERE host = 'h3'") == {f"__cpu_{p}"}
    # Pushed down or scanned, the same sub-tables are read.
    assert read("SELECT DISTINCT region FROM cpu WHERE host = 'h3'") == {f"__cpu_{p}"}
    both = {f"__cpu_{q}" for q in rule.of({"host": pa.array(["h3", "h7"])}, 2)}
    assert read("SELECT v FROM cpu WHERE host IN ('h3', 'h7') ORDER BY v") == both
    assert len(read("SELECT count(*) FROM cpu WHERE v > 3")) == 4


def test_explain_shows_each_sub_tables_partial_query_and_the_merge(engine: Engine) -> None:
    sql = SqlExecutor(engine)
    sql.execute(CPU)
    sql.execute("INSERT INTO cpu VALUES (1000, 'a', 'eu', 1.0), (2000, 'b', 'us', 2.0)")
    query = "SELECT region, max(v) AS m FROM cpu GROUP BY region ORDER BY region"
    plan = _rows(sql, f"EXPLAIN {query}")
    partials = [r["plan"] for r in plan if r["plan_type"] == "gnomon_partial"]
    assert sorted(p.split()[0] for p in partials) == [f"sub_table=__cpu_{i}" for i in range(4)]
    # Every sub-table is served here (standalone); each gets its partial aggregate.
    assert all(" owner=here " in p and 'FROM "__cpu_' in p and "max(" in p for p in partials)
    (merge,) = [r["plan"] for r in plan if r["plan_type"] == "gnomon_merge"]
    assert "__parts" in merge and "ORDER BY" in merge
    # With ANALYZE the query runs: what each sub-table sent, two rows in all.
    analyzed = _rows(sql, f"EXPLAIN ANALYZE {query}")
    sent = [
        int(r["plan"].split("rows_received=")[1].split()[0])
        for r in analyzed
        if r["plan_type"] == "gnomon_partial"
    ]
    assert sum(sent) == 2
    # One sub-table holding every row the query reads answers the query itself.
    (one,) = [
        r["plan"]
        for r in _rows(sql, "EXPLAIN SELECT max(v) FROM cpu WHERE host = 'a'")
        if r["plan_type"] == "gnomon_partial"
    ]
    assert "max(v)" in one


def test_answers_match_a_plain_table(engine: Engine) -> None:
    """Pushed-down shapes (projections with top-k, partial aggregates, buckets) and scanned
    ones (joins, DISTINCT, HAVING) answer as the same rows in one plain table do."""
    sql = SqlExecutor(engine)
    sql.execute(CPU)
    sql.execute(CPU.replace("cpu", "one").split(" PARTITION BY")[0])
    rng = random.Random(7)
    rows = [
        (f"h{rng.randrange(12)}", rng.choice(["eu", "us"]), round(rng.uniform(0, 100), 2), t)
        for t in range(0, 7_200_000, 7_000)
    ]
    values = ", ".join(f"({t}, '{h}', '{r}', {v})" for h, r, v, t in rows)
    for table in ("cpu", "one"):
        sql.execute(f"INSERT INTO {table} VALUES {values}")
    engine.flush()
    queries = [
        "SELECT host, region, v, ts FROM {t} WHERE host IN ('h1', 'h2') ORDER BY ts",
        "SELECT host, v FROM {t} ORDER BY v DESC, host LIMIT 7",
        "SELECT host, v FROM {t} ORDER BY ts LIMIT 3 OFFSET 2",
        "SELECT {t}.host AS h, v * 2 AS w FROM {t} WHERE v > 50 ORDER BY w, h LIMIT 5",
        "SELECT count(*), count(v), sum(v), min(v), max(v), avg(v), min(ts), max(ts) FROM {t}",
        "SELECT host, count(*) AS n, avg(v) AS a FROM {t} GROUP BY host ORDER BY host",
        "SELECT region, host, max(v) FROM {t} WHERE ts >= 3600000 GROUP BY 1, 2 ORDER BY 3 DESC",
        "SELECT date_bin(interval '10 minutes', ts) AS b, max(v) AS m FROM {t} "
        "GROUP BY b ORDER BY b DESC LIMIT 5",
        "SELECT time_bucket(ts, 'PT30M') AS b, host, avg(v) FROM {t} WHERE host = 'h3' "
        "GROUP BY b, host ORDER BY b",
        "SELECT host, count(*) FROM {t} GROUP BY host HAVING count(*) > 40 ORDER BY host",
        "SELECT DISTINCT host FROM {t} ORDER BY host",
        "SELECT count(DISTINCT host) AS hosts FROM {t}",
        "SELECT a.host, a.ts, a.v FROM {t} a JOIN (SELECT host, max(ts) AS last FROM {t} "
        "GROUP BY host) l ON a.host = l.host AND a.ts = l.last ORDER BY a.host",
        "SELECT * FROM {t} WHERE host = 'h5' ORDER BY ts LIMIT 4",
        "SELECT x.host, v FROM {t} x WHERE (host = 'h1' OR v > 90) AND ts < 3600000 "
        "ORDER BY v DESC, host LIMIT 6;",
        "SELECT host, count(*) AS n FROM {t} WHERE (host = 'h1' OR host = 'h2') "
        "AND (v > 10 OR v < 5) GROUP BY host ORDER BY host",
    ]
    for q in queries:
        got = sql.execute(q.format(t="cpu")).table()
        want = sql.execute(q.format(t="one")).table()
        assert got.column_names == [n.replace("one.", "cpu.") for n in want.column_names], q
        assert diff._rows(got) == diff._rows(want) or all(
            diff._row_equal(g, w) for g, w in zip(diff._rows(got), diff._rows(want), strict=True)
        ), q


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SqlExecutor, Any]]:
    engine = open_standalone(
        str(tmp_path_factory.mktemp("partition-differential") / "db"),
        wal_sync="never",
        compaction_threads=0,
        gc_interval_s=0,
    )
    sql = SqlExecutor(engine)
    sql.execute(differential.DDL)
    data = differential.rows(random.Random(diff.SEED))
    statements = differential.inserts(data)
    # Part in SSTs, part in memtables.
    for i, statement in enumerate(statements):
        sql.execute(statement)
        if i == len(statements) // 2:
            engine.flush()
    con = differential.duck(data)
    yield sql, con
    con.close()
    engine.close()


@pytest.mark.parametrize("merge", ["arrow", "sql"])
def test_random_queries_agree_with_duckdb(
    loaded: tuple[SqlExecutor, Any], merge: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Partial answers merged by Arrow kernels, or all by the SQL merge (where the kernels
    would differ from DataFusion it runs anyway)."""
    if merge == "sql":
        monkeypatch.setattr(pushdown, "_merged", lambda m, parts: None)
    sql, con = loaded
    failures = differential.disagreements(lambda q: sql.execute(q).table(), con)
    assert not failures, f"{len(failures)} queries differ:\n\n" + "\n\n".join(failures[:5])


def test_time_buckets_of_a_scanned_table(loaded: tuple[SqlExecutor, Any]) -> None:
    """A query scanned over several sub-tables (count(DISTINCT ...) is not split) gives
    DataFusion several input partitions, and it then calls time_bucket on batches of no
    rows too."""
    sql, con = loaded
    got = sql.execute(
        "SELECT time_bucket(ts, 'PT5M') AS b, max(mem) AS m, count(DISTINCT host) AS h "
        "FROM t GROUP BY b ORDER BY b"
    ).table()
    want = diff._duck_rows(
        con,
        "SELECT time_bucket(interval '5 minutes', ts, TIMESTAMP '1970-01-01 00:00:00') AS b, "
        "max(mem) AS m, count(DISTINCT host) AS h FROM t GROUP BY b ORDER BY b",
    )
    q = diff.Query("", "", ordered=True)
    assert diff.compare(q, diff._rows(got), want) is None


def test_which_queries_split() -> None:
    """A single SELECT of the table alone with merged aggregates, group keys, ORDER BY of
    outputs (or columns carried) and LIMIT splits; anything else is scanned."""
    columns = ["host", "region", "cpu", "mem", "req", "ts"]
    split = [
        "SELECT host, cpu FROM t WHERE host = 'a' ORDER BY ts DESC LIMIT 5",
        "SELECT t.host AS h, cpu * 2 FROM t ORDER BY 2 DESC NULLS LAST, h LIMIT 3 OFFSET 1",
        "SELECT count(*), sum(cpu), avg(req), min(ts), max(mem) FROM t WHERE ts > 1000",
        "SELECT date_bin(INTERVAL '5 minutes', ts) AS b, host, avg(cpu) FROM t "
        "GROUP BY b, host ORDER BY b, host",
        "SELECT region, count(cpu) c FROM t x WHERE x.cpu > 1 GROUP BY 1 ORDER BY c DESC",
        "SELECT host FROM t WHERE (host = 'a' OR cpu > 1) AND mem < 3 ORDER BY host LIMIT 2;",
    ]
    scanned = [
        "SELECT * FROM t",
        "SELECT DISTINCT host FROM t",
        "SELECT host, count(DISTINCT region) FROM t GROUP BY host",
        "SELECT host, count(*) FROM t GROUP BY host HAVING count(*) > 1",
        "SELECT max(cpu) + 1 FROM t",
        "SELECT host FROM t WHERE cpu > (SELECT avg(cpu) FROM t)",
        "SELECT a.host FROM t a JOIN t b ON a.host = b.host",
        "SELECT host, max(cpu) FROM t GROUP BY host ORDER BY min(cpu)",
        "SELECT region, sum(cpu) FROM t GROUP BY region ORDER BY host",
        "SELECT host FROM t LIMIT 1 + 1",
        "SELECT host, max(cpu) OVER (PARTITION BY region) FROM t",
        "SELECT count(*) FILTER (WHERE cpu > 1) FROM t",
        "SELECT host AS 'h' FROM t",
        "SELECT host FROM t WHERE",
    ]
    for q in split:
        tokens = tokenize(q)
        assert pushdown.plan(q, tokens, read(tokens), "t", columns) is not None, q
    for q in scanned:
        tokens = tokenize(q)
        assert pushdown.plan(q, tokens, read(tokens), "t", columns) is None, q
