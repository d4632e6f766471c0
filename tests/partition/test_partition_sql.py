"""Partition tables on a standalone engine: every sub-table local, the same mechanism as in
a cluster (tests/cluster/test_partition_tables.py)."""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from gnomon.errors import AlreadyExists, InvalidArgument, NotOwner
from node.backends import open_standalone
from node.engine.engine import Engine
from node.partition.parts import LocalPart, LocalParts, Part, RunSql
from node.partition.rule import KeyRule
from node.partition.tables import Partitions
from node.sql import pushdown
from node.sql.executor import SqlExecutor
from node.sql.lexer import tokenize
from node.sql.select import read
from node.tables import LocalTables, TableReader
from tests.partition import differential
from tests.sql import test_differential as diff

pytestmark = pytest.mark.unit

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
        return {t for s in sql.execute(query).scans for t in s.tables}

    (p,) = rule.of({"host": pa.array(["h3"])}, 1)
    assert read("SELECT count(*) FROM cpu WHERE host = 'h3'") == {f"__cpu_{p}"}
    # Pushed down or scanned, the same sub-tables are read.
    assert read("SELECT DISTINCT region FROM cpu WHERE host = 'h3'") == {f"__cpu_{p}"}
    both = {f"__cpu_{q}" for q in rule.of({"host": pa.array(["h3", "h7"])}, 2)}
    assert read("SELECT v FROM cpu WHERE host IN ('h3', 'h7') ORDER BY v") == both
    assert len(read("SELECT count(*) FROM cpu WHERE v > 3")) == 4


def test_explain_shows_one_query_of_the_node_serving_every_sub_table(engine: Engine) -> None:
    sql = SqlExecutor(engine)
    sql.execute(CPU)
    sql.execute("INSERT INTO cpu VALUES (1000, 'a', 'eu', 1.0), (2000, 'b', 'us', 2.0)")
    query = "SELECT region, max(v) AS m FROM cpu GROUP BY region ORDER BY region"
    plan = _rows(sql, f"EXPLAIN {query}")
    assert plan[0] == {
        "plan_type": "gnomon_route",
        "plan": "partition split: a partial query at each owner, merged here",
    }
    # Every sub-table is served here (standalone): they hold every row the query reads, so
    # the query itself runs once over their union, and nothing is merged.
    (one,) = [r["plan"] for r in plan if r["plan_type"] == "gnomon_partial"]
    subs = ",".join(f"__cpu_{i}" for i in range(4))
    assert one.startswith(f"sub_tables={subs} owner=here query=")
    assert 'FROM "__cpu_0"' in one and "max(v)" in one and "ORDER BY region" in one
    (merge,) = [r["plan"] for r in plan if r["plan_type"] == "gnomon_merge"]
    assert "__parts" not in merge
    # With ANALYZE the query runs: the rows the owner sent, two in all.
    analyzed = _rows(sql, f"EXPLAIN ANALYZE {query}")
    (sent,) = [r["plan"] for r in analyzed if r["plan_type"] == "gnomon_partial"]
    assert " rows_received=2 " in sent
    # The run read each sub-table once, in one query.
    scans = sql.execute(query).scans
    assert [s.tables for s in scans] == [tuple(subs.split(","))]
    assert scans[0].rows_received == 2


class _TwoNodes:
    """Sub-tables served here, labelled as served by two nodes (even and odd ones): each
    label answers one partial query, merged here, as two nodes of a cluster would."""

    def __init__(self, local: LocalParts) -> None:
        self._local = local
        self.asked: list[tuple[str, tuple[str, ...]]] = []

    def bind(self, run: RunSql) -> None:
        self._local.bind(run)

    def locate(self, names: Sequence[str]) -> list[Part]:
        return [_Labelled(self._local.local(n), f"node{int(n[-1]) % 2}", self) for n in names]

    def moved(self, error: NotOwner) -> None:
        return None


class _Labelled:
    def __init__(self, part: LocalPart, owner: str, nodes: _TwoNodes) -> None:
        self._part = part
        self._owner = owner
        self._nodes = nodes

    @property
    def table(self) -> str:
        return self._part.table

    @property
    def owner(self) -> str:
        return self._owner

    def reader(self) -> TableReader:
        return self._part.reader()

    def query(self, sql: str, union: Sequence[str] = ()) -> pa.Table:
        self._nodes.asked.append((self._owner, tuple(union) or (self.table,)))
        return self._part.query(sql, union)

    def write(self, data: pa.Table) -> int:
        return self._part.write(data)


def _two_nodes(engine: Engine) -> tuple[SqlExecutor, _TwoNodes]:
    local = LocalTables(engine)
    nodes = _TwoNodes(LocalParts(local, local))
    plain = SqlExecutor(engine)
    return SqlExecutor(local, partitions=Partitions(plain.partitions.catalog, nodes)), nodes


def test_each_node_answers_one_partial_query(engine: Engine) -> None:
    sql, nodes = _two_nodes(engine)
    sql.execute(CPU)
    values = ", ".join(f"({1000 * i}, 'h{i}', 'eu', {i}.0)" for i in range(20))
    sql.execute(f"INSERT INTO cpu VALUES {values}")
    query = "SELECT region, count(*) AS n, max(v) AS m FROM cpu GROUP BY region"
    assert _rows(sql, query) == [{"region": "eu", "n": 20, "m": 19.0}]
    assert sorted(nodes.asked) == [
        ("node0", ("__cpu_0", "__cpu_2")),
        ("node1", ("__cpu_1", "__cpu_3")),
    ]
    plan = _rows(sql, f"EXPLAIN {query}")
    partials = sorted(r["plan"] for r in plan if r["plan_type"] == "gnomon_partial")
    assert [p.split(" query=")[0] for p in partials] == [
        "sub_tables=__cpu_0,__cpu_2 owner=node0",
        "sub_tables=__cpu_1,__cpu_3 owner=node1",
    ]
    assert all('FROM "__cpu_' in p and "count(*)" in p for p in partials)
    (merge,) = [r["plan"] for r in plan if r["plan_type"] == "gnomon_merge"]
    assert "__parts" in merge
    # One node's sub-tables holding every row read: that node answers the query itself.
    rule = KeyRule(("host",), 4)
    even = [
        h for h in (f"h{i}" for i in range(20)) if rule.of({"host": pa.array([h])}, 1)[0] % 2 == 0
    ]
    listed = ", ".join(f"'{h}'" for h in even)
    nodes.asked.clear()
    got = _rows(sql, f"SELECT count(*) AS n FROM cpu WHERE host IN ({listed})")
    assert got == [{"n": len(even)}]
    assert [owner for owner, _ in nodes.asked] == ["node0"]


def test_a_kept_split_binds_each_querys_literals(engine: Engine) -> None:
    """A shape's split is found once and bound to each query's literals: new hosts prune
    other sub-tables, a new LIMIT (a value the plan depends on) plans again, and a table
    made again under the same name is split as it is now."""
    sql, nodes = _two_nodes(engine)
    sql.execute(CPU)
    values = ", ".join(f"({1000 * i}, 'h{i}', 'eu', {i}.0)" for i in range(20))
    sql.execute(f"INSERT INTO cpu VALUES {values}")
    query = "SELECT host, max(v) AS m FROM cpu WHERE host IN ('{}', '{}') GROUP BY host"
    for a, b in (("h1", "h2"), ("h3", "h17"), ("h0", "nope")):
        want = [{"host": h, "m": float(h[1:])} for h in sorted((a, b)) if h != "nope"]
        assert sorted(_rows(sql, query.format(a, b)), key=lambda r: r["host"]) == want
    limited = "SELECT host, v FROM cpu WHERE v >= {} ORDER BY v DESC LIMIT {}"
    assert _rows(sql, limited.format(5, 2)) == [
        {"host": "h19", "v": 19.0},
        {"host": "h18", "v": 18.0},
    ]
    assert _rows(sql, limited.format(18.5, 3)) == [{"host": "h19", "v": 19.0}]
    assert [r["v"] for r in _rows(sql, limited.format(0, 4))] == [19.0, 18.0, 17.0, 16.0]
    sql.execute("DROP TABLE cpu")
    sql.execute(CPU.replace("PARTITIONS 4", "PARTITIONS 2").replace("region string TAG, ", ""))
    sql.execute("INSERT INTO cpu (host, v, ts) VALUES ('h1', 7.5, 1000)")
    nodes.asked.clear()
    assert _rows(sql, query.format("h1", "h2")) == [{"host": "h1", "m": 7.5}]
    assert {sub for _, subs in nodes.asked for sub in subs} <= {"__cpu_0", "__cpu_1"}


def test_a_union_reads_every_sub_table_it_names(engine: Engine) -> None:
    """The executor's union: a name reading the rows of several tables, read up front or
    streamed, in the fast path or DataFusion, refused for tables of another schema."""
    sql = SqlExecutor(engine)
    sql.execute(CPU)
    values = ", ".join(f"({1000 * i}, 'h{i}', 'eu', {i}.0)" for i in range(20))
    sql.execute(f"INSERT INTO cpu VALUES {values}")
    engine.flush()
    sql.execute("INSERT INTO cpu VALUES (99000, 'h1', 'us', 100.0)")
    subs = [f"__cpu_{i}" for i in range(4)]
    each = {s: engine.read_all(s).num_rows for s in subs}
    union = {"__cpu_0": subs[:3]}
    for query in (
        'SELECT count(*) AS n FROM "__cpu_0"',
        'SELECT count(*) AS n FROM "__cpu_0" WHERE ts >= 0',
        "SELECT date_bin(INTERVAL '1 minute', ts) AS b, count(v) AS n FROM \"__cpu_0\" "
        "WHERE ts >= 0 AND ts < 200000 GROUP BY b ORDER BY b",
        'SELECT count(*) AS n FROM (SELECT DISTINCT ts FROM "__cpu_0" LIMIT 100) AS d',
    ):
        got = sql.execute(query, union).table()
        assert sum(got.column("n").to_pylist()) == sum(each[s] for s in subs[:3]), query
        assert sum(sql.execute(query).table().column("n").to_pylist()) == each["__cpu_0"]
    sql.execute("CREATE TABLE other (x double, ts timestamp NOT NULL, TIMESTAMP KEY(ts))")
    with pytest.raises(InvalidArgument, match="another schema"):
        sql.execute('SELECT count(*) FROM "__cpu_0"', {"__cpu_0": ["__cpu_0", "other"]})
    with pytest.raises(InvalidArgument, match="must hold"):
        sql.execute('SELECT count(*) FROM "__cpu_0"', {"__cpu_0": ["__cpu_1"]})


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


@pytest.mark.parametrize("merge", ["none", "arrow", "sql"])
def test_random_queries_agree_with_duckdb(
    loaded: tuple[SqlExecutor, Any], merge: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every sub-table here answering the query itself over their union (``none``), or two
    nodes' partial answers merged by Arrow kernels, or all by the SQL merge (where the
    kernels would differ from DataFusion it runs anyway)."""
    sql, con = loaded
    if merge != "none":
        assert isinstance(sql.tables, LocalTables)
        sql, _ = _two_nodes(sql.tables.engine)
    if merge == "sql":
        monkeypatch.setattr(pushdown, "_merged", lambda m, parts: None)
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
