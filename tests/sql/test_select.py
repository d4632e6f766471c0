"""The tree of a SELECT (node/sql/select.py): what it models, and what it marks for its
readers to decline."""

from __future__ import annotations

import pytest

from node.sql.lexer import tokenize
from node.sql.select import Bucket, Call, Column, OrderKey, Select, Table, read

pytestmark = pytest.mark.unit


def _read(sql: str) -> Select:
    return read(tokenize(sql))


def test_items_from_group_order_and_limit() -> None:
    sql = (
        "SELECT date_bin(INTERVAL '5 minutes', m.ts) AS b, max(v) AS hi, count(*) AS k, host, "
        "v + 1 AS w FROM m WHERE ts >= 0 GROUP BY b ORDER BY b DESC NULLS LAST LIMIT 3;"
    )
    tokens = tokenize(sql)
    tree = read(tokens)
    bucket, hi, k, host, w = tree.items
    assert bucket.expression == Bucket(4, Column("ts", "m")) and bucket.alias == "b"
    assert tokens[4].text == "5 minutes"
    assert (hi.expression, hi.alias) == (Call("max", Column("v")), "hi")
    assert (k.expression, k.alias) == (Call("count", None), "k")
    assert (host.expression, host.alias) == (Column("host"), None)
    assert (w.expression, w.alias) == (None, "w")
    (table,) = tree.tables or ()
    assert table == Table("m", None, table.at) and tokens[table.at].text == "m"
    assert tree.group_by == (Column("b"),)
    (group,) = tree.group_spans
    assert [t.text for t in tokens[slice(*group)]] == ["b"]
    (order,) = tree.order_by
    assert order == OrderKey(order.span, Column("b"), True, False)
    assert [t.text for t in tokens[slice(*order.span)]] == ["b"]
    assert tree.limited and tree.limit_at is not None and tokens[tree.limit_at].text == "3"
    assert not (tree.nested or tree.other or tree.distinct or tree.star)
    assert tree.from_alone("m") == table and tree.from_alone("n") is None


def test_where_terms() -> None:
    sql = (
        "SELECT v FROM m AS x WHERE (5 <= x.n AND (v BETWEEN -1.5 AND 2)) AND host IN ('a', 'b')"
        " AND ts < to_timestamp_millis(9) AND lower(host) = 'a' AND v > n"
    )
    tokens = tokenize(sql)
    tree = read(tokens)
    assert tree.tables == (Table("m", "x", 3),)
    tests = [term.test for term in tree.where]
    assert tests[4:] == [None, None]
    n, v, host, ts = tests[:4]
    assert n is not None and (n.column, n.op) == (Column("n", "x"), ">=")
    assert v is not None and (v.column, v.op, len(v.literals)) == (Column("v"), "BETWEEN", 2)
    assert host is not None and [tokens[a].text for a, _ in host.literals] == ["a", "b"]
    assert ts is not None and (ts.column, ts.op) == (Column("ts"), "<")
    a, b = ts.literals[0]
    assert [t.text for t in tokens[a:b]] == ["to_timestamp_millis", "(", "9", ")"]


@pytest.mark.parametrize(
    "where", ["host = 'a' OR v > 1", "(host = 'a' OR v > 1)", "host NOT IN ('a')", "v > 1 + 1"]
)
def test_terms_it_holds_opaque(where: str) -> None:
    (term,) = _read(f"SELECT v FROM m WHERE {where}").where
    assert term.test is None


@pytest.mark.parametrize(
    ("sql", "nested", "other", "tables"),
    [
        ("SELECT v FROM m JOIN n ON m.a = n.a", False, False, None),
        ("SELECT v FROM (SELECT v FROM m)", True, False, None),
        ("SELECT v FROM m WHERE v IN (SELECT v FROM n)", True, False, None),
        ("SELECT v FROM m UNION ALL SELECT v FROM n", True, False, None),
        ("WITH x AS (SELECT 1) SELECT * FROM x", True, False, None),
        ("SELECT v FROM m VERSION AS OF 3", False, False, None),
        ("SELECT v FROM m, n", False, False, (Table("m", None, 3), Table("n", None, 5))),
        ("SELECT host FROM m GROUP BY host HAVING count(*) > 1", False, True, ()),
        ("SELECT v FROM m LIMIT 1 + 1", False, True, ()),
        ("SELECT v FROM m LIMIT 1 OFFSET 2", False, False, ()),
        ("SELECT v FROM m; SELECT v FROM m", True, True, None),
    ],
)
def test_what_it_does_not_model_is_marked(
    sql: str, nested: bool, other: bool, tables: tuple[Table, ...] | None
) -> None:
    tree = _read(sql)
    assert (tree.nested, tree.other) == (nested, other)
    if tables == ():
        assert tree.tables is not None
    else:
        assert tree.tables == tables


def test_clause_words_inside_expressions_start_no_clause() -> None:
    tree = _read(
        "SELECT extract(hour FROM ts) AS h FROM m WHERE a IS NOT DISTINCT FROM b "
        "AND v > 1 ORDER BY h"
    )
    assert tree.tables == (Table("m", None, 10),)
    assert [term.test is not None for term in tree.where] == [False, True]
    assert [(key.expression, key.descending, key.nulls_first) for key in tree.order_by] == [
        (Column("h"), False, None)
    ]


def test_names_and_stars_of_the_whole_statement() -> None:
    tree = _read("SELECT count(*) AS k FROM m WHERE v IN (SELECT n FROM other)")
    assert {"k", "m", "v", "n", "other"} <= tree.names
    assert not tree.star
    assert _read("SELECT m.* FROM m").star
    assert _read("SELECT v FROM m NATURAL JOIN n").star


@pytest.mark.parametrize(
    ("sql", "items"),
    [
        ("WITH x AS (SELECT 1) SELECT 2, v AS w FROM x", ["2", "v"]),
        ("SELECT 1, [2, 3] UNION SELECT 4", ["1", "[ 2 , 3 ]"]),
        ("SELECT ALL 'a'; SELECT 2", ["a"]),
        ("SELECT DISTINCT ON (v) v, 1 FROM m", []),
        ("(SELECT 1) UNION (SELECT 2)", []),
    ],
)
def test_items_of_the_outermost_select_of_any_statement(sql: str, items: list[str]) -> None:
    """Items are read where the tree holds nothing else (nested, other): the rewrite names
    a statement's unnamed items from them."""
    tokens = tokenize(sql)
    tree = read(tokens)
    assert [" ".join(t.text for t in tokens[slice(*item.span)]) for item in tree.items] == items
