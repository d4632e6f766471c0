"""The conflict matrix as pure functions: no store involved."""

from __future__ import annotations

import pytest

from gnomon.errors import Conflict, InvalidArgument
from node.engine.manifest import (
    MATRIX,
    Commit,
    CommitOp,
    Outcome,
    Version,
    materialise,
    plan,
    resolve,
)
from node.engine.sst.meta import SstMeta

pytestmark = pytest.mark.unit

A, C, U, M = CommitOp.APPEND, CommitOp.COMPACTION, CommitOp.UPDATE, CommitOp.MERGE

# The seed's matrix, written out cell by cell (mine, theirs) -> outcome.
EXPECTED: dict[tuple[CommitOp, CommitOp], Outcome] = {
    (A, A): Outcome.ON_TOP,
    (A, C): Outcome.ON_TOP,
    (A, U): Outcome.CONFLICT,
    (A, M): Outcome.CONFLICT,
    (C, A): Outcome.REORDER,
    (C, C): Outcome.DISCARD,
    (C, U): Outcome.DISCARD,
    (C, M): Outcome.REORDER,
    (U, A): Outcome.CONFLICT,
    (U, C): Outcome.KEEP_MINE,
    (U, U): Outcome.CONFLICT,
    (U, M): Outcome.CONFLICT,
    (M, A): Outcome.CONFLICT,
    (M, C): Outcome.ON_TOP,
    (M, U): Outcome.CONFLICT,
    (M, M): Outcome.CONFLICT,
}


def sst(path: str) -> SstMeta:
    return SstMeta(
        path=path, size=1, rows=1, min_ts=0, max_ts=0, min_seq=0, max_seq=0, schema_version=1
    )


def commit(
    cid: str,
    op: CommitOp,
    files: list[str],
    deleted: list[str] | None = None,
    flushed_seq: int | None = None,
) -> Commit:
    return Commit(
        commit_id=cid,
        table_id=7,
        op=op,
        files=tuple(sst(p) for p in files),
        deleted=tuple(deleted or ()),
        flushed_seq=flushed_seq,
        timestamp_ms=0,
    )


def version(
    v: int,
    snapshot: list[str],
    files: list[str],
    *,
    ts: int = 100,
    flushed_seq: int = 0,
    op: CommitOp | None = A,
) -> Version:
    return Version(
        table_id=7,
        version=v,
        commit_op=op,
        timestamp_ms=ts,
        snapshot=tuple(snapshot),
        flushed_seq=flushed_seq,
        files=tuple(sst(p) for p in files),
        commit_id=snapshot[-1] if snapshot else None,
    )


def paths(v: Version) -> list[str]:
    return [f.path for f in v.files]


def test_matrix_is_the_seeds() -> None:
    assert dict(MATRIX) == EXPECTED
    assert len(MATRIX) == 16


@pytest.mark.parametrize(("mine", "theirs"), sorted(EXPECTED), ids=lambda op: str(op))
def test_plan_of_each_cell(mine: CommitOp, theirs: CommitOp) -> None:
    assert plan(mine, [theirs]) is EXPECTED[mine, theirs]


@pytest.mark.parametrize("mine", list(CommitOp))
def test_each_row_has_one_outcome_besides_conflict_and_discard(mine: CommitOp) -> None:
    # plan() combines several of theirs by rank; this is what makes that well-defined.
    others = {
        MATRIX[mine, t]
        for t in CommitOp
        if MATRIX[mine, t] not in (Outcome.CONFLICT, Outcome.DISCARD)
    }
    assert len(others) <= 1


@pytest.mark.parametrize(
    ("mine", "theirs", "expected"),
    [
        (A, [], Outcome.ON_TOP),
        (M, [], Outcome.ON_TOP),
        (C, [], Outcome.KEEP_MINE),
        (U, [], Outcome.KEEP_MINE),
        (A, [A, C, A], Outcome.ON_TOP),
        (A, [C, M], Outcome.CONFLICT),
        (C, [A, M, A], Outcome.REORDER),
        (C, [A, C], Outcome.DISCARD),
        (C, [U, A], Outcome.DISCARD),
        (U, [C, C], Outcome.KEEP_MINE),
        (U, [C, A], Outcome.CONFLICT),
        (M, [C, C], Outcome.ON_TOP),
        (M, [C, M], Outcome.CONFLICT),
    ],
)
def test_plan_over_several_commits(
    mine: CommitOp, theirs: list[CommitOp], expected: Outcome
) -> None:
    assert plan(mine, theirs) is expected


# Base: version 1 holds f1, f2 (snapshot [b]). One commit of theirs made version 2; these are
# theirs per op and the version they made.
BASE = version(1, ["b"], ["f1", "f2"])
THEIRS = {
    A: (commit("t", A, ["ta"]), version(2, ["b", "t"], ["f1", "f2", "ta"])),
    C: (commit("t", C, ["tc"], ["f1", "f2"]), version(2, ["t"], ["tc"], op=C)),
    U: (commit("t", U, ["f2", "tu"], ["f1"]), version(2, ["t"], ["f2", "tu"], op=U)),
    M: (commit("t", M, ["tm"]), version(2, ["b", "t"], ["f1", "f2", "tm"], op=M)),
}
MINE = {
    A: commit("m", A, ["ma"]),
    C: commit("m", C, ["mc"], ["f1", "f2"]),
    U: commit("m", U, ["f1", "mu"], ["f2"]),
    M: commit("m", M, ["mm"]),
}
# (snapshot, files) of version 3, or the outcome when there is none.
RESULTS: dict[tuple[CommitOp, CommitOp], tuple[list[str], list[str]] | Outcome] = {
    (A, A): (["b", "t", "m"], ["f1", "f2", "ta", "ma"]),
    (A, C): (["t", "m"], ["tc", "ma"]),
    (A, U): Outcome.CONFLICT,
    (A, M): Outcome.CONFLICT,
    (C, A): (["m", "t"], ["mc", "ta"]),
    (C, C): Outcome.DISCARD,
    (C, U): Outcome.DISCARD,
    (C, M): (["m", "t"], ["mc", "tm"]),
    (U, A): Outcome.CONFLICT,
    (U, C): (["m"], ["f1", "mu"]),
    (U, U): Outcome.CONFLICT,
    (U, M): Outcome.CONFLICT,
    (M, A): Outcome.CONFLICT,
    (M, C): (["t", "m"], ["tc", "mm"]),
    (M, U): Outcome.CONFLICT,
    (M, M): Outcome.CONFLICT,
}


@pytest.mark.parametrize(("mine", "theirs"), sorted(RESULTS), ids=lambda op: str(op))
def test_resolve_each_cell(mine: CommitOp, theirs: CommitOp) -> None:
    their_commit, current = THEIRS[theirs]
    expected = RESULTS[mine, theirs]
    if expected is Outcome.CONFLICT:
        with pytest.raises(Conflict) as e:
            resolve(MINE[mine], current, [their_commit], now_ms=500)
        assert "table 7" in e.value.message
        assert f"{mine} commit m" in e.value.message
        assert f"concurrent {theirs} commit t" in e.value.message
        assert e.value.retryable
        return
    result = resolve(MINE[mine], current, [their_commit], now_ms=500)
    if expected is Outcome.DISCARD:
        assert not result.committed
        assert result.version is current
        return
    assert isinstance(expected, tuple)
    snapshot, files = expected
    assert result.committed
    assert result.version.version == 3
    assert result.version.commit_op is mine
    assert result.version.commit_id == "m"
    assert list(result.version.snapshot) == snapshot
    assert paths(result.version) == files


@pytest.mark.parametrize("mine", list(CommitOp))
def test_resolve_without_theirs_applies_mine(mine: CommitOp) -> None:
    result = resolve(MINE[mine], BASE, [], now_ms=500)
    assert result.committed
    expected = {
        A: (["b", "m"], ["f1", "f2", "ma"]),
        C: (["m"], ["mc"]),
        U: (["m"], ["f1", "mu"]),
        M: (["b", "m"], ["f1", "f2", "mm"]),
    }[mine]
    assert (list(result.version.snapshot), paths(result.version)) == expected


def test_reorder_keeps_every_delta_after_the_base() -> None:
    theirs = [commit("t1", A, ["a1"]), commit("t2", M, ["m2"]), commit("t3", A, ["a3"])]
    current = version(4, ["b", "t1", "t2", "t3"], ["f1", "f2", "a1", "m2", "a3"])
    result = resolve(MINE[C], current, theirs, now_ms=500)
    assert result.version.snapshot == ("m", "t1", "t2", "t3")
    assert paths(result.version) == ["mc", "a1", "m2", "a3"]
    assert result.version.version == 5


def test_reorder_needs_the_compacted_files_still_live() -> None:
    # Inconsistent input on purpose: theirs are deltas, yet f2 is gone from the current files.
    their_commit = commit("t", A, ["ta"])
    current = version(2, ["b", "t"], ["f1", "ta"])
    with pytest.raises(Conflict, match="not live at version 2"):
        resolve(MINE[C], current, [their_commit], now_ms=500)


def test_apply_checks_deleted_files_are_live() -> None:
    with pytest.raises(Conflict, match=r"'f9'"):
        resolve(commit("m", U, ["x"], ["f9"]), BASE, [], now_ms=500)


def test_a_path_live_twice_is_refused() -> None:
    with pytest.raises(InvalidArgument, match=r"'f1'.*already live"):
        resolve(commit("m", A, ["f1"]), BASE, [], now_ms=500)


def test_timestamps_strictly_increase_even_if_the_clock_goes_back() -> None:
    current = version(1, ["b"], ["f1"], ts=1000)
    assert resolve(MINE[A], current, [], now_ms=5).version.timestamp_ms == 1001
    assert resolve(MINE[A], current, [], now_ms=2000).version.timestamp_ms == 2000


@pytest.mark.parametrize(("before", "mine", "after"), [(10, None, 10), (10, 5, 10), (10, 12, 12)])
def test_flushed_seq_never_decreases(before: int, mine: int | None, after: int) -> None:
    current = version(1, ["b"], ["f1"], flushed_seq=before)
    result = resolve(commit("m", A, ["x"], flushed_seq=mine), current, [], now_ms=0)
    assert result.version.flushed_seq == after


def test_materialise() -> None:
    assert materialise([]) == ()
    commits = [
        commit("1", A, ["a"]),
        commit("2", A, ["b"]),
        commit("3", C, ["c"], ["a", "b"]),
        commit("4", M, ["d"]),
    ]
    assert [f.path for f in materialise(commits)] == ["c", "d"]
    assert [f.path for f in materialise(commits[:2])] == ["a", "b"]


@pytest.mark.parametrize(
    ("op", "files", "deleted", "message"),
    [
        (A, ["a"], ["b"], "only adds files"),
        (M, [], ["b"], "only adds files"),
        (A, ["a", "a"], [], "listed twice"),
        (C, ["a"], ["b", "b"], "listed twice"),
        (C, ["a"], ["a"], "both adds and deletes"),
    ],
)
def test_commit_shape_is_checked(
    op: CommitOp, files: list[str], deleted: list[str], message: str
) -> None:
    with pytest.raises(InvalidArgument, match=message):
        commit("m", op, files, deleted)
