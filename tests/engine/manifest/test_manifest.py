"""The manifest on a real SqliteStore: commits, the conflict matrix end to end, time travel,
drop, and concurrent committers."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pytest

from gnomon.errors import AlreadyExists, Conflict, InvalidArgument, NotFound
from gnomon.store.api import KeyRange, Row, StructuredStore, StructuredTable, TableContext
from gnomon.store.filters import Filter
from gnomon.store.spec import TableSpec
from gnomon.store.sqlite import SqliteStore
from node.engine.manifest import CommitOp, CommitResult, Manifest, Outcome, Version, VersionInfo
from node.engine.sst.meta import SstMeta

pytestmark = pytest.mark.unit

T = TypeVar("T")
A, C, U, M = CommitOp.APPEND, CommitOp.COMPACTION, CommitOp.UPDATE, CommitOp.MERGE
TABLE = 7


class Clock:
    """A settable clock, so time travel tests know every version's timestamp."""

    def __init__(self, now: int = 1_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def sst(path: str, seq: int = 0) -> SstMeta:
    return SstMeta(
        path=path, size=10, rows=2, min_ts=0, max_ts=9, min_seq=seq, max_seq=seq, schema_version=1
    )


def paths(v: Version) -> list[str]:
    return [f.path for f in v.files]


@pytest.fixture
def db(tmp_path: Path) -> str:
    return str(tmp_path / "meta.db")


@pytest.fixture
def store(db: str) -> Iterator[SqliteStore]:
    s = SqliteStore(db)
    yield s
    s.close()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def manifest(store: SqliteStore, clock: Clock) -> Manifest:
    m = Manifest(store, clock=clock)
    m.create_table(TABLE)
    return m


def spi_rows(store: StructuredStore, table: str) -> list[Row]:
    return store.transact(lambda ctx: list(ctx.table(table).scan()))


# -- lifecycle ---------------------------------------------------------------------------------


def test_create_table_starts_empty_at_version_0(manifest: Manifest, clock: Clock) -> None:
    v = manifest.current(TABLE)
    assert (v.version, v.snapshot, v.files, v.flushed_seq) == (0, (), (), 0)
    assert v.commit_op is None and v.commit_id is None
    assert v.timestamp_ms == clock.now
    assert manifest.versions(TABLE) == [VersionInfo(0, clock.now, None)]


def test_create_twice_is_already_exists(manifest: Manifest) -> None:
    with pytest.raises(AlreadyExists, match="table 7"):
        manifest.create_table(TABLE)


def test_unknown_table_is_not_found(manifest: Manifest) -> None:
    for call in (
        lambda: manifest.current(99),
        lambda: manifest.at_version(99, 0),
        lambda: manifest.at_timestamp(99, 10**12),
        lambda: manifest.versions(99),
        lambda: manifest.commit(99, A, add=[sst("x")]),
        lambda: manifest.drop_table(99),
    ):
        with pytest.raises(NotFound, match="table 99"):
            call()


def test_creating_the_spi_tables_again_is_harmless(store: SqliteStore, manifest: Manifest) -> None:
    manifest.commit(TABLE, A, add=[sst("a")])
    again = Manifest(store)
    assert paths(again.current(TABLE)) == ["a"]


def test_partitions_are_separate(store: SqliteStore) -> None:
    p1, p2 = Manifest(store, "year=2024"), Manifest(store, "year=2025")
    p1.create_table(TABLE)
    p2.create_table(TABLE)
    p1.commit(TABLE, A, add=[sst("a")])
    assert paths(p1.current(TABLE)) == ["a"]
    assert paths(p2.current(TABLE)) == []
    p1.drop_table(TABLE)
    assert p2.current(TABLE).version == 0
    with pytest.raises(NotFound, match="partition 'year=2024'"):
        p1.current(TABLE)


def test_drop_table_removes_every_row(store: SqliteStore, manifest: Manifest) -> None:
    manifest.create_table(8)
    manifest.commit(8, A, add=[sst("other")])
    for i in range(3):
        manifest.commit(TABLE, A, add=[sst(f"a{i}")])
    manifest.commit(TABLE, C, delete=["a0", "a1"], add=[sst("c")])

    manifest.drop_table(TABLE)

    for name in ("manifest_commits", "manifest_versions", "manifest_heads"):
        assert {r["table_id"] for r in spi_rows(store, name)} == {8}
    with pytest.raises(NotFound, match="table 7"):
        manifest.current(TABLE)
    with pytest.raises(NotFound, match="table 7"):
        manifest.drop_table(TABLE)
    assert paths(manifest.current(8)) == ["other"]

    # A new incarnation starts from scratch, whatever was cached about the old one.
    manifest.create_table(TABLE)
    assert manifest.current(TABLE).files == ()
    assert manifest.commit(TABLE, A, add=[sst("n")]).version.version == 1
    assert paths(manifest.at_version(TABLE, 1)) == ["n"]


# -- commits and file sets ---------------------------------------------------------------------


def test_file_set_after_each_commit(manifest: Manifest) -> None:
    steps: list[tuple[CommitOp, list[str], list[str], list[str]]] = [
        (A, ["a1"], [], ["a1"]),
        (A, ["a2", "a3"], [], ["a1", "a2", "a3"]),
        (C, ["c1"], ["a1", "a2"], ["a3", "c1"]),
        (A, ["a4"], [], ["a3", "c1", "a4"]),
        (M, ["m1"], [], ["a3", "c1", "a4", "m1"]),
        (U, ["u1"], ["a3", "c1", "a4", "m1"], ["u1"]),
        (A, [], [], ["u1"]),
        (C, [], ["u1"], []),
    ]
    for i, (op, add, delete, expected) in enumerate(steps, start=1):
        result = manifest.commit(TABLE, op, add=[sst(p) for p in add], delete=delete)
        assert result.committed
        assert result.version.version == i
        assert result.version.commit_op is op
        assert paths(result.version) == expected
        assert manifest.current(TABLE) == result.version
    # Snapshots restart at each full-set commit and grow by one per delta.
    assert [len(manifest.at_version(TABLE, i).snapshot) for i in range(9)] == [
        0, 1, 2, 1, 2, 3, 1, 2, 1
    ]  # fmt: skip


def test_files_keep_their_metadata(manifest: Manifest) -> None:
    f = SstMeta(
        path="s/1.parquet",
        size=4096,
        rows=100,
        min_ts=5,
        max_ts=50,
        min_seq=1,
        max_seq=100,
        schema_version=3,
    )
    manifest.commit(TABLE, A, add=[f])
    assert manifest.current(TABLE).files == (f,)
    assert Manifest(manifest._store).current(TABLE).files == (f,)


def test_deleting_a_file_that_is_not_live_is_a_conflict(manifest: Manifest) -> None:
    manifest.commit(TABLE, A, add=[sst("a")])
    with pytest.raises(Conflict, match=r"table 7.*not live at version 1.*'nope'"):
        manifest.commit(TABLE, C, delete=["a", "nope"], add=[sst("c")])
    assert paths(manifest.current(TABLE)) == ["a"]


@pytest.mark.parametrize(
    ("op", "add", "delete", "message"),
    [
        (A, ["b"], ["a"], "only add files"),
        (M, [], ["a"], "only add files"),
        (A, ["a"], [], "already live"),
        (A, ["x", "x"], [], "listed twice"),
        (C, ["a"], ["a"], "already live"),
    ],
)
def test_malformed_commits_are_invalid(
    manifest: Manifest, op: CommitOp, add: list[str], delete: list[str], message: str
) -> None:
    manifest.commit(TABLE, A, add=[sst("a")])
    with pytest.raises(InvalidArgument, match=message):
        manifest.commit(TABLE, op, add=[sst(p) for p in add], delete=delete)
    assert manifest.current(TABLE).version == 1


def test_flushed_seq_never_decreases(manifest: Manifest) -> None:
    seqs = []
    for op, add, delete, flushed in [
        (A, ["a1"], [], 10),
        (A, ["a2"], [], 5),
        (C, ["c"], ["a1", "a2"], None),
        (A, ["a3"], [], 30),
        (U, ["u"], ["c", "a3"], 20),
    ]:
        v = manifest.commit(
            TABLE, op, add=[sst(p) for p in add], delete=delete, flushed_seq=flushed
        ).version
        seqs.append(v.flushed_seq)
    assert seqs == [10, 10, 10, 30, 30]
    assert manifest.at_version(TABLE, 2).flushed_seq == 10
    with pytest.raises(InvalidArgument, match="flushed_seq"):
        manifest.commit(TABLE, A, add=[sst("x")], flushed_seq=-1)


def test_timestamps_strictly_increase_with_a_stuck_clock(manifest: Manifest, clock: Clock) -> None:
    for i in range(5):
        manifest.commit(TABLE, A, add=[sst(f"a{i}")])
    stamps = [info.timestamp_ms for info in manifest.versions(TABLE)]
    assert stamps == [clock.now + i for i in range(6)]


def test_versions_lists_the_history(manifest: Manifest, clock: Clock) -> None:
    clock.now = 2000
    manifest.commit(TABLE, A, add=[sst("a")])
    clock.now = 3000
    manifest.commit(TABLE, C, delete=["a"], add=[sst("c")])
    assert manifest.versions(TABLE) == [
        VersionInfo(0, 1000, None),
        VersionInfo(1, 2000, A),
        VersionInfo(2, 3000, C),
    ]


# -- time travel -------------------------------------------------------------------------------


def test_time_travel(manifest: Manifest, clock: Clock) -> None:
    expected: dict[int, list[str]] = {0: []}
    for i in range(1, 11):
        clock.now = 1000 + 100 * i
        if i == 6:
            manifest.commit(TABLE, C, delete=[f"a{j}" for j in range(1, 6)], add=[sst("c")])
            expected[i] = ["c"]
        else:
            manifest.commit(TABLE, A, add=[sst(f"a{i}")])
            expected[i] = [*expected[i - 1], f"a{i}"]

    for v, files in expected.items():
        assert paths(manifest.at_version(TABLE, v)) == files
        at = manifest.at_version(TABLE, v).timestamp_ms
        assert at == 1000 + 100 * v
        assert manifest.at_timestamp(TABLE, at).version == v
        assert manifest.at_timestamp(TABLE, at + 99).version == v
    assert manifest.at_timestamp(TABLE, 10**15).version == 10

    with pytest.raises(NotFound, match="table 7 has no version at timestamp 999"):
        manifest.at_timestamp(TABLE, 999)
    with pytest.raises(NotFound, match=r"table 7 has no version 11 \(current version: 10\)"):
        manifest.at_version(TABLE, 11)


def test_old_versions_read_back_from_a_cold_manifest(
    store: SqliteStore, manifest: Manifest
) -> None:
    for i in range(5):
        manifest.commit(TABLE, A, add=[sst(f"a{i}")])
    manifest.commit(TABLE, C, delete=["a0", "a1", "a2"], add=[sst("c")])
    cold = Manifest(store, commit_cache_size=2)
    for v in range(7):
        assert cold.at_version(TABLE, v) == manifest.at_version(TABLE, v)


class _CountingTable:
    def __init__(self, table: StructuredTable, counts: dict[str, int]) -> None:
        self._table = table
        self._counts = counts

    @property
    def spec(self) -> TableSpec:
        return self._table.spec

    def read(self, key: Mapping[str, Any], columns: Sequence[str] | None = None) -> Row | None:
        self._counts["reads"] += 1
        return self._table.read(key, columns)

    def scan(
        self,
        key_range: KeyRange | None = None,
        *,
        limit: int | None = None,
        filter: Filter | None = None,
        columns: Sequence[str] | None = None,
    ) -> Iterator[Row]:
        self._counts["reads"] += 1
        return self._table.scan(key_range, limit=limit, filter=filter, columns=columns)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._table, name)


class _CountingStore:
    """Counts the SPI calls that read (a point read or one scan each)."""

    def __init__(self, store: SqliteStore) -> None:
        self._store = store
        self.counts = {"reads": 0}

    def transact(self, fn: Callable[[TableContext], T]) -> T:
        def counted(ctx: TableContext) -> T:
            outer = self

            class Ctx:
                def table(self, name: str) -> StructuredTable:
                    return _CountingTable(ctx.table(name), outer.counts)  # type: ignore[return-value]

            return fn(Ctx())

        return self._store.transact(counted)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


@pytest.mark.parametrize("n", [20, 200])
def test_resolving_a_long_snapshot_costs_linear_reads(store: SqliteStore, n: int) -> None:
    writer = Manifest(store)
    writer.create_table(TABLE)
    for i in range(n):
        writer.commit(TABLE, A, add=[sst(f"a{i}")])

    counting = _CountingStore(store)
    cold = Manifest(counting)  # type: ignore[arg-type]
    assert len(cold.current(TABLE).files) == n
    # head + version row + the commits (one each when few, one scan per chunk when many)
    assert counting.counts["reads"] <= 2 + min(n, 32) + 1

    # Every version from a cold cache: commits are fetched once, not once per version.
    counting.counts["reads"] = 0
    cold = Manifest(counting)  # type: ignore[arg-type]
    for v in range(n + 1):
        assert len(cold.at_version(TABLE, v).files) == v
    assert counting.counts["reads"] <= 3 * (n + 1)


# -- the conflict matrix, end to end -----------------------------------------------------------

# Version 1 holds f1 and f2. Theirs commits on it; mine then commits with base_version=1.
THEIRS: dict[CommitOp, tuple[list[str], list[str]]] = {  # op -> (add, delete)
    A: (["ta"], []),
    C: (["tc"], ["f1", "f2"]),
    U: (["tu"], ["f1"]),
    M: (["tm"], []),
}
MINE: dict[CommitOp, tuple[list[str], list[str]]] = {
    A: (["ma"], []),
    C: (["mc"], ["f1", "f2"]),
    U: (["mu"], ["f2"]),
    M: (["mm"], []),
}
# The files of the final version, or CONFLICT / DISCARD.
EXPECTED: dict[tuple[CommitOp, CommitOp], list[str] | Outcome] = {
    (A, A): ["f1", "f2", "ta", "ma"],
    (A, C): ["tc", "ma"],
    (A, U): Outcome.CONFLICT,
    (A, M): Outcome.CONFLICT,
    (C, A): ["mc", "ta"],
    (C, C): Outcome.DISCARD,
    (C, U): Outcome.DISCARD,
    (C, M): ["mc", "tm"],
    (U, A): Outcome.CONFLICT,
    (U, C): ["f1", "mu"],
    (U, U): Outcome.CONFLICT,
    (U, M): Outcome.CONFLICT,
    (M, A): Outcome.CONFLICT,
    (M, C): ["tc", "mm"],
    (M, U): Outcome.CONFLICT,
    (M, M): Outcome.CONFLICT,
}


@pytest.mark.parametrize(("mine", "theirs"), sorted(EXPECTED), ids=lambda op: str(op))
def test_matrix_cell(
    store: SqliteStore, manifest: Manifest, mine: CommitOp, theirs: CommitOp
) -> None:
    manifest.commit(TABLE, A, add=[sst("f1"), sst("f2")])
    add, delete = THEIRS[theirs]
    their_version = manifest.commit(
        TABLE, theirs, base_version=1, add=[sst(p) for p in add], delete=delete
    ).version
    assert their_version.version == 2

    add, delete = MINE[mine]
    expected = EXPECTED[mine, theirs]

    def commit_mine() -> CommitResult:
        return manifest.commit(
            TABLE, mine, base_version=1, add=[sst(p) for p in add], delete=delete, flushed_seq=9
        )

    if expected is Outcome.CONFLICT:
        with pytest.raises(Conflict) as e:
            commit_mine()
        assert f"{mine} commit" in e.value.message
        assert f"concurrent {theirs} commit {their_version.commit_id}" in e.value.message
        assert "table 7" in e.value.message
        assert manifest.current(TABLE) == their_version
    elif expected is Outcome.DISCARD:
        result = commit_mine()
        assert not result.committed
        assert result.version == their_version
        assert manifest.current(TABLE) == their_version
    else:
        result = commit_mine()
        assert result.committed
        v = result.version
        assert (v.version, v.commit_op, v.flushed_seq) == (3, mine, 9)
        assert paths(v) == expected
        assert v.timestamp_ms > their_version.timestamp_ms
        assert manifest.current(TABLE) == v
        assert Manifest(store).at_version(TABLE, 3) == v  # what was written reads back
        if mine is C:  # reordered: the compaction goes under the concurrent delta
            assert v.snapshot == (v.commit_id, their_version.commit_id)

    if not isinstance(expected, list):
        # Nothing refers to the failed commit: its row is gone too.
        commits = {r["commit_id"] for r in spi_rows(store, "manifest_commits")}
        assert commits == set(manifest.current(TABLE).snapshot) | set(
            manifest.at_version(TABLE, 1).snapshot
        )


def test_compaction_reordered_under_several_appends(manifest: Manifest) -> None:
    manifest.commit(TABLE, A, add=[sst("f1")])
    manifest.commit(TABLE, A, add=[sst("f2")])
    base = manifest.current(TABLE)
    for p in ("a1", "a2", "a3"):
        manifest.commit(TABLE, A, add=[sst(p)])
    result = manifest.commit(
        TABLE, C, base_version=base.version, delete=["f1", "f2"], add=[sst("c")]
    )
    assert result.committed
    assert paths(result.version) == ["c", "a1", "a2", "a3"]
    assert result.version.snapshot[0] == result.version.commit_id
    assert len(result.version.snapshot) == 4
    # An append on an old base goes on top of everything, compaction included.
    after = manifest.commit(TABLE, A, base_version=base.version, add=[sst("a4")])
    assert paths(after.version) == ["c", "a1", "a2", "a3", "a4"]


# -- concurrency -------------------------------------------------------------------------------


@pytest.mark.parametrize("separate_stores", [False, True], ids=["shared", "per-thread"])
def test_concurrent_appends_all_land_once(db: str, separate_stores: bool) -> None:
    threads_n, per_thread = 8, 12
    shared = SqliteStore(db)
    Manifest(shared).create_table(TABLE)
    errors: list[BaseException] = []
    results: list[int] = []
    start = threading.Barrier(threads_n)
    lock = threading.Lock()

    def worker(t: int) -> None:
        store = SqliteStore(db) if separate_stores else shared
        try:
            m = Manifest(store)
            start.wait()
            for i in range(per_thread):
                base = m.current(TABLE).version
                r = m.commit(
                    TABLE, A, base_version=base, add=[sst(f"t{t}-{i}", seq=i)], flushed_seq=i
                )
                assert r.committed
                with lock:
                    results.append(r.version.version)
        except BaseException as e:
            errors.append(e)
        finally:
            if separate_stores:
                store.close()

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(threads_n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors

    final = Manifest(shared).current(TABLE)
    total = threads_n * per_thread
    assert final.version == total
    assert sorted(results) == list(range(1, total + 1))
    assert sorted(paths(final)) == sorted(
        f"t{t}-{i}" for t in range(threads_n) for i in range(per_thread)
    )
    assert final.flushed_seq == per_thread - 1
    stamps = [info.timestamp_ms for info in Manifest(shared).versions(TABLE)]
    assert stamps == sorted(set(stamps))
    shared.close()


def test_compaction_racing_appends_keeps_appended_files(store: SqliteStore) -> None:
    m = Manifest(store)
    m.create_table(TABLE)
    initial = [f"f{i}" for i in range(6)]
    for p in initial:
        m.commit(TABLE, A, add=[sst(p)])
    base = m.current(TABLE)
    appenders_n, per_thread = 4, 10
    start = threading.Barrier(appenders_n + 1)
    errors: list[BaseException] = []
    compacted: list[bool] = []

    def append(t: int) -> None:
        try:
            start.wait()
            for i in range(per_thread):
                assert m.commit(TABLE, A, add=[sst(f"a{t}-{i}")]).committed
        except BaseException as e:
            errors.append(e)

    def compact() -> None:
        try:
            start.wait()
            r = m.commit(
                TABLE, C, base_version=base.version, delete=initial, add=[sst("compacted")]
            )
            compacted.append(r.committed)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=append, args=(t,)) for t in range(appenders_n)]
    threads.append(threading.Thread(target=compact))
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    assert compacted == [True]

    final = m.current(TABLE)
    appended = {f"a{t}-{i}" for t in range(appenders_n) for i in range(per_thread)}
    assert sorted(paths(final)) == sorted({"compacted"} | appended)
    assert final.version == len(initial) + appenders_n * per_thread + 1
