"""Differential test of the SQL layer against DuckDB.

The same deterministic data set goes into gnomon (part flushed to SSTs, part overwritten in
later SSTs, part only in the memtable, some rows deleted by key and some by a range tombstone)
and into DuckDB (the final rows, as an Arrow table). Then seeded random SELECTs (projections;
filters on tags, fields and time with AND/OR/NOT/IN/IS NULL; GROUP BY tags with aggregates;
time buckets; ORDER BY + LIMIT with a total order; joins of two filtered reads; IN, scalar,
derived-table and correlated EXISTS subqueries) run on both and must give the same rows:
exactly for integers, strings and timestamps, within a relative tolerance for floats (sums
and averages may add up in another order).
"""

from __future__ import annotations

import datetime as dt
import math
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest

import node.engine.scan.split as scan_module
import node.sql.session as session_module
from node.backends import open_standalone
from node.sql.executor import SqlExecutor

pytestmark = pytest.mark.unit

SEED = 20240101
N_QUERIES = 150
START_MS = 1_704_067_200_000  # 2024-01-01 00:00:00 UTC
HOURS = 3
STEP_MS = 15_000
SERIES = [
    ("h0", "eu"),
    ("h1", "eu"),
    ("h2", "us"),
    ("h3", "us"),
    ("h4", "ap"),
    ("h5", "eu"),
    ("h5", "us"),  # one host in two regions: two series
    ("h6", "ap"),
]
HOSTS = sorted({h for h, _ in SERIES})
REGIONS = sorted({r for _, r in SERIES})
COLUMNS = ["host", "region", "cpu", "mem", "req", "ts"]
DDL = (
    "CREATE TABLE t (host string TAG, region string TAG, cpu double, mem double, req int64, "
    "ts timestamp NOT NULL, TIMESTAMP KEY(ts)) "
    "WITH (segment_duration='1h', num_rows_per_row_group='128')"
)

Key = tuple[str, str, int]
Row = dict[str, Any]


# -- data ----------------------------------------------------------------------------------------


def _values(rng: random.Random) -> dict[str, Any]:
    return {
        "cpu": None if rng.random() < 0.1 else round(rng.uniform(0, 100), 2),
        "mem": None if rng.random() < 0.15 else round(rng.uniform(0, 64), 3),
        "req": None if rng.random() < 0.05 else rng.randrange(0, 5000),
    }


def _arrow(rows: list[Row]) -> pa.Table:
    return pa.table(
        {
            "host": pa.array([r["host"] for r in rows], pa.string()),
            "region": pa.array([r["region"] for r in rows], pa.string()),
            "cpu": pa.array([r["cpu"] for r in rows], pa.float64()),
            "mem": pa.array([r["mem"] for r in rows], pa.float64()),
            "req": pa.array([r["req"] for r in rows], pa.int64()),
            "ts": pa.array([r["ts"] for r in rows], pa.timestamp("ms")),
        }
    )


def _sql_literal(v: Any) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, str):
        return "'" + v.replace("'", "''") + "'"
    return repr(v)


def _insert_sql(rows: list[Row]) -> str:
    values = ", ".join("(" + ", ".join(_sql_literal(r[c]) for c in COLUMNS) + ")" for r in rows)
    return f"INSERT INTO t ({', '.join(COLUMNS)}) VALUES {values}"


def load(sql: SqlExecutor, rng: random.Random) -> pa.Table:
    """Writes the data set into gnomon in phases (flushed, overwritten, in the memtable,
    deleted by key and by range) and returns the rows it must hold."""
    engine = sql.tables.engine
    expected: dict[Key, Row] = {}
    keys: list[Key] = [
        (h, r, START_MS + k * STEP_MS)
        for h, r in SERIES
        for k in range(HOURS * 3_600_000 // STEP_MS)
        if rng.random() < 0.7
    ]
    rng.shuffle(keys)
    first, second, third = (
        keys[: len(keys) // 2],
        keys[len(keys) // 2 : len(keys) * 4 // 5],
        keys[len(keys) * 4 // 5 :],
    )

    def rows_for(batch: list[Key]) -> list[Row]:
        out = []
        for h, r, ts in batch:
            row = {"host": h, "region": r, "ts": ts, **_values(rng)}
            expected[(h, r, ts)] = row
            out.append(row)
        return out

    # Phase 1: half the rows, flushed to SSTs (one per hour window).
    engine.write("t", _arrow(rows_for(first)))
    engine.flush("t")
    # Phase 2: more rows plus new versions of some phase-1 rows: overlapping SSTs.
    engine.write("t", _arrow(rows_for(second + rng.sample(first, len(first) // 10))))
    engine.flush("t")
    # Phase 3: through SQL INSERT, left in the memtable, again overwriting some old rows.
    batch = rows_for(third + rng.sample(first + second, len(keys) // 20))
    for i in range(0, len(batch), 400):
        assert sql.execute(_insert_sql(batch[i : i + 400])).affected_rows == len(batch[i : i + 400])
    # Deletions by key: some rows in SSTs, some in the memtable.
    doomed = rng.sample(sorted(expected), len(expected) // 30)
    engine.delete_rows(
        "t",
        pa.table(
            {
                "host": [k[0] for k in doomed],
                "region": [k[1] for k in doomed],
                "ts": pa.array([k[2] for k in doomed], pa.timestamp("ms")),
            }
        ),
    )
    for k in doomed:
        del expected[k]
    # A range tombstone: one region over 40 minutes, across an hour boundary.
    start, end = START_MS + 3_000_000, START_MS + 5_400_000
    engine.delete_range("t", tags={"region": "us"}, time_range=(start, end))
    for k in [k for k in expected if k[1] == "us" and start <= k[2] < end]:
        del expected[k]
    return _arrow([expected[k] for k in sorted(expected)])


# -- queries -------------------------------------------------------------------------------------


@dataclass
class Query:
    gnomon: str
    duckdb: str
    #: False when the query has no total ORDER BY: rows are compared as multisets.
    ordered: bool


def _ts_literal(ms: int) -> str:
    t = dt.datetime(1970, 1, 1) + dt.timedelta(milliseconds=ms)
    return f"TIMESTAMP '{t:%Y-%m-%d %H:%M:%S}'"


def _random_ts(rng: random.Random) -> int:
    # On the sampling grid or between points, sometimes just outside the data.
    span = HOURS * 3_600_000
    return START_MS + rng.randrange(-span // 10, span + span // 10, 5_000)


class QueryGen:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def atom(self) -> tuple[str, str]:
        rng = self.rng
        same = None
        match rng.randrange(12):
            case 0:
                same = f"host = '{rng.choice(HOSTS)}'"
            case 1:
                same = f"host <> '{rng.choice(HOSTS)}'"
            case 2:
                hosts = rng.sample([*HOSTS, "nope"], rng.randrange(1, 4))
                neg = "NOT " if rng.random() < 0.3 else ""
                same = f"host {neg}IN ({', '.join(repr(h) for h in hosts)})"
            case 3:
                same = f"region = '{rng.choice(REGIONS)}'"
            case 4:
                col, hi = rng.choice([("cpu", 100), ("mem", 64)])
                op = rng.choice(["<", "<=", ">", ">="])
                same = f"{col} {op} {round(rng.uniform(0, hi), 2)}"
            case 5:
                lo = round(rng.uniform(0, 80), 1)
                same = f"cpu BETWEEN {lo} AND {lo + round(rng.uniform(0, 40), 1)}"
            case 6:
                neg = "NOT " if rng.random() < 0.5 else ""
                same = f"{rng.choice(['cpu', 'mem', 'req'])} IS {neg}NULL"
            case 7:
                same = f"req {rng.choice(['<', '>=', '='])} {rng.randrange(0, 5000)}"
            case 8:
                a, b = sorted((_random_ts(rng), _random_ts(rng)))
                same = f"ts >= {_ts_literal(a)} AND ts < {_ts_literal(b)}"
            case 9:
                # gnomon takes integer milliseconds for timestamps, DuckDB needs epoch_ms().
                ms = _random_ts(rng)
                op = rng.choice(["<", ">=", ">"])
                if rng.random() < 0.5:
                    return f"ts {op} {ms}", f"ts {op} epoch_ms({ms})"
                return f"{ms} {op} ts", f"epoch_ms({ms}) {op} ts"
            case 10:
                a, b = sorted((_random_ts(rng), _random_ts(rng)))
                between = rng.choice(["BETWEEN", "NOT BETWEEN"])
                return (
                    f"ts {between} {a} AND {b}",
                    f"ts {between} epoch_ms({a}) AND epoch_ms({b})",
                )
            case _:
                same = f"host LIKE 'h{rng.randrange(7)}%'"
        return same, same

    def predicate(self, depth: int = 0) -> tuple[str, str]:
        rng = self.rng
        r = rng.random()
        if depth >= 2 or r < 0.45:
            return self.atom()
        if r < 0.6:
            g, d = self.predicate(depth + 1)
            return f"NOT ({g})", f"NOT ({d})"
        op = "AND" if r < 0.85 else "OR"
        (g1, d1), (g2, d2) = self.predicate(depth + 1), self.predicate(depth + 1)
        return f"({g1}) {op} ({g2})", f"({d1}) {op} ({d2})"

    def where(self) -> tuple[str, str]:
        if self.rng.random() < 0.15:
            return "", ""
        g, d = self.predicate()
        return f" WHERE {g}", f" WHERE {d}"

    def limit(self) -> str:
        return f" LIMIT {self.rng.choice([1, 5, 20, 100])}" if self.rng.random() < 0.5 else ""

    def query(self) -> Query:
        kind = self.rng.randrange(8)
        return [
            self.projection,
            self.projection_by_field,
            self.group_by_tags,
            self.buckets,
            self.totals,
            self.distinct,
            self.joins,
            self.subqueries,
        ][kind]()

    def projection(self) -> Query:
        rng = self.rng
        cols = ", ".join(rng.sample(["cpu", "mem", "req"], rng.randrange(1, 4)))
        wg, wd = self.where()
        if rng.random() < 0.3:  # no ORDER BY: compared as multisets
            q = f"SELECT host, region, ts, {cols} FROM t"
            return Query(q + wg, q + wd, ordered=False)
        direction = rng.choice(["", " DESC"])
        order = f" ORDER BY host{direction}, region, ts{direction}" + self.limit()
        q = f"SELECT host, region, ts, {cols} FROM t"
        return Query(q + wg + order, q + wd + order, ordered=True)

    def projection_by_field(self) -> Query:
        rng = self.rng
        col = rng.choice(["cpu", "mem", "req"])
        direction = rng.choice(["ASC", "DESC"])
        nulls = rng.choice(["NULLS FIRST", "NULLS LAST"])
        wg, wd = self.where()
        order = f" ORDER BY {col} {direction} {nulls}, host, region, ts" + self.limit()
        q = f"SELECT host, region, ts, {col} FROM t"
        return Query(q + wg + order, q + wd + order, ordered=True)

    def aggregates(self) -> str:
        rng = self.rng
        pool = [
            "count(*)",
            "count(cpu)",
            "count(req)",
            "sum(cpu)",
            "sum(req)",
            "min(cpu)",
            "max(cpu)",
            "min(mem)",
            "max(mem)",
            "avg(cpu)",
            "avg(mem)",
            "avg(req)",
            "min(ts)",
            "max(ts)",
            "count(DISTINCT host)",
        ]
        chosen = rng.sample(pool, rng.randrange(1, 6))
        return ", ".join(f"{a} AS a{i}" for i, a in enumerate(chosen))

    def group_by_tags(self) -> Query:
        rng = self.rng
        keys = rng.choice([["host"], ["region"], ["host", "region"], ["region", "host"]])
        k = ", ".join(keys)
        wg, wd = self.where()
        having = f" HAVING count(*) > {rng.randrange(0, 600)}" if rng.random() < 0.3 else ""
        tail = f" GROUP BY {k}{having} ORDER BY {k}" + self.limit()
        q = f"SELECT {k}, {self.aggregates()} FROM t"
        return Query(q + wg + tail, q + wd + tail, ordered=True)

    def buckets(self) -> Query:
        rng = self.rng
        minutes = rng.choice([1, 5, 7, 10, 15, 30, 60, 90])
        interval = f"interval '{minutes} minutes'"
        gnomon_bucket = rng.choice(
            [f"date_bin({interval}, ts)", f"time_bucket(ts, 'PT{minutes}M')"]
        )
        duck_bucket = f"time_bucket({interval}, ts, TIMESTAMP '1970-01-01 00:00:00')"
        by_host = rng.random() < 0.4
        extra = ", host" if by_host else ""
        aggs = self.aggregates()
        wg, wd = self.where()
        tail = f" GROUP BY b{extra} ORDER BY b{extra}" + self.limit()
        return Query(
            f"SELECT {gnomon_bucket} AS b{extra}, {aggs} FROM t{wg}{tail}",
            f"SELECT {duck_bucket} AS b{extra}, {aggs} FROM t{wd}{tail}",
            ordered=True,
        )

    def totals(self) -> Query:
        wg, wd = self.where()
        q = f"SELECT {self.aggregates()} FROM t"
        return Query(q + wg, q + wd, ordered=True)

    def distinct(self) -> Query:
        wg, wd = self.where()
        tail = " ORDER BY host, region"
        q = "SELECT DISTINCT host, region FROM t"
        return Query(q + wg + tail, q + wd + tail, ordered=True)

    def joins(self) -> Query:
        """Two filtered reads of ``t`` joined: row to row on the series key, or a per-series
        answer joined to per-host aggregates (LEFT: hosts the right side filtered out)."""
        (g1, d1), (g2, d2) = self.where(), self.where()
        if self.rng.random() < 0.5:
            head = (
                "SELECT a.host, count(*) AS n, max(a.cpu - b.cpu) AS d, sum(b.req) AS r "
                "FROM (SELECT host, region, ts, cpu FROM t{}) a "
                "JOIN (SELECT host, region, ts, cpu, req FROM t{}) b "
                "ON a.host = b.host AND a.region = b.region AND a.ts = b.ts "
                "GROUP BY a.host ORDER BY a.host"
            )
        else:
            head = (
                "SELECT a.host, a.region, a.n, b.m "
                "FROM (SELECT host, region, count(*) AS n FROM t{} GROUP BY host, region) a "
                "LEFT JOIN (SELECT host, max(mem) AS m FROM t{} GROUP BY host) b "
                "ON a.host = b.host ORDER BY a.host, a.region"
            )
        tail = self.limit()
        return Query(head.format(g1, g2) + tail, head.format(d1, d2) + tail, ordered=True)

    def subqueries(self) -> Query:
        """``t`` filtered by or aggregated over a subquery of itself: IN, a scalar, a derived
        table, a correlated EXISTS."""
        rng = self.rng
        wg, wd = self.where()
        lo = round(rng.uniform(0, 100), 1)
        head = rng.choice(
            [
                "SELECT host, count(*) AS n, max(cpu) AS m FROM t "
                "WHERE host IN (SELECT host FROM t{}) GROUP BY host ORDER BY host",
                "SELECT count(*) AS n, min(ts) AS first FROM t "
                "WHERE cpu > (SELECT avg(cpu) FROM t{})",
                "SELECT region, count(*) AS series, max(m) AS top, sum(n) AS n FROM "
                "(SELECT host, region, max(cpu) AS m, count(*) AS n FROM t{} "
                "GROUP BY host, region) s GROUP BY region ORDER BY region",
                "SELECT DISTINCT host, region FROM t o WHERE EXISTS (SELECT 1 FROM t i{} "
                f"{{}}i.host = o.host AND i.cpu > {lo}) ORDER BY host, region",
            ]
        )
        if "EXISTS" in head:
            joiner = " AND " if wg else " WHERE "
            # The subquery's own filter names its columns through its alias.
            wg, wd = (w.replace(" WHERE ", " WHERE (", 1) + ")" if w else w for w in (wg, wd))
            return Query(head.format(wg, joiner), head.format(wd, joiner), ordered=True)
        return Query(head.format(wg), head.format(wd), ordered=True)


# -- comparison ----------------------------------------------------------------------------------


def _rows(table: pa.Table) -> list[tuple[Any, ...]]:
    columns = [table.column(i).to_pylist() for i in range(table.num_columns)]
    return list(zip(*columns, strict=True)) if columns else []


def _same(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, float) or isinstance(b, float):
        if isinstance(a, bool) or isinstance(b, bool):
            return False
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-9)
    return bool(a == b and type(a) is type(b))


def _sort_key(row: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple((v is None, "" if v is None else v) for v in row)


def _row_equal(g: tuple[Any, ...], w: tuple[Any, ...]) -> bool:
    return len(g) == len(w) and all(_same(a, b) for a, b in zip(g, w, strict=True))


def compare(
    q: Query, got: list[tuple[Any, ...]], want: list[tuple[Any, ...]]
) -> tuple[str, int] | None:
    """None if equal, else what differs and the index of the first row that does (rows of an
    unordered query are sorted first, as the report shows them)."""
    if not q.ordered:
        got[:] = sorted(got, key=_sort_key)
        want[:] = sorted(want, key=_sort_key)
    first = next(
        (i for i, (g, w) in enumerate(zip(got, want, strict=False)) if not _row_equal(g, w)),
        min(len(got), len(want)),
    )
    if len(got) != len(want):
        return f"{len(got)} rows from gnomon, {len(want)} from DuckDB", first
    if first < len(got):
        return f"row {first} differs: gnomon {got[first]!r}, DuckDB {want[first]!r}", first
    return None


def _show(rows: list[tuple[Any, ...]], around: int, context: int = 5) -> str:
    start = max(0, around - context)
    stop = min(len(rows), around + context + 1)
    lines = [f"    [{i}] {rows[i]!r}" for i in range(start, stop)]
    if start > 0:
        lines.insert(0, f"    ... {start} rows before")
    if stop < len(rows):
        lines.append(f"    ... {len(rows) - stop} rows after")
    return "\n".join(lines) if lines else "    (no rows)"


# -- tests ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module", params=["merge", "split", "streamed"])
def both(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[tuple[SqlExecutor, Any]]:
    # Overlapping sources are either merged or split at their overlap zones (scan.py); the
    # tiny data here would always be split, so the merge is forced once. Queries over one
    # table read small scans up front (executor.py); "streamed" makes DataFusion stream
    # every scan instead.
    limit = scan_module.SPLIT_MAX_ZONE_ROWS
    small = session_module.SMALL_SCAN_VALUES
    if request.param == "merge":
        scan_module.SPLIT_MAX_ZONE_ROWS = -1
    if request.param == "streamed":
        session_module.SMALL_SCAN_VALUES = -1
    engine = open_standalone(
        str(tmp_path_factory.mktemp("differential") / "db"),
        wal_sync="never",
        compaction_threads=0,
        gc_interval_s=0,
    )
    sql = SqlExecutor(engine)
    sql.execute(DDL)
    final = load(sql, random.Random(SEED))
    con = duckdb.connect()
    con.register("final_rows", final)
    con.execute(
        "CREATE TABLE t AS SELECT host, region, cpu, mem, req, ts::TIMESTAMP AS ts FROM final_rows"
    )
    con.unregister("final_rows")
    yield sql, con
    con.close()
    engine.close()
    scan_module.SPLIT_MAX_ZONE_ROWS = limit
    session_module.SMALL_SCAN_VALUES = small


def _duck_rows(con: Any, query: str) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in con.execute(query).fetchall()]


def test_data_set_is_the_same(both: tuple[SqlExecutor, Any]) -> None:
    sql, con = both
    order = " ORDER BY host, region, ts"
    got = _rows(sql.execute(f"SELECT {', '.join(COLUMNS)} FROM t{order}").table())
    want = _duck_rows(con, f"SELECT {', '.join(COLUMNS)} FROM t{order}")
    assert len(want) > 3000
    assert compare(Query("", "", ordered=True), got, want) is None
    # The layout the random queries run over: two SSTs per hour window, overlapping, plus
    # the memtable.
    (scan,) = sql.execute("SELECT count(*) AS n FROM t").scans
    assert scan.stats.ssts_total >= 6
    assert scan.stats.memtable_slices >= 1
    if scan_module.SPLIT_MAX_ZONE_ROWS < 0:
        assert scan.stats.merged_components >= 2 and scan.stats.split_components == 0
    else:
        assert scan.stats.split_components >= 2
    assert scan.stats.range_tombstones >= 1


def test_random_queries_agree_with_duckdb(both: tuple[SqlExecutor, Any]) -> None:
    sql, con = both
    gen = QueryGen(random.Random(SEED + 1))
    failures: list[str] = []
    for n in range(N_QUERIES):
        q = gen.query()
        got = _rows(sql.execute(q.gnomon).table())
        want = _duck_rows(con, q.duckdb)
        problem = compare(q, got, want)
        if problem is not None:
            text, at = problem
            failures.append(
                f"query {n}: {text}\n  gnomon: {q.gnomon}\n  duckdb: {q.duckdb}\n"
                f"  gnomon rows:\n{_show(got, at)}\n  DuckDB rows:\n{_show(want, at)}"
            )
    if failures:
        print("\n\n".join(failures))
    assert not failures, f"{len(failures)} of {N_QUERIES} queries differ:\n\n" + "\n\n".join(
        failures[:5]
    )


def test_bucket_functions_align_at_the_epoch(tmp_path: Path) -> None:
    """date_bin (default origin) and time_bucket(ts, period) bucket from 1970-01-01, as DuckDB's
    time_bucket does with that origin given (its default origin is 2000-01-03, which only
    agrees for widths dividing a week), before 1970 too."""
    stamps = [-3_600_001, -420_000, -1, 0, 1, 419_999, 420_000, START_MS + 123_456]
    with open_standalone(str(tmp_path / "db"), wal_sync="never") as engine:
        sql = SqlExecutor(engine)
        sql.execute("CREATE TABLE b (ts timestamp NOT NULL, TIMESTAMP KEY(ts))")
        engine.write("b", pa.table({"ts": pa.array(stamps, pa.timestamp("ms"))}))
        got = _rows(
            sql.execute(
                "SELECT ts, date_bin(interval '7 minutes', ts) AS d, "
                "time_bucket(ts, 'PT7M') AS t FROM b ORDER BY ts"
            ).table()
        )
    con = duckdb.connect()
    con.register("b", pa.table({"ts": pa.array(stamps, pa.timestamp("ms"))}))
    want = _duck_rows(
        con,
        "SELECT time_bucket(interval '7 minutes', ts::TIMESTAMP, TIMESTAMP '1970-01-01') "
        "FROM b ORDER BY ts",
    )
    epoch = dt.datetime(1970, 1, 1)
    width = 420_000
    for (ts, d, t), (duck,) in zip(got, want, strict=True):
        ms = round((ts - epoch) / dt.timedelta(milliseconds=1))
        floor = epoch + dt.timedelta(milliseconds=ms // width * width)
        assert d == t == duck == floor, (ts, d, t, duck, floor)
