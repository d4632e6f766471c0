"""SqliteStore: the conformance suite plus SQLite-specific behaviour (on-disk layout, names and
values SQLite cannot hold, lock conflicts)."""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from gnomon.errors import Conflict, InvalidArgument, SchemaMismatch
from gnomon.store.api import Row, run_with_retries
from gnomon.store.spec import spec
from gnomon.store.sqlite import SqliteStore

from .conformance import (
    ITEMS,
    KV,
    StoreConformance,
    StoreOpener,
    increment,
    read_row,
    write_rows,
)

pytestmark = pytest.mark.integration


@pytest.fixture
def store_opener(tmp_path: Path) -> StoreOpener:
    def opener(name: str = "main") -> Callable[[], SqliteStore]:
        return functools.partial(SqliteStore, str(tmp_path / "stores" / f"{name}.db"))

    return opener


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
