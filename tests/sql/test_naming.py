"""Answer column names per protocol (node/sql/naming.py): gnomon's, and HoraeDB's for the
HoraeDB SDK's gRPC SqlQuery."""

from __future__ import annotations

import pyarrow as pa
import pytest

from node.sql import naming
from node.sql.executor import SqlExecutor

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("query", "gnomon", "horaedb"),
    [
        ("SELECT sum(v), count(*) FROM t", ["sum(t.v)", "count(*)"], ["SUM(t.v)", "COUNT(*)"]),
        (
            "SELECT count(DISTINCT host), min(v) - max(v) FROM t",
            ["count(DISTINCT t.host)", "min(t.v) - max(t.v)"],
            ["COUNT(DISTINCT t.host)", "MIN(t.v) - MAX(t.v)"],
        ),
        ("SELECT 1, 'a', TRUE", ["1", "'a'", "TRUE"], ["Int64(1)", 'Utf8("a")', "Boolean(true)"]),
        ("SELECT (10 - 2) * 3", ["(10 - 2) * 3"], ["Int64(10) - Int64(2) * Int64(3)"]),
        (
            "SELECT v % 3, max(v) AS m FROM t GROUP BY v % 3 ORDER BY m LIMIT 5",
            ["v % 3", "m"],
            ["t.v % Int64(3)", "m"],
        ),
        (
            "SELECT time_bucket(ts, 'PT1H') FROM t",
            ["time_bucket(ts, 'PT1H')"],
            ['time_bucket(t.ts,Utf8("PT1H"))'],
        ),
        (
            "SELECT time_bucket(ts, 'PT1H', 'yyyy-MM-dd HH:mm:ss', '+0800') FROM t",
            ["time_bucket(ts, 'PT1H', 'yyyy-MM-dd HH:mm:ss', '+0800')"],
            ['time_bucket(t.ts,Utf8("PT1H"),Utf8("yyyy-MM-dd HH:mm:ss"),Utf8("+0800"))'],
        ),
        # Grouped under one DISTINCT aggregate, HoraeDB's DataFusion qualified the group
        # columns; not with other aggregates beside it, nor under an alias.
        (
            "SELECT host, count(DISTINCT v) FROM t GROUP BY host HAVING count(DISTINCT v) > 0",
            ["host", "count(DISTINCT t.v)"],
            ["t.host", "COUNT(DISTINCT t.v)"],
        ),
        (
            "SELECT host, count(DISTINCT v), sum(v) FROM t GROUP BY host",
            ["host", "count(DISTINCT t.v)", "sum(t.v)"],
            ["host", "COUNT(DISTINCT t.v)", "SUM(t.v)"],
        ),
        ("SELECT host AS h, count(DISTINCT v) AS n FROM t GROUP BY host", ["h", "n"], None),
        # A user's alias and a user-defined aggregate keep their names.
        ("SELECT sum(v) AS total, host FROM t GROUP BY host", ["total", "host"], None),
        ("SELECT 'count(' AS x, v FROM t", ["x", "v"], None),
    ],
)
def test_gnomon_and_horaedb_names(
    executor: SqlExecutor, query: str, gnomon: list[str], horaedb: list[str] | None
) -> None:
    result = executor.execute(query)
    assert result.table().column_names == gnomon
    named = naming.horaedb(result.table(), result.expressions)
    assert named.column_names == (horaedb or gnomon)
    assert named.to_pylist() == [
        dict(zip(named.column_names, r.values(), strict=True)) for r in result.table().to_pylist()
    ]
    # A node receiving the HoraeDB-named answer for another interface gets gnomon's names.
    assert naming.restored(named).column_names == gnomon
    assert naming.restored(named).schema.equals(result.table().schema, check_metadata=True)


def test_horaedb_name_leaves_quoted_text_and_other_functions() -> None:
    assert naming.horaedb_name('count(t.a),Utf8("sum(x)")') == 'COUNT(t.a),Utf8("sum(x)")'
    assert naming.horaedb_name("thetasketch_distinct(t.v)") == "thetasketch_distinct(t.v)"
    assert naming.horaedb_name("t.max(") == "t.max("
    assert naming.horaedb_name("abs(avg(t.v))") == "abs(AVG(t.v))"


def test_restored_keeps_other_metadata() -> None:
    table = pa.table({"sum(t.v)": pa.array([1.0])}).cast(
        pa.schema([pa.field("sum(t.v)", pa.float64(), metadata={b"k": b"v"})])
    )
    named = naming.horaedb(table, {})
    assert named.schema.field(0).name == "SUM(t.v)"
    back = naming.restored(named).schema.field(0)
    assert (back.name, back.metadata) == ("sum(t.v)", {b"k": b"v"})
