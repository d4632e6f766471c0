"""Backend-agnostic conformance suite of the StructuredTable SPI (:mod:`gnomon.store.api`).

A backend's test module subclasses :class:`StoreConformance` (under a ``Test*`` name) and
provides one fixture, ``store_opener``, returning a :class:`StoreOpener`; ``conftest.py`` builds
the fixtures the suite uses from it (``store_factory``, a :class:`StoreFactory`, and ``store``)::

    @pytest.fixture
    def store_opener(tmp_path: Path) -> StoreOpener:
        return lambda name="main": functools.partial(MyStore, str(tmp_path / name))

    class TestMyBackend(StoreConformance):
        pass

``store_opener(name)`` is a picklable callable opening a handle on the store called ``name``
(default ``"main"``), in this process or another one; ``store_factory(name)`` opens such a
handle. Within a test the store of a name starts fresh and empty; every handle opened on it
(whether or not earlier handles were closed) sees that same store, as another process would. The
factory closes every handle it opened when the test ends; closing a handle twice must be
harmless.
"""

from __future__ import annotations

import itertools
import pickle
import re
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gnomon.errors import (
    AlreadyExists,
    Closed,
    Conflict,
    InvalidArgument,
    NotFound,
    SchemaMismatch,
)
from gnomon.store.api import KeyRange, Row, StructuredStore, TableContext, run_with_retries
from gnomon.store.filters import (
    And,
    Eq,
    Filter,
    In,
    Not,
    Or,
    Range,
    and_,
    eq,
    ge,
    gt,
    in_,
    le,
    lt,
    matches,
    not_,
    or_,
)
from gnomon.store.spec import TableSpec, spec


def _stable_id(value: object) -> str:
    """``value``'s repr with its sets' members in order: a test id every process collects
    alike (a set's order follows string hashing, which differs between processes)."""
    return re.sub(
        r"frozenset\(\{([^}]*)\}\)",
        lambda m: "frozenset({" + ", ".join(sorted(m[1].split(", "))) + "})",
        repr(value),
    )

class StoreFactory(Protocol):
    def __call__(self, name: str = "main") -> StructuredStore: ...


class StoreOpener(Protocol):
    def __call__(self, name: str = "main") -> Callable[[], StructuredStore]: ...


KV = spec("kv", [("k", "string"), ("v", "long"), ("note", "string")], ["k"])

EVENTS = spec(
    "events",
    [("s", "string"), ("n", "long"), ("b", "bytes"), ("payload", "string")],
    ["s", "n", "b"],
)

TYPES = spec(
    "types",
    [
        ("k", "string"),
        ("i", "int"),
        ("l", "long"),
        ("f", "float"),
        ("d", "double"),
        ("s", "string"),
        ("b", "bytes"),
    ],
    ["k"],
)

ITEMS = spec(
    "items",
    [("k", "long"), ("s", "string"), ("i", "long"), ("d", "double"), ("b", "bytes")],
    ["k"],
    indexes=["s"],
)

ITEM_ROWS: list[Row] = [
    {"k": 1, "s": "a", "i": 1, "d": 1.5, "b": b"x"},
    {"k": 2, "s": "b", "i": 2, "d": None, "b": b"y"},
    {"k": 3, "s": None, "i": 3, "d": -2.0, "b": None},
    {"k": 4, "s": "a", "i": None, "d": 0.0, "b": b""},
    {"k": 5, "s": "c", "i": 5, "d": 10.0, "b": b"xy"},
]

LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1

# Composite keys chosen so that ordering differs from naive expectations: the empty string and
# empty bytes sort first, a non-ASCII string sorts after ASCII, the smallest long is negative.
EVENT_S = ["", "a", "é"]
EVENT_N = [LONG_MIN, 0, 7]
EVENT_B = [b"", b"\x00", b"\xff"]


# -- filters against filters.matches, on generated rows: the table and the strategies ------------

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

PROP_ROWS = st.lists(
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


PROP_FILTERS: st.SearchStrategy[Filter] = st.recursive(
    st.sampled_from(list(_VALUES)).flatmap(_leaf),
    lambda inner: st.one_of(
        st.builds(Not, inner),
        st.builds(And, st.lists(inner, max_size=3).map(tuple)),
        st.builds(Or, st.lists(inner, max_size=3).map(tuple)),
    ),
    max_leaves=8,
)


class Rollback(Exception):
    """Raised by a test to make ``transact`` roll back."""


def write_rows(store: StructuredStore, table: str, rows: Iterable[Mapping[str, Any]]) -> None:
    def fn(ctx: TableContext) -> None:
        t = ctx.table(table)
        for row in rows:
            t.write(row)

    store.transact(fn)


def read_row(
    store: StructuredStore, table: str, key: Mapping[str, Any], columns: Sequence[str] | None = None
) -> Row | None:
    return store.transact(lambda ctx: ctx.table(table).read(key, columns))


def scan_rows(
    store: StructuredStore, table: str, key_range: KeyRange | None = None, **kw: Any
) -> list[Row]:
    return store.transact(lambda ctx: list(ctx.table(table).scan(key_range, **kw)))


def full_row(table: TableSpec, row: Mapping[str, Any]) -> Row:
    """``row`` as a read returns it: every field present, omitted ones null."""
    return {f: row.get(f) for f in table.field_names}


def event_key(row: Mapping[str, Any]) -> tuple[str, int, bytes]:
    return (row["s"], row["n"], row["b"])


def in_key_range(key: tuple[Any, ...], key_range: KeyRange) -> bool:
    """Reference semantics of KeyRange: compare the key's prefix with each bound."""
    if key_range.lower is not None:
        lower = tuple(key_range.lower.values())
        head = key[: len(lower)]
        if head < lower or (head == lower and not key_range.lower_inclusive):
            return False
    if key_range.upper is not None:
        upper = tuple(key_range.upper.values())
        head = key[: len(upper)]
        if head > upper or (head == upper and not key_range.upper_inclusive):
            return False
    return True


def increment(table: str, key: str) -> Callable[[TableContext], None]:
    def fn(ctx: TableContext) -> None:
        t = ctx.table(table)
        row = t.read({"k": key})
        t.write({"k": key, "v": (row["v"] if row else 0) + 1})

    return fn


def counter_row(value: int) -> Row:
    """The row of the counter that ``increment("kv", "counter")`` raised to ``value``."""
    return {"k": "counter", "v": value, "note": None}


def run_interleaved(
    store_a: StructuredStore,
    first: Callable[[TableContext], Any],
    other: Callable[[], Any],
    then: Callable[[TableContext], Any],
) -> Any:
    """Transaction A runs ``first``; while it is open another thread runs ``other`` to
    completion; then A runs ``then`` and commits. Returns A's result (or raises its error)."""
    a_read, b_done = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def run_b() -> None:
        try:
            assert a_read.wait(10)
            other()
        except BaseException as e:
            errors.append(e)
        finally:
            b_done.set()

    def fn(ctx: TableContext) -> Any:
        first(ctx)
        a_read.set()
        assert b_done.wait(10)
        return then(ctx)

    thread = threading.Thread(target=run_b)
    thread.start()
    try:
        return store_a.transact(fn)
    finally:
        a_read.set()
        thread.join(10)
        assert errors == []


# Increments the counter of table "kv" argv[2] times, on the store argv[1] opens (a pickled
# StoreOpener result, in hex).
_INCREMENT_WORKER = textwrap.dedent(
    """
    import pickle
    import sys

    from gnomon.store.api import run_with_retries

    def increment(ctx):
        t = ctx.table("kv")
        row = t.read({"k": "counter"})
        t.write({"k": "counter", "v": (row["v"] if row else 0) + 1})

    store = pickle.loads(bytes.fromhex(sys.argv[1]))()
    for _ in range(int(sys.argv[2])):
        run_with_retries(store, increment, attempts=1000)
    store.close()
    """
)


class StoreConformance:
    """The SPI contract; every test runs against the backend's ``store_factory``."""

    @pytest.fixture
    def items(self, store: StructuredStore) -> StructuredStore:
        store.create(ITEMS)
        write_rows(store, "items", ITEM_ROWS)
        return store

    @pytest.fixture
    def events(self, store: StructuredStore) -> StructuredStore:
        store.create(EVENTS)
        write_rows(
            store,
            "events",
            (
                {"s": s, "n": n, "b": b, "payload": f"{s}/{n}/{b.hex()}"}
                for s, n, b in itertools.product(EVENT_S, EVENT_N, EVENT_B)
            ),
        )
        return store

    # -- admin ---------------------------------------------------------------------------------

    def test_create_exists_get_spec(self, store: StructuredStore) -> None:
        assert not store.exists("kv")
        store.create(KV)
        assert store.exists("kv")
        assert store.get_spec("kv") == KV
        store.create(ITEMS)
        assert store.get_spec("items") == ITEMS

    def test_create_existing_raises_already_exists(self, store: StructuredStore) -> None:
        store.create(KV)
        with pytest.raises(AlreadyExists, match="'kv'"):
            store.create(KV)

    def test_create_if_not_exists_same_spec_keeps_rows(self, store: StructuredStore) -> None:
        store.create(KV)
        write_rows(store, "kv", [{"k": "a", "v": 1}])
        store.create(KV, if_not_exists=True)
        assert read_row(store, "kv", {"k": "a"}) == {"k": "a", "v": 1, "note": None}

    def test_create_if_not_exists_different_spec_raises_schema_mismatch(
        self, store: StructuredStore
    ) -> None:
        store.create(KV)
        other = spec("kv", [("k", "string"), ("v", "string")], ["k"])
        with pytest.raises(SchemaMismatch, match="'kv'"):
            store.create(other, if_not_exists=True)
        assert store.get_spec("kv") == KV

    def test_drop_removes_table_and_rows(self, store: StructuredStore) -> None:
        store.create(KV)
        write_rows(store, "kv", [{"k": "a", "v": 1}])
        store.drop("kv")
        assert not store.exists("kv")
        store.create(KV)
        assert scan_rows(store, "kv") == []

    def test_missing_tables_raise_not_found(self, store: StructuredStore) -> None:
        with pytest.raises(NotFound, match="'nope'"):
            store.drop("nope")
        with pytest.raises(NotFound, match="'nope'"):
            store.get_spec("nope")
        with pytest.raises(NotFound, match="'nope'"):
            store.transact(lambda ctx: ctx.table("nope"))

    def test_table_names_are_case_sensitive_and_independent(self, store: StructuredStore) -> None:
        upper = spec("KV", [("k", "string"), ("x", "bytes")], ["k"])
        store.create(KV)
        store.create(upper)
        write_rows(store, "kv", [{"k": "a", "v": 1}])
        write_rows(store, "KV", [{"k": "b", "x": b"1"}])
        assert scan_rows(store, "kv") == [{"k": "a", "v": 1, "note": None}]
        assert scan_rows(store, "KV") == [{"k": "b", "x": b"1"}]
        store.drop("KV")
        assert store.exists("kv")

    def test_awkward_field_names_are_quoted(self, store: StructuredStore) -> None:
        names = ["select", 'a"b', "with space", "x'y", "order"]
        awkward = spec("awkward", [(n, "string") for n in names], ["select", 'a"b'], ["order"])
        store.create(awkward)
        row = {n: n * 2 for n in names}
        write_rows(store, "awkward", [row])
        assert scan_rows(store, "awkward", filter=eq("x'y", "x'yx'y")) == [row]
        assert store.transact(
            lambda ctx: list(ctx.table("awkward").scan_index("order", "orderorder"))
        ) == [row]

    def test_admin_is_visible_to_other_handles(self, store_factory: StoreFactory) -> None:
        first, second = store_factory(), store_factory()
        first.create(KV)
        assert second.exists("kv")
        assert second.get_spec("kv") == KV
        write_rows(second, "kv", [{"k": "a", "v": 1}])
        assert read_row(first, "kv", {"k": "a"}) == {"k": "a", "v": 1, "note": None}
        second.drop("kv")
        assert not first.exists("kv")

    # -- rows ----------------------------------------------------------------------------------

    def test_write_read_overwrite(self, store: StructuredStore) -> None:
        store.create(KV)
        assert read_row(store, "kv", {"k": "a"}) is None
        write_rows(store, "kv", [{"k": "a", "v": 1, "note": "first"}])
        assert read_row(store, "kv", {"k": "a"}) == {"k": "a", "v": 1, "note": "first"}
        # A write replaces the whole row: fields it omits become null.
        write_rows(store, "kv", [{"k": "a", "v": 2}])
        assert read_row(store, "kv", {"k": "a"}) == {"k": "a", "v": 2, "note": None}

    def test_values_round_trip(self, store: StructuredStore) -> None:
        store.create(TYPES)
        rows: list[Row] = [
            {
                "k": "max",
                "i": 2**31 - 1,
                "l": LONG_MAX,
                "f": 1.5,
                "d": 1e300,
                "s": "héllo \x00 ☃",
                "b": b"\x00\xff",
            },
            {"k": "min", "i": -(2**31), "l": LONG_MIN, "f": -0.25, "d": -1e-300, "s": "", "b": b""},
            {"k": "inf", "d": float("inf"), "f": float("-inf")},
            {"k": "nulls"},
        ]
        write_rows(store, "types", rows)
        for row in rows:
            assert read_row(store, "types", {"k": row["k"]}) == full_row(TYPES, row)

    def test_bytes_like_and_int_values_are_normalised(self, store: StructuredStore) -> None:
        store.create(TYPES)
        write_rows(store, "types", [{"k": "a", "b": bytearray(b"ab"), "d": 3}])
        got = read_row(store, "types", {"k": "a"})
        assert got is not None
        assert type(got["b"]) is bytes and got["b"] == b"ab"
        assert got["d"] == 3.0

    def test_read_columns(self, store: StructuredStore) -> None:
        store.create(KV)
        write_rows(store, "kv", [{"k": "a", "v": 1, "note": "n"}])
        assert read_row(store, "kv", {"k": "a"}, ["v"]) == {"v": 1}
        assert read_row(store, "kv", {"k": "a"}, ["note", "k"]) == {"note": "n", "k": "a"}
        assert scan_rows(store, "kv", columns=["note"]) == [{"note": "n"}]
        with pytest.raises(SchemaMismatch, match="'bogus'"):
            read_row(store, "kv", {"k": "a"}, ["v", "bogus"])
        with pytest.raises(SchemaMismatch, match="'bogus'"):
            scan_rows(store, "kv", columns=["bogus"])

    def test_delete(self, store: StructuredStore) -> None:
        store.create(KV)
        write_rows(store, "kv", [{"k": "a", "v": 1}, {"k": "b", "v": 2}])
        assert store.transact(lambda ctx: ctx.table("kv").delete({"k": "a"})) is True
        assert store.transact(lambda ctx: ctx.table("kv").delete({"k": "a"})) is False
        assert [r["k"] for r in scan_rows(store, "kv")] == ["b"]

    def test_delete_all_by_prefix(self, events: StructuredStore) -> None:
        def delete_all(prefix: Mapping[str, Any]) -> int:
            return events.transact(lambda ctx: ctx.table("events").delete_all(prefix))

        assert delete_all({"s": "a", "n": 0, "b": b"\x00"}) == 1
        assert delete_all({"s": "a", "n": 0}) == 2
        assert delete_all({"s": "a"}) == 6
        assert delete_all({"s": "a"}) == 0
        assert delete_all({"s": "zzz"}) == 0
        remaining = [event_key(r) for r in scan_rows(events, "events")]
        assert remaining == sorted(
            k for k in itertools.product(EVENT_S, EVENT_N, EVENT_B) if k[0] != "a"
        )
        assert delete_all({}) == 18
        assert scan_rows(events, "events") == []

    # -- key ranges ----------------------------------------------------------------------------

    def test_full_scan_is_in_ascending_key_order(self, events: StructuredStore) -> None:
        keys = [event_key(r) for r in scan_rows(events, "events")]
        assert keys == sorted(itertools.product(EVENT_S, EVENT_N, EVENT_B))
        assert keys[0] == ("", LONG_MIN, b"")

    def test_key_prefix(self, events: StructuredStore) -> None:
        def keys(prefix: Mapping[str, Any]) -> list[tuple[str, int, bytes]]:
            return [event_key(r) for r in scan_rows(events, "events", KeyRange.prefix(prefix))]

        assert keys({"s": "é"}) == sorted(itertools.product(["é"], EVENT_N, EVENT_B))
        assert keys({"s": "a", "n": 7}) == [("a", 7, b) for b in EVENT_B]
        assert keys({"s": "a", "n": 7, "b": b"\xff"}) == [("a", 7, b"\xff")]
        assert keys({"s": "b"}) == []
        assert len(keys({})) == 27

    def test_key_ranges_all_bound_shapes(self, events: StructuredStore) -> None:
        # Bounds of every prefix length, on present and absent values, in every inclusive /
        # exclusive combination, checked against the reference prefix comparison.
        bounds: list[dict[str, Any] | None] = [
            None,
            {},
            *({"s": s} for s in ["", "a", "b", "é"]),
            *({"s": "a", "n": n} for n in [LONG_MIN, 0, 5, 7]),
            *({"s": "a", "n": 0, "b": b} for b in [b"", b"\x00", b"\x01", b"\xff"]),
            {"s": "é", "n": LONG_MAX, "b": b"\xff"},
        ]
        all_keys = sorted(itertools.product(EVENT_S, EVENT_N, EVENT_B))
        cases = [
            KeyRange(lower, upper, lower_inclusive=li, upper_inclusive=ui)
            for lower, upper in itertools.product(bounds, bounds)
            for li, ui in itertools.product([True, False], repeat=2)
        ]

        def run(ctx: TableContext) -> list[list[tuple[str, int, bytes]]]:
            t = ctx.table("events")
            return [[event_key(r) for r in t.scan(kr, columns=["s", "n", "b"])] for kr in cases]

        results = events.transact(run)
        for kr, got in zip(cases, results, strict=True):
            assert got == [k for k in all_keys if in_key_range(k, kr)], kr

    def test_scan_limit(self, events: StructuredStore) -> None:
        kr = KeyRange(
            lower={"s": "a", "n": 0}, upper={"s": "é"}, lower_inclusive=False, upper_inclusive=True
        )
        everything = [event_key(r) for r in scan_rows(events, "events", kr)]
        assert len(everything) == 12
        for limit in [0, 1, 2, 5, 11, 12, 13]:
            got = [event_key(r) for r in scan_rows(events, "events", kr, limit=limit)]
            assert got == everything[:limit]

    def test_bad_key_ranges_raise_schema_mismatch(self, events: StructuredStore) -> None:
        with pytest.raises(SchemaMismatch, match="'n'"):
            scan_rows(events, "events", KeyRange(lower={"n": 1}))
        with pytest.raises(SchemaMismatch, match="'s'"):
            scan_rows(events, "events", KeyRange(upper={"s": 1}))
        with pytest.raises(SchemaMismatch, match="'payload'"):
            scan_rows(events, "events", KeyRange.prefix({"s": "a", "payload": "x"}))

    # -- filters -------------------------------------------------------------------------------

    @pytest.mark.parametrize(
        ("flt", "expected"),
        [
            (eq("s", "a"), [1, 4]),
            (eq("s", None), []),
            (eq("k", 3), [3]),
            (eq("b", b""), [4]),
            (eq("d", 0), [4]),
            (gt("i", 2), [3, 5]),
            (ge("i", 2), [2, 3, 5]),
            (lt("i", 3), [1, 2]),
            (le("i", 3), [1, 2, 3]),
            (Range("i", 2, 5), [2, 3]),
            (Range("i", 2, 5, lower_inclusive=False, upper_inclusive=True), [3, 5]),
            (Range("i"), [1, 2, 3, 5]),
            (ge("d", 0), [1, 4, 5]),
            (lt("d", 0.0), [3]),
            (ge("b", b"x"), [1, 2, 5]),
            (lt("s", "b"), [1, 4]),
            (in_("s", ["a", "c"]), [1, 4, 5]),
            (in_("s", []), []),
            (in_("s", ["a", None]), [1, 4]),
            (in_("k", [5, 1, 9]), [1, 5]),
            # Comparisons with null are false, and Not negates them: null rows come back.
            (not_(eq("s", "a")), [2, 3, 5]),
            (not_(gt("i", 2)), [1, 2, 4]),
            (not_(in_("s", ["a", "b"])), [3, 5]),
            (not_(Range("d")), [2]),
            (not_(not_(eq("s", "a"))), [1, 4]),
            (and_(eq("s", "a"), ge("i", 1)), [1]),
            (or_(eq("s", "b"), lt("d", 0)), [2, 3]),
            (and_(), [1, 2, 3, 4, 5]),
            (or_(), []),
            (not_(and_()), []),
            (
                or_(
                    and_(eq("s", "a"), not_(eq("i", 1))),
                    not_(or_(ge("i", 3), eq("s", "a"))),
                ),
                [2, 4],
            ),
        ],
        ids=_stable_id,
    )
    def test_filters(self, items: StructuredStore, flt: Filter, expected: list[int]) -> None:
        assert [r["k"] for r in scan_rows(items, "items", filter=flt)] == expected
        assert expected == [r["k"] for r in ITEM_ROWS if matches(flt, r)]

    def test_filter_with_range_limit_and_columns(self, items: StructuredStore) -> None:
        got = scan_rows(
            items,
            "items",
            KeyRange(lower={"k": 2}),
            filter=not_(eq("s", "a")),
            limit=2,
            columns=["k", "d"],
        )
        assert got == [{"k": 2, "d": None}, {"k": 3, "d": -2.0}]

    @settings(
        max_examples=200,
        deadline=None,
        # One store per test serves every example: each rolls its writes back. Every backend's
        # subclass runs the test, hence the several executors.
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.function_scoped_fixture,
            HealthCheck.differing_executors,
        ],
    )
    @given(rows=PROP_ROWS, flt=PROP_FILTERS)
    def test_filters_agree_with_matches_on_generated_rows(
        self, store: StructuredStore, rows: list[Row], flt: Filter
    ) -> None:
        store.create(PROP, if_not_exists=True)
        got: list[Row] = []

        def fn(ctx: TableContext) -> None:
            t = ctx.table("prop")
            for row in rows:
                t.write(row)
            got.extend(t.scan(filter=flt))
            # Rolled back so that every example starts from an empty table, without a commit.
            raise Rollback

        with pytest.raises(Rollback):
            store.transact(fn)
        assert got == sorted((r for r in rows if matches(flt, r)), key=lambda r: r["k"])

    def test_bad_filters_raise_schema_mismatch(self, items: StructuredStore) -> None:
        with pytest.raises(SchemaMismatch, match="'nope'"):
            scan_rows(items, "items", filter=eq("nope", 1))
        with pytest.raises(SchemaMismatch, match="'i'"):
            scan_rows(items, "items", filter=not_(eq("i", "1")))
        with pytest.raises(SchemaMismatch, match="'s'"):
            scan_rows(items, "items", filter=or_(eq("i", 1), in_("s", [1])))
        with pytest.raises(SchemaMismatch, match="'b'"):
            scan_rows(items, "items", filter=ge("b", "x"))

    # -- secondary indexes ---------------------------------------------------------------------

    def test_scan_index(self, items: StructuredStore) -> None:
        def by_s(value: Any, **kw: Any) -> list[Row]:
            return items.transact(lambda ctx: list(ctx.table("items").scan_index("s", value, **kw)))

        assert by_s("a") == [full_row(ITEMS, ITEM_ROWS[0]), full_row(ITEMS, ITEM_ROWS[3])]
        assert [r["k"] for r in by_s("a", limit=1)] == [1]
        assert by_s("a", columns=["k"], filter=eq("i", None)) == []
        assert by_s("a", columns=["k"], filter=not_(eq("i", 1))) == [{"k": 4}]
        assert by_s("zzz") == []
        assert by_s(None) == []

    def test_scan_index_follows_overwrites_and_deletes(self, items: StructuredStore) -> None:
        def fn(ctx: TableContext) -> None:
            t = ctx.table("items")
            t.write({"k": 1, "s": "c"})
            t.delete({"k": 4})
            t.write({"k": 0, "s": "c"})

        items.transact(fn)

        def keys(value: str) -> list[int]:
            return items.transact(
                lambda ctx: [r["k"] for r in ctx.table("items").scan_index("s", value)]
            )

        assert keys("a") == []
        assert keys("c") == [0, 1, 5]

    def test_scan_index_errors(self, items: StructuredStore) -> None:
        def scan_index(field: str, value: Any) -> list[Row]:
            return items.transact(lambda ctx: list(ctx.table("items").scan_index(field, value)))

        with pytest.raises(SchemaMismatch, match="'i'"):
            scan_index("i", 1)
        with pytest.raises(SchemaMismatch, match="'nope'"):
            scan_index("nope", 1)
        with pytest.raises(SchemaMismatch, match="'s'"):
            scan_index("s", 1)

    # -- schema checks -------------------------------------------------------------------------

    @pytest.mark.parametrize(
        ("row", "field"),
        [
            ({"k": "a", "bogus": 1}, "bogus"),
            ({"i": 1}, "k"),
            ({"k": None}, "k"),
            ({"k": 1}, "k"),
            ({"k": "a", "i": "1"}, "i"),
            ({"k": "a", "i": 1.0}, "i"),
            ({"k": "a", "i": True}, "i"),
            ({"k": "a", "i": 2**31}, "i"),
            ({"k": "a", "i": -(2**31) - 1}, "i"),
            ({"k": "a", "l": 2**63}, "l"),
            ({"k": "a", "d": "1.0"}, "d"),
            ({"k": "a", "s": b"x"}, "s"),
            ({"k": "a", "b": "x"}, "b"),
        ],
        ids=repr,
    )
    def test_bad_rows_raise_schema_mismatch_naming_the_field(
        self, store: StructuredStore, row: Row, field: str
    ) -> None:
        store.create(TYPES)
        with pytest.raises(SchemaMismatch, match=f"'{field}'"):
            write_rows(store, "types", [row])
        assert scan_rows(store, "types") == []

    def test_missing_key_part_raises_schema_mismatch(self, events: StructuredStore) -> None:
        with pytest.raises(SchemaMismatch, match="'b'"):
            write_rows(events, "events", [{"s": "a", "n": 1}])
        with pytest.raises(SchemaMismatch, match="'n'"):
            read_row(events, "events", {"s": "a"})
        with pytest.raises(SchemaMismatch, match="'b'"):
            events.transact(lambda ctx: ctx.table("events").delete({"s": "a", "n": 0}))
        with pytest.raises(SchemaMismatch, match="'n'"):
            events.transact(lambda ctx: ctx.table("events").delete_all({"s": "a", "n": "0"}))

    # -- transactions --------------------------------------------------------------------------

    def test_transact_returns_and_commits(self, store: StructuredStore) -> None:
        store.create(KV)

        def fn(ctx: TableContext) -> int:
            t = ctx.table("kv")
            t.write({"k": "a", "v": 1})
            t.write({"k": "b", "v": 2})
            row = t.read({"k": "a"})  # reads its own writes
            assert row is not None
            return int(row["v"]) + 41

        assert store.transact(fn) == 42
        assert [r["k"] for r in scan_rows(store, "kv")] == ["a", "b"]

    def test_exception_rolls_back_and_propagates(self, store: StructuredStore) -> None:
        store.create(KV)
        write_rows(store, "kv", [{"k": "a", "v": 1}, {"k": "b", "v": 2}])
        error = Rollback("boom")

        def fn(ctx: TableContext) -> None:
            t = ctx.table("kv")
            t.write({"k": "a", "v": 100})
            t.write({"k": "c", "v": 3})
            t.delete({"k": "b"})
            assert [r["k"] for r in t.scan()] == ["a", "c"]
            raise error

        with pytest.raises(Rollback) as info:
            store.transact(fn)
        assert info.value is error
        assert scan_rows(store, "kv") == [
            {"k": "a", "v": 1, "note": None},
            {"k": "b", "v": 2, "note": None},
        ]

    def test_schema_error_inside_transaction_rolls_back_earlier_writes(
        self, store: StructuredStore
    ) -> None:
        store.create(KV)

        def fn(ctx: TableContext) -> None:
            t = ctx.table("kv")
            t.write({"k": "a", "v": 1})
            t.write({"k": "b", "v": "two"})

        with pytest.raises(SchemaMismatch, match="'v'"):
            store.transact(fn)
        assert scan_rows(store, "kv") == []

    def test_admin_inside_transaction_commits_with_it(self, store: StructuredStore) -> None:
        def fn(ctx: TableContext) -> None:
            store.create(KV)
            assert store.exists("kv")
            ctx.table("kv").write({"k": "a", "v": 1})

        store.transact(fn)
        assert store.get_spec("kv") == KV
        assert read_row(store, "kv", {"k": "a"}) == {"k": "a", "v": 1, "note": None}

    def test_admin_inside_transaction_rolls_back_with_it(self, store: StructuredStore) -> None:
        store.create(ITEMS)
        write_rows(store, "items", ITEM_ROWS)

        def fn(ctx: TableContext) -> None:
            store.create(KV)
            ctx.table("kv").write({"k": "a", "v": 1})
            store.drop("items")
            assert not store.exists("items")
            raise Rollback

        with pytest.raises(Rollback):
            store.transact(fn)
        assert not store.exists("kv")
        assert store.get_spec("items") == ITEMS
        assert [r["k"] for r in scan_rows(store, "items")] == [1, 2, 3, 4, 5]

    def test_nested_transact_raises_invalid_argument(self, store: StructuredStore) -> None:
        store.create(KV)

        def inner(ctx: TableContext) -> None:
            ctx.table("kv").write({"k": "inner", "v": 0})

        def outer(ctx: TableContext) -> None:
            ctx.table("kv").write({"k": "outer", "v": 0})
            with pytest.raises(InvalidArgument):
                store.transact(inner)

        store.transact(outer)
        assert [r["k"] for r in scan_rows(store, "kv")] == ["outer"]

    @pytest.mark.parametrize("handles", ["shared", "separate"])
    def test_concurrent_increments_lose_no_updates(
        self, store_factory: StoreFactory, handles: str
    ) -> None:
        threads_n, increments = 2, 100
        first = store_factory()
        first.create(KV)
        stores = [first if handles == "shared" else store_factory() for _ in range(threads_n)]
        start = threading.Barrier(threads_n)
        errors: list[BaseException] = []

        def work(store: StructuredStore) -> None:
            try:
                start.wait()
                for _ in range(increments):
                    # Generous attempts: optimistic backends may lose many races in a row.
                    run_with_retries(store, increment("kv", "counter"), attempts=1000)
            except BaseException as e:
                errors.append(e)

        threads = [threading.Thread(target=work, args=(s,)) for s in stores]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert not any(t.is_alive() for t in threads)
        assert errors == []
        assert read_row(first, "kv", {"k": "counter"}) == counter_row(threads_n * increments)

    def test_processes_incrementing_one_counter_lose_no_updates(
        self, store_opener: StoreOpener, store_factory: StoreFactory
    ) -> None:
        processes, increments = 4, 50
        store = store_factory()
        store.create(KV)
        opener = pickle.dumps(store_opener()).hex()
        argv = [sys.executable, "-c", _INCREMENT_WORKER, opener, str(increments)]
        workers = [subprocess.Popen(argv) for _ in range(processes)]
        try:
            codes = [w.wait(timeout=60) for w in workers]
        finally:
            for w in workers:
                if w.poll() is None:
                    w.kill()
        assert codes == [0] * processes
        assert read_row(store, "kv", {"k": "counter"}) == counter_row(processes * increments)

    def test_concurrent_read_modify_write_conflicts(self, store_factory: StoreFactory) -> None:
        # Exactly one of two transactions that read then write the same row commits; which one
        # loses is the backend's choice (optimistic ones fail the later commit, locking ones
        # the transaction left waiting).
        a, b = store_factory(), store_factory()
        a.create(KV)
        write_rows(a, "kv", [{"k": "c", "v": 1}])
        losers: list[tuple[str, Conflict]] = []

        def read(ctx: TableContext) -> None:
            assert ctx.table("kv").read({"k": "c"}) is not None

        def other() -> None:
            try:
                b.transact(increment("kv", "c"))
            except Conflict as e:
                losers.append(("b", e))

        def then(ctx: TableContext) -> None:
            ctx.table("kv").write({"k": "c", "v": 100})

        try:
            run_interleaved(a, read, other, then)
        except Conflict as e:
            losers.append(("a", e))
        assert [loser for loser, _ in losers] in (["a"], ["b"])
        assert losers[0][1].retryable
        # The winner's write stands: B's increment if A lost, A's write if B lost.
        winner_value = 2 if losers[0][0] == "a" else 100
        assert read_row(a, "kv", {"k": "c"}) == {"k": "c", "v": winner_value, "note": None}
        # The same interleaving without the other write commits.
        run_interleaved(a, read, lambda: None, then)
        assert read_row(b, "kv", {"k": "c"}) == {"k": "c", "v": 100, "note": None}

    # -- lifecycle -----------------------------------------------------------------------------

    def test_persists_across_reopen(self, store_factory: StoreFactory) -> None:
        store = store_factory()
        store.create(ITEMS)
        write_rows(store, "items", ITEM_ROWS)
        store.close()
        reopened = store_factory()
        assert reopened.get_spec("items") == ITEMS
        assert scan_rows(reopened, "items") == [full_row(ITEMS, r) for r in ITEM_ROWS]
        by_index = reopened.transact(lambda ctx: list(ctx.table("items").scan_index("s", "a")))
        assert [r["k"] for r in by_index] == [1, 4]

    def test_stores_of_different_names_are_independent(self, store_factory: StoreFactory) -> None:
        one, two = store_factory("one"), store_factory("two")
        one.create(KV)
        assert not two.exists("kv")

    def test_closed_store_raises_closed(self, store: StructuredStore) -> None:
        store.create(KV)
        store.close()
        store.close()
        with pytest.raises(Closed):
            store.exists("kv")
        with pytest.raises(Closed):
            store.get_spec("kv")
        with pytest.raises(Closed):
            store.create(ITEMS)
        with pytest.raises(Closed):
            store.drop("kv")
        with pytest.raises(Closed):
            store.transact(lambda ctx: None)
