"""The records of the manifest: commits (what one operation did to a table's file set) and
versions (which commits, in which order, make up the table at one point in its history)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import NamedTuple

from gnomon.errors import InvalidArgument
from node.engine.sst.meta import SstMeta


class CommitOp(StrEnum):
    #: New files next to the live ones (a flush).
    APPEND = "append"
    #: Live files rewritten into fewer ones holding the same rows.
    COMPACTION = "compaction"
    #: Live files rewritten with changed rows (the file set is replaced).
    UPDATE = "update"
    #: Delta files merged on read with the live ones.
    MERGE = "merge"

    @property
    def is_delta(self) -> bool:
        """A delta commit only adds files; its version's snapshot is the previous one plus it.
        The others carry the table's whole file set and start a new snapshot."""
        return self in (CommitOp.APPEND, CommitOp.MERGE)


def _unique_paths(what: str, paths: Iterable[str]) -> frozenset[str]:
    seen: set[str] = set()
    for p in paths:
        if p in seen:
            raise InvalidArgument(f"{what}: path {p!r} is listed twice")
        seen.add(p)
    return frozenset(seen)


@dataclass(frozen=True)
class Commit:
    """One operation on a table's file set, immutable once written.

    For APPEND and MERGE, ``files`` are the files the commit adds and ``deleted`` is empty. For
    COMPACTION and UPDATE, ``files`` is every live file of the table after the operation (the
    base version's files minus ``deleted``, plus the new ones), so that a version whose snapshot
    starts with this commit needs nothing older to be resolved; ``deleted`` keeps what the
    operation removed so a reordering can check those files are still live.
    """

    commit_id: str
    table_id: int
    op: CommitOp
    files: tuple[SstMeta, ...]
    deleted: tuple[str, ...]
    #: WAL sequence up to which the table's rows are in SSTs once this commit is visible.
    flushed_seq: int | None
    timestamp_ms: int
    paths: frozenset[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        what = f"table {self.table_id}: {self.op} commit {self.commit_id}"
        paths = _unique_paths(what, (f.path for f in self.files))
        deleted = _unique_paths(what, self.deleted)
        if self.op.is_delta and deleted:
            raise InvalidArgument(f"{what} deletes {sorted(deleted)}; {self.op} only adds files")
        both = paths & deleted
        if both:
            raise InvalidArgument(f"{what} both adds and deletes {sorted(both)}")
        object.__setattr__(self, "paths", paths)


@dataclass(frozen=True)
class Version:
    """The table at one version: the ordered commits of its snapshot and the live files they
    resolve to. Version 0 is the empty table created by ``create_table`` (no commit)."""

    table_id: int
    version: int
    commit_op: CommitOp | None
    timestamp_ms: int
    snapshot: tuple[str, ...]
    #: Highest ``flushed_seq`` of any commit so far (0 before the first); never decreases.
    flushed_seq: int
    files: tuple[SstMeta, ...]
    #: The commit that produced this version (None for version 0).
    commit_id: str | None = None

    @property
    def paths(self) -> frozenset[str]:
        return frozenset(f.path for f in self.files)


@dataclass(frozen=True)
class CommitResult:
    """``committed`` is False only for a compaction discarded because the file set it
    rewrote changed under it; ``version`` is then the current version, which does not contain
    the compaction's output (the caller should delete those files)."""

    committed: bool
    version: Version


class VersionInfo(NamedTuple):
    version: int
    timestamp_ms: int
    commit_op: CommitOp | None
