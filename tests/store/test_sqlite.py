"""SqliteStore: the conformance suite plus SQLite-specific behaviour (on-disk layout, lock
conflicts, several processes on one file, filter translation against the reference)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gnomon.errors import Conflict, InvalidArgument, SchemaMismatch
from gnomon.store.api import Row, TableContext, run_with_retries
from gnomon.store.filters import And, Eq, Filter, In, Not, Or, Range, matches
from gnomon.store.spec import spec
from gnomon.store.sqlite import SqliteStore

# The suite's asserts live in another module: have pytest rewrite them for readable failures.
pytest.register_assert_rewrite(f"{__package__}.conformance")

from .conformance import (  # noqa: E402
    ITEMS,
    KV,
    LONG_MAX,
    LONG_MIN,
    Rollback,
    StoreConformance,
    StoreFactory,
    increment,
    read_row,
    write_rows,
)


@pytest.fixture
def store_factory(tmp_path: Path) -> Iterator[StoreFactory]:
    opened: list[SqliteStore] = []

    def factory(name: str = "main") -> SqliteStore:
        store = SqliteStore(str(tmp_path / "stores" / f"{name}.db"))
        opened.append(store)
        return store

    yield factory
    for store in opened:
        store.close()


class TestSqliteConformance(StoreConformance):
    pass


# -- SQLite specifics ---------------------------------------------------------------------------


def test_layout_on_disk(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "dir" / "g.db"
    store = SqliteStore(str(path))
    store.create(ITEMS)
    store.close()
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        (spec_json,) = conn.execute(
            "SELECT spec FROM gnomon_catalog WHERE name = 'items'"
        ).fetchone()
        assert '"primary_key": ["k"]' in spec_json
        tables = conn.execute(
            "SELECT sql FROM sqlite_master WHERE type = 'table' AND name LIKE 't%'"
        ).fetchall()
        assert len(tables) == 1
        assert "PRIMARY KEY" in tables[0][0] and "WITHOUT ROWID" in tables[0][0]
        indexes = conn.execute(
            "SELECT sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL"
        ).fetchall()
        assert [sql for (sql,) in indexes if '("s")' in sql] != []
    finally:
        conn.close()


def test_plain_file_path_required(tmp_path: Path) -> None:
    for bad in ["", ":memory:", f"file:{tmp_path}/x.db?mode=memory"]:
        with pytest.raises(InvalidArgument):
            SqliteStore(bad)


def test_field_names_differing_only_in_case_are_rejected(tmp_path: Path) -> None:
    store = SqliteStore(str(tmp_path / "g.db"))
    try:
        with pytest.raises(InvalidArgument, match="'Name'"):
            store.create(spec("t", [("k", "string"), ("name", "string"), ("Name", "long")], ["k"]))
        assert not store.exists("t")
    finally:
        store.close()


@pytest.mark.parametrize(
    ("row", "field"),
    [
        ({"k": "a", "d": float("nan")}, "d"),
        ({"k": "a", "d": 2**64}, "d"),
        ({"k": "a", "s": "\ud800"}, "s"),
        ({"k": "\udfff"}, "k"),
    ],
    ids=repr,
)
def test_values_sqlite_cannot_hold_are_rejected(tmp_path: Path, row: Row, field: str) -> None:
    store = SqliteStore(str(tmp_path / "g.db"))
    try:
        store.create(spec("t", [("k", "string"), ("d", "double"), ("s", "string")], ["k"]))
        with pytest.raises(SchemaMismatch, match=f"'{field}'"):
            write_rows(store, "t", [row])
    finally:
        store.close()


def test_context_is_unusable_after_its_transaction(tmp_path: Path) -> None:
    store = SqliteStore(str(tmp_path / "g.db"))
    try:
        store.create(KV)
        table = store.transact(lambda ctx: ctx.table("kv"))
        with pytest.raises(InvalidArgument, match="transaction"):
            table.write({"k": "a", "v": 1})
    finally:
        store.close()


def test_held_write_lock_is_a_retryable_conflict(tmp_path: Path) -> None:
    path = tmp_path / "g.db"
    store = SqliteStore(str(path), busy_timeout_s=0.05)
    blocker = sqlite3.connect(path, isolation_level=None)
    try:
        store.create(KV)
        blocker.execute("BEGIN IMMEDIATE")
        with pytest.raises(Conflict) as info:
            store.transact(increment("kv", "c"))
        assert info.value.retryable
        with pytest.raises(Conflict):
            store.drop("kv")
        # WAL readers are not blocked by the writer.
        assert store.exists("kv")
        blocker.execute("ROLLBACK")
        run_with_retries(store, increment("kv", "c"))
        assert read_row(store, "kv", {"k": "c"}) == {"k": "c", "v": 1, "note": None}
    finally:
        blocker.close()
        store.close()


_WORKER = textwrap.dedent(
    """
    import sys

    from gnomon.store.api import run_with_retries
    from gnomon.store.sqlite import SqliteStore

    def increment(ctx):
        t = ctx.table("kv")
        row = t.read({"k": "counter"})
        t.write({"k": "counter", "v": (row["v"] if row else 0) + 1})

    store = SqliteStore(sys.argv[1])
    for _ in range(int(sys.argv[2])):
        run_with_retries(store, increment, attempts=1000)
    store.close()
    """
)


def test_processes_incrementing_one_counter_lose_no_updates(tmp_path: Path) -> None:
    processes, increments = 4, 50
    path = str(tmp_path / "shared.db")
    store = SqliteStore(path)
    try:
        store.create(KV)
        workers = [
            subprocess.Popen([sys.executable, "-c", _WORKER, path, str(increments)])
            for _ in range(processes)
        ]
        try:
            codes = [w.wait(timeout=60) for w in workers]
        finally:
            for w in workers:
                if w.poll() is None:
                    w.kill()
        assert codes == [0] * processes
        assert read_row(store, "kv", {"k": "counter"}) == {
            "k": "counter",
            "v": processes * increments,
            "note": None,
        }
    finally:
        store.close()


# -- filter translation against filters.matches ------------------------------------------------

PROP = spec(
    "prop",
    [("k", "long"), ("s", "string"), ("i", "long"), ("d", "double"), ("b", "bytes")],
    ["k"],
)

# Small domains so that equalities and ranges often hit; plus some arbitrary values and extremes.
_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "k": st.integers(-3, 3),
    "s": st.one_of(
        st.sampled_from(["", "a", "ab", "b", "é", "\x00"]),
        st.text(st.characters(codec="utf-8"), max_size=3),
    ),
    "i": st.one_of(st.integers(-3, 3), st.sampled_from([LONG_MIN, LONG_MAX])),
    "d": st.one_of(
        st.sampled_from([float("-inf"), -1.5, -0.0, 0.0, 1.0, 2.5, float("inf")]),
        st.floats(allow_nan=False),
    ),
    "b": st.one_of(st.sampled_from([b"", b"\x00", b"a", b"ab"]), st.binary(max_size=2)),
}

_ROWS = st.lists(
    st.fixed_dictionaries(
        {f: v if f == "k" else st.one_of(st.none(), v) for f, v in _VALUES.items()}
    ),
    max_size=8,
    unique_by=lambda r: r["k"],
)


def _leaf(field: str) -> st.SearchStrategy[Filter]:
    value = _VALUES[field]
    # Ints compared with the double field exercise mixed numeric comparisons.
    if field == "d":
        value = st.one_of(value, st.integers(-3, 3))
    nullable = st.one_of(st.none(), value)
    return st.one_of(
        st.builds(Eq, st.just(field), nullable),
        st.builds(Range, st.just(field), nullable, nullable, st.booleans(), st.booleans()),
        st.builds(In, st.just(field), st.frozensets(nullable, max_size=3)),
    )


_FILTERS: st.SearchStrategy[Filter] = st.recursive(
    st.sampled_from(list(_VALUES)).flatmap(_leaf),
    lambda inner: st.one_of(
        st.builds(Not, inner),
        st.builds(And, st.lists(inner, max_size=3).map(tuple)),
        st.builds(Or, st.lists(inner, max_size=3).map(tuple)),
    ),
    max_leaves=8,
)


@pytest.fixture(scope="module")
def prop_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SqliteStore]:
    store = SqliteStore(str(tmp_path_factory.mktemp("prop") / "g.db"))
    store.create(PROP)
    yield store
    store.close()


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=_ROWS, flt=_FILTERS)
def test_filter_translation_agrees_with_matches(
    prop_store: SqliteStore, rows: list[Row], flt: Filter
) -> None:
    got: list[Row] = []

    def fn(ctx: TableContext) -> None:
        t = ctx.table("prop")
        for row in rows:
            t.write(row)
        got.extend(t.scan(filter=flt))
        # Rolled back so that every example starts from an empty table, without a commit.
        raise Rollback

    with pytest.raises(Rollback):
        prop_store.transact(fn)
    assert got == sorted((r for r in rows if matches(flt, r)), key=lambda r: r["k"])
