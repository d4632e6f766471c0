"""The commit-conflict matrix, as pure functions.

A commit is prepared against a base version. If other commits ("theirs") became versions
after that base, the matrix decides, from my op and each of theirs, whether mine still applies
and how the new snapshot is ordered:

    mine \\ theirs | append   | compaction | update   | merge
    --------------+----------+------------+----------+---------
    append        | on top   | on top     | conflict | conflict
    compaction    | reorder  | discard    | discard  | reorder
    update        | conflict | keep mine  | conflict | conflict
    merge         | conflict | on top     | conflict | conflict

Against several commits the strongest outcome wins: conflict, then discard, then the row's
only other outcome (each row has one).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from enum import StrEnum
from types import MappingProxyType

from gnomon.errors import Conflict, InvalidArgument
from node.engine.manifest.model import Commit, CommitOp, CommitResult, Version
from node.engine.sst.meta import SstMeta


class Outcome(StrEnum):
    #: Snapshot = current snapshot + [mine].
    ON_TOP = "on_top"
    #: Snapshot = [mine] + theirs: my full file set first, their deltas after it.
    REORDER = "reorder"
    #: Snapshot = [mine]: my full file set replaces whatever theirs made.
    KEEP_MINE = "keep_mine"
    #: Mine is dropped, the table stays at the current version.
    DISCARD = "discard"
    #: Mine cannot be applied; the caller must redo its work on the new version.
    CONFLICT = "conflict"


_A, _C, _U, _M = CommitOp.APPEND, CommitOp.COMPACTION, CommitOp.UPDATE, CommitOp.MERGE

MATRIX: Mapping[tuple[CommitOp, CommitOp], Outcome] = MappingProxyType(
    {
        # Appended files are new rows: they stand on top of any layout of the old ones, but
        # rewrites by update/merge may have been decided without seeing them.
        (_A, _A): Outcome.ON_TOP,
        (_A, _C): Outcome.ON_TOP,
        (_A, _U): Outcome.CONFLICT,
        (_A, _M): Outcome.CONFLICT,
        # A compaction only changes the layout, so it yields to any other rewrite and slides
        # under deltas (their rows are newer than everything it merged).
        (_C, _A): Outcome.REORDER,
        (_C, _C): Outcome.DISCARD,
        (_C, _U): Outcome.DISCARD,
        (_C, _M): Outcome.REORDER,
        # An update's full set holds the same rows as a compaction's inputs, so it may replace
        # the compaction's output; any other change since its base would be lost.
        (_U, _A): Outcome.CONFLICT,
        (_U, _C): Outcome.KEEP_MINE,
        (_U, _U): Outcome.CONFLICT,
        (_U, _M): Outcome.CONFLICT,
        (_M, _A): Outcome.CONFLICT,
        (_M, _C): Outcome.ON_TOP,
        (_M, _U): Outcome.CONFLICT,
        (_M, _M): Outcome.CONFLICT,
    }
)

_RANK = {Outcome.CONFLICT: 2, Outcome.DISCARD: 1}


def plan(mine: CommitOp, theirs: Iterable[CommitOp]) -> Outcome:
    """The outcome of committing ``mine`` after ``theirs`` (possibly none) became versions."""
    outcomes = [MATRIX[mine, t] for t in theirs]
    if not outcomes:
        return Outcome.ON_TOP if mine.is_delta else Outcome.KEEP_MINE
    return max(outcomes, key=lambda o: _RANK.get(o, 0))


def materialise(commits: Iterable[Commit]) -> tuple[SstMeta, ...]:
    """The live files of a snapshot, given its commits in snapshot order."""
    files: list[SstMeta] = []
    for c in commits:
        if c.op.is_delta:
            files.extend(c.files)
        else:
            files = list(c.files)
    return tuple(files)


def resolve(
    mine: Commit, current: Version, theirs: Sequence[Commit], *, now_ms: int
) -> CommitResult:
    """The version that committing ``mine`` on top of ``current`` makes.

    ``theirs`` are the commits of the versions after mine's base up to ``current``, in order
    (empty when ``current`` is the base). Raises Conflict when the matrix forbids mine, or when
    files a compaction or update deleted are no longer live; returns ``committed=False`` with
    ``current`` when mine is discarded.
    """
    outcome = plan(mine.op, (t.op for t in theirs))
    if outcome is Outcome.CONFLICT:
        other = next(t for t in theirs if MATRIX[mine.op, t.op] is Outcome.CONFLICT)
        raise Conflict(
            f"table {mine.table_id}: {mine.op} commit {mine.commit_id} conflicts with the "
            f"concurrent {other.op} commit {other.commit_id}; redo it on version "
            f"{current.version}"
        )
    if outcome is Outcome.DISCARD:
        return CommitResult(committed=False, version=current)

    # Without an intervening full-set commit, the current files are the base's plus deltas, so
    # every file mine deletes must still be there; with one, only KEEP_MINE gets here and its
    # own full set is authoritative.
    if not any(not t.op.is_delta for t in theirs):
        gone = sorted(set(mine.deleted) - current.paths)
        if gone:
            raise Conflict(
                f"table {mine.table_id}: {mine.op} commit {mine.commit_id} deletes files that "
                f"are not live at version {current.version}: {gone}"
            )

    snapshot: tuple[str, ...]
    files: tuple[SstMeta, ...]
    if outcome is Outcome.ON_TOP:
        snapshot = (*current.snapshot, mine.commit_id)
        files = (*current.files, *mine.files)
    elif outcome is Outcome.REORDER:
        snapshot = (mine.commit_id, *(t.commit_id for t in theirs))
        files = materialise((mine, *theirs))
    else:
        snapshot = (mine.commit_id,)
        files = mine.files
    _check_unique(mine, files)

    return CommitResult(
        committed=True,
        version=Version(
            table_id=current.table_id,
            version=current.version + 1,
            commit_op=mine.op,
            timestamp_ms=max(now_ms, current.timestamp_ms + 1),
            snapshot=snapshot,
            flushed_seq=max(current.flushed_seq, mine.flushed_seq or 0),
            files=files,
            commit_id=mine.commit_id,
        ),
    )


def _check_unique(mine: Commit, files: Sequence[SstMeta]) -> None:
    # A path live twice would be read twice; it can only come from a caller reusing a path.
    seen: set[str] = set()
    for f in files:
        if f.path in seen:
            raise InvalidArgument(
                f"table {mine.table_id}: {mine.op} commit {mine.commit_id} adds {f.path!r}, "
                "which is already live"
            )
        seen.add(f.path)
