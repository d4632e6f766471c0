"""Scan bounds (node/engine/bounds.py): the conditions themselves, and scans given bounds
answering exactly as scans given the same conditions as a predicate, while reading less."""

from __future__ import annotations

import random
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from gnomon.errors import InvalidArgument
from node.backends import open_standalone
from node.engine.bounds import Range, bounds_expression, intersect_all, time_window
from node.engine.engine import Engine
from node.engine.options import TableOptions
from tests.engine.conftest import CPU, cpu_batch, rows

pytestmark = pytest.mark.unit

# -- the conditions ------------------------------------------------------------------------------


def test_range_of_each_operator() -> None:
    assert Range.of("=", 3) == Range(values=frozenset([3]))
    assert Range.of("<", 3) == Range(hi=3, hi_inclusive=False)
    assert Range.of("<=", 3) == Range(hi=3)
    assert Range.of(">", 3) == Range(lo=3, lo_inclusive=False)
    assert Range.of(">=", 3) == Range(lo=3)
    with pytest.raises(ValueError):
        Range.of("<>", 3)


def test_intersect_keeps_the_tighter_side_and_common_values() -> None:
    r = Range.of(">=", 2).intersect(Range.of(">", 2)).intersect(Range.of("<", 9))
    assert r == Range(lo=2, lo_inclusive=False, hi=9, hi_inclusive=False)
    r = Range(values=frozenset("abc")).intersect(Range(values=frozenset("bcd")))
    assert r.values == frozenset("bc")
    assert intersect_all(
        [("a", Range.of(">", 1)), ("b", Range.of("=", 2)), ("a", Range.of("<", 5))]
    ) == {
        "a": Range(lo=1, lo_inclusive=False, hi=5, hi_inclusive=False),
        "b": Range(values=frozenset([2])),
    }


def test_admits() -> None:
    r = Range(lo=1, lo_inclusive=False, hi=5, values=frozenset([1, 3, 5, 7]))
    assert [v for v in range(9) if r.admits(v)] == [3, 5]
    assert not r.admits(None)


def test_overlaps_judges_value_ranges_vectorised() -> None:
    mins = np.array([0, 10, 20, 30])
    maxs = np.array([9, 19, 29, 39])
    assert Range.of(">", 19).overlaps(mins, maxs).tolist() == [False, False, True, True]
    assert Range.of("<=", 10).overlaps(mins, maxs).tolist() == [True, True, False, False]
    assert Range(values=frozenset([5, 31])).overlaps(mins, maxs).tolist() == [
        True, False, False, True,
    ]  # fmt: skip
    names = np.array(["a", "d", "m"], dtype=object)
    upper = np.array(["c", "k", "z"], dtype=object)
    assert Range(values=frozenset(["e"])).overlaps(names, upper).tolist() == [False, True, False]
    # Values the range excludes rule nothing in.
    assert not Range(hi=4, values=frozenset([35])).overlaps(mins, maxs).any()


def test_meets_judges_one_value_range_as_overlaps_does() -> None:
    rng = random.Random(7)
    for _ in range(300):
        lo, hi = sorted(rng.sample(range(20), 2))
        r = Range(
            lo=rng.choice([None, lo]),
            lo_inclusive=rng.random() < 0.5,
            hi=rng.choice([None, hi]),
            hi_inclusive=rng.random() < 0.5,
            values=rng.choice([None, frozenset(rng.sample(range(20), 3))]),
        )
        a, b = sorted(rng.choices(range(22), k=2))
        assert r.meets(a, b) == bool(r.overlaps(np.array([a]), np.array([b]))[0]), (r, a, b)


def test_time_window_in_half_open_milliseconds() -> None:
    assert time_window(Range(lo=10, lo_inclusive=False, hi=20)) == (11, 21)
    assert time_window(Range(values=frozenset([5, 9]))) == (5, 10)
    assert time_window(Range(lo=7, values=frozenset([5, 9]))) == (7, 10)


def test_expression_filters_like_the_bounds() -> None:
    schema = pa.schema([("h", pa.string()), ("v", pa.float64()), ("t", pa.timestamp("ms"))])
    table = pa.table(
        {
            "h": ["a", "b", None, "a"],
            "v": [1.0, 2.5, 3.0, float("nan")],
            "t": pa.array([1, 2, 3, 4], pa.timestamp("ms")),
        },
        schema=schema,
    )
    bounds = {
        "h": Range(values=frozenset(["a", "b"])),
        "v": Range(lo=1.0, lo_inclusive=False),
        "t": Range(hi=3),
    }
    expr = bounds_expression(bounds, schema)
    assert expr is not None
    assert table.filter(expr).column("v").to_pylist() == [2.5]
    assert bounds_expression({}, schema) is None


def _random_column(rng: random.Random, kind: str, n: int) -> pa.Array:
    def maybe(v: object) -> object:
        return None if rng.random() < 0.1 else v

    if kind == "string":
        return pa.array([maybe(rng.choice("abcde")) for _ in range(n)], pa.string())
    if kind == "dictionary":
        return pa.array(
            [maybe(rng.choice("abcde")) for _ in range(n)], pa.string()
        ).dictionary_encode()
    if kind == "double":
        pool = [-1.5, 0.0, 2.0, 2.5, float("nan"), 7.0]
        return pa.array([maybe(rng.choice(pool)) for _ in range(n)], pa.float64())
    if kind == "float32":
        pool = [-1.5, 0.0, 2.0, 2.5, float("nan"), 7.0]
        return pa.array([maybe(rng.choice(pool)) for _ in range(n)], pa.float32())
    if kind == "int64":
        return pa.array([maybe(rng.randint(-3, 3)) for _ in range(n)], pa.int64())
    if kind == "uint8":
        return pa.array([maybe(rng.randint(0, 9)) for _ in range(n)], pa.uint8())
    return pa.array([maybe(rng.randint(0, 9)) for _ in range(n)], pa.timestamp("ms"))


def _random_range(rng: random.Random, kind: str) -> Range:
    pool: list[object] = (
        list("abcdef")
        if kind in ("string", "dictionary")
        else [-1.5, 0.0, 2.0, 2.5, 7.0]
        if kind in ("double", "float32")
        else list(range(10))
        if kind == "uint8"
        else list(range(-3, 10))
    )
    return Range(
        lo=rng.choice(pool) if rng.random() < 0.5 else None,
        lo_inclusive=rng.random() < 0.5,
        hi=rng.choice(pool) if rng.random() < 0.5 else None,
        hi_inclusive=rng.random() < 0.5,
        values=frozenset(rng.sample(pool, rng.randint(0, 3))) if rng.random() < 0.5 else None,
    )


@pytest.mark.parametrize(
    "kind", ["string", "dictionary", "double", "float32", "int64", "uint8", "timestamp"]
)
def test_mask_selects_what_the_expression_selects(kind: str) -> None:
    # Columns with nulls and without: numeric ones without are judged in numpy.
    rng = random.Random(kind)
    for _ in range(200):
        column = _random_column(rng, kind, rng.randint(0, 12))
        r = _random_range(rng, kind)
        table = pa.table({"c": column, "i": pa.array(range(len(column)), pa.int64())})
        # Scans build the expression from the storage schema: tags as plain strings.
        typ = column.type.value_type if kind == "dictionary" else column.type
        expected = table.filter(r.expression("c", typ)).column("i")
        got = table.filter(pa.array(r.mask(column))).column("i")
        assert got.equals(expected), (r, column)
        chunked = pa.chunked_array(
            [column.slice(0, len(column) // 2), column.slice(len(column) // 2)]
        )
        got = table.filter(pa.array(r.mask(chunked))).column("i")
        assert got.equals(expected), (r, column)


# -- scans with bounds ---------------------------------------------------------------------------


@pytest.fixture
def many_groups(data_dir: str) -> Iterator[Engine]:
    """Four flushed SSTs of 20 hosts, 64 rows per row group, plus rows in the memtable."""
    e = open_standalone(data_dir, compaction_threads=0, gc_interval_s=0)
    e.create_table("cpu", CPU, TableOptions(num_rows_per_row_group=64))
    rng = random.Random(5)
    for part in range(4):
        hosts = [f"h{i:02d}" for i in range(20) for _ in range(30)]
        ts = [part * 100_000 + k * 1000 for _ in range(20) for k in range(30)]
        usage = [rng.uniform(0, 100) for _ in hosts]
        e.write("cpu", cpu_batch(hosts, ts, usage))
        e.flush()
    e.write("cpu", cpu_batch(["h03", "h07"], [400_000, 400_000], [50.0, 99.5]))
    yield e
    e.close()


CASES = [
    {"host": Range(values=frozenset(["h03"]))},
    {"host": Range(values=frozenset(["h03", "h17"])), "ts": Range(lo=110_000, hi=229_000)},
    {"ts": Range(lo=150_000, lo_inclusive=False, hi=300_000, hi_inclusive=False)},
    {"usage": Range(lo=90.0, lo_inclusive=False)},
    {"usage": Range(lo=90.0, lo_inclusive=False), "host": Range(lo="h05", hi="h09")},
    {"ts": Range(values=frozenset([0, 400_000])), "host": Range(values=frozenset(["h07"]))},
    {"host": Range(values=frozenset(["nobody"]))},
]


@pytest.mark.parametrize("bounds", CASES, ids=range(len(CASES)))
def test_bounds_answer_as_the_same_predicate(many_groups: Engine, bounds: dict[str, Range]) -> None:
    predicate = bounds_expression(bounds, CPU.arrow())
    cols = ["host", "ts", "usage"]
    by_predicate = many_groups.read_all("cpu", columns=cols, predicate=predicate)
    scan = many_groups.plan_scan("cpu", columns=cols, bounds=bounds)
    by_bounds = pa.Table.from_batches(list(scan), schema=by_predicate.schema)
    assert rows(by_bounds) == rows(by_predicate)
    assert scan.stats.row_groups_read <= scan.stats.row_groups_total


def test_bounds_prune_row_groups_series_and_files(many_groups: Engine) -> None:
    whole = many_groups.plan_scan("cpu", columns=["usage"])
    list(whole)
    scan = many_groups.plan_scan(
        "cpu",
        columns=["usage"],
        bounds={"host": Range(values=frozenset(["h03"])), "ts": Range(lo=100_000, hi=129_000)},
    )
    estimated = scan.estimated_rows()
    got = pa.Table.from_batches(list(scan))
    assert got.num_rows == 30
    assert scan.stats.ssts_read == 1 and whole.stats.ssts_read == 4
    # A host's 30 rows lie in one row group of 64 rows, or straddle two.
    assert scan.stats.row_groups_read <= 2 < whole.stats.row_groups_read
    assert 30 <= estimated <= 128


def test_bounds_and_predicate_together(many_groups: Engine) -> None:
    predicate = pc.field("usage") > 50.0
    bounds = {"host": Range(values=frozenset(["h01", "h02"]))}
    scan = many_groups.plan_scan(
        "cpu", columns=["host", "usage"], predicate=predicate, bounds=bounds
    )
    got = pa.Table.from_batches(list(scan))
    assert got.num_rows > 0
    assert set(got.column("host").to_pylist()) <= {"h01", "h02"}
    assert min(got.column("usage").to_pylist()) > 50.0


def test_bounds_on_an_unknown_column_are_refused(many_groups: Engine) -> None:
    with pytest.raises(InvalidArgument, match="nope"):
        many_groups.plan_scan("cpu", bounds={"nope": Range.of("=", 1)})


def test_bounds_on_a_column_older_files_lack(data_dir: str) -> None:
    """A bound on a column added after some SSTs were written, the column not returned: those
    SSTs read it as null (which no bound admits), the newer ones filter on it."""
    from node.sql.executor import SqlExecutor

    e = open_standalone(data_dir, compaction_threads=0, gc_interval_s=0)
    try:
        sql = SqlExecutor(e)
        sql.execute("CREATE TABLE m (host string TAG, ts timestamp NOT NULL, TIMESTAMP KEY(ts))")
        sql.execute("INSERT INTO m (host, ts) VALUES ('a', 1), ('b', 2)")
        e.flush()
        sql.execute("ALTER TABLE m ADD COLUMN x int64")
        sql.execute("INSERT INTO m (host, ts, x) VALUES ('c', 3, 5), ('d', 4, 7)")
        e.flush()
        for bound, hosts in [(Range.of("=", 5), ["c"]), (Range.of("<", 10), ["c", "d"])]:
            got = pa.Table.from_batches(
                list(e.plan_scan("m", columns=["host"], bounds={"x": bound}))
            )
            assert got.column_names == ["host"]
            assert sorted(got.column("host").to_pylist()) == hosts
    finally:
        e.close()


def test_covers() -> None:
    below_20 = Range(lo=0, hi=20, hi_inclusive=False)
    assert [below_20.covers(lo, hi) for lo, hi in [(0, 9), (10, 19), (20, 29), (-1, 5)]] == [
        True, True, False, False,
    ]  # fmt: skip
    ten = Range(values=frozenset([10]))
    assert ten.covers(10, 10)
    assert not ten.covers(10, 11)
    assert not Range(values=frozenset([10, 11])).covers(10, 11)  # 10.5 may lie between


def test_files_covered_by_bounds_are_read_unfiltered(data_dir: str) -> None:
    e = open_standalone(data_dir, compaction_threads=0, gc_interval_s=0)
    e.create_table("cpu", CPU, TableOptions(num_rows_per_row_group=64))
    e.write("cpu", cpu_batch(["a", "b"] * 50, list(range(0, 100_000, 1000)), [1.0] * 100))
    e.flush()
    # A second file with a null tag and a NaN field.
    e.write(
        "cpu",
        pa.table(
            {
                "host": pa.array(["a", None], pa.string()),
                "region": ["eu", "eu"],
                "usage": [float("nan"), 2.0],
                "ts": pa.array([200_000, 201_000], pa.timestamp("ms")),
            }
        ),
    )
    e.flush()
    first, second = sorted(
        (f for f in e.table("cpu").pin().version.files if f.is_data), key=lambda f: f.min_ts
    )
    files = e.table("cpu").sst_files
    groups = list(range(files.footer(first.path).num_row_groups))
    assert files.covered(first.path, {"ts": Range(lo=0, hi=100_000, hi_inclusive=False)}, groups)
    assert not files.covered(first.path, {"ts": Range(lo=1, hi=100_000)}, groups)
    assert files.covered(first.path, {"region": Range(values=frozenset(["eu"]))}, groups)
    # Floats may hide NaN from statistics, and a null never satisfies a bound.
    assert not files.covered(first.path, {"usage": Range(lo=0.0)}, groups)
    assert not files.covered(second.path, {"host": Range(lo="a")}, [0])
    # Whatever is covered, the answers are those of the same conditions as a predicate.
    for bounds in (
        {"ts": Range(lo=0, hi=300_000)},
        {"host": Range(lo="a")},
        {"usage": Range(lo=0.0)},
        {"region": Range(values=frozenset(["eu"])), "ts": Range(hi=150_000)},
    ):
        predicate = bounds_expression(bounds, CPU.arrow())
        want = e.read_all("cpu", columns=["host", "ts", "usage"], predicate=predicate)
        scan = e.plan_scan("cpu", columns=["host", "ts", "usage"], bounds=bounds)
        got = pa.Table.from_batches(list(scan), schema=want.schema)
        # repr: rows hold a null tag and a NaN, which neither sort nor compare equal.
        assert sorted(map(repr, got.to_pylist())) == sorted(map(repr, want.to_pylist())), bounds
    e.close()


def test_bounds_on_memtable_rows_older_than_a_column(data_dir: str) -> None:
    """Rows still in the memtable from before a column was added: a bound on the new column
    admits none of them."""
    from node.sql.executor import SqlExecutor

    e = open_standalone(data_dir, compaction_threads=0, gc_interval_s=0)
    try:
        sql = SqlExecutor(e)
        sql.execute("CREATE TABLE m (host string TAG, ts timestamp NOT NULL, TIMESTAMP KEY(ts))")
        sql.execute("INSERT INTO m (host, ts) VALUES ('a', 1), ('b', 2)")
        sql.execute("ALTER TABLE m ADD COLUMN x int64")
        sql.execute("INSERT INTO m (host, ts, x) VALUES ('c', 3, 5), ('d', 4, 7)")
        for bound, hosts in [(Range.of("=", 5), ["c"]), (Range.of("<", 10), ["c", "d"])]:
            scan = e.plan_scan("m", columns=["host"], bounds={"x": bound})
            got = pa.Table.from_batches(list(scan))
            assert sorted(got.column("host").to_pylist()) == hosts
            assert scan.stats.memtable_slices >= 1
    finally:
        e.close()


@pytest.mark.parametrize("runs", [True, False], ids=["long-runs", "scattered"])
def test_kept_rows_equal_the_filter(runs: bool) -> None:
    """Kept rows are sliced when they come in long runs and filtered otherwise; either way
    they are exactly the marked rows, across chunk boundaries."""
    from node.engine.sst.reader import kept

    rng = np.random.default_rng(3)
    n = 5000
    table = pa.concat_tables(
        [
            pa.table({"v": np.arange(lo, lo + 1000), "s": [str(i) for i in range(lo, lo + 1000)]})
            for lo in range(0, n, 1000)
        ]
    )
    if runs:
        keep = np.zeros(n, dtype=bool)
        for lo in (0, 900, 2500, 4700):
            keep[lo : lo + 300] = True
    else:
        keep = rng.random(n) < 0.3
    got = kept(table, keep)
    assert got.to_pydict() == table.filter(pa.array(keep)).to_pydict()
    # Slices share the source's buffers; a filter copies.
    shared = got.column("v").chunk(0).buffers()[1].address == (
        table.column("v").chunk(0).buffers()[1].address
    )
    assert shared == runs
    assert kept(table, np.zeros(n, dtype=bool)).num_rows == 0
