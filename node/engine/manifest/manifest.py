"""The versioned manifest of SST files, kept in the StructuredTable SPI.

A commit is written as an immutable row first; it becomes visible when a transaction that
finds the table's head still at the expected version writes the next version row and moves the
head (a compare-and-set). When the head moved, the commits that came in between are resolved
against mine with the conflict matrix (:mod:`node.engine.manifest.resolve`) and the
compare-and-set is tried again on the new head.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Callable, Sequence
from contextlib import suppress
from functools import partial
from typing import Any

from gnomon.errors import (
    AlreadyExists,
    Conflict,
    Fenced,
    GnomonError,
    InvalidArgument,
    NotFound,
)
from gnomon.store.api import KeyRange, Row, StructuredStore, TableContext, run_with_retries
from gnomon.store.filters import in_
from node.engine.lru import Lru
from node.engine.manifest import tables
from node.engine.manifest.model import Commit, CommitOp, CommitResult, Version, VersionInfo
from node.engine.manifest.resolve import materialise, resolve
from node.engine.sst.meta import SstMeta

#: Compare-and-set attempts of one commit; each failed one means another commit won.
COMMIT_ATTEMPTS = 64

# A loser backs off a random while before its next attempt, so that committers racing one head
# over a networked store (etcd, PostgreSQL) spread out instead of colliding in lockstep.
_BACKOFF_BASE_S = 0.001
_BACKOFF_CAP_S = 0.05

# Up to this many missing commits are fetched by key; beyond it, a prefix scan per chunk costs
# fewer round trips than one read each (etcd) and stays well under SQLite's bound-parameter cap.
_POINT_READS_MAX = 32
_SCAN_CHUNK = 500


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class Manifest:
    """The manifests of many tables, for one partition description, in one store.

    Thread-safe: concurrent commits on the same table are serialised by the compare-and-set on
    its head, in this process or any other using the same store.
    """

    def __init__(
        self,
        store: StructuredStore,
        partition_desc: str = "-",
        *,
        commit_cache_size: int = 4096,
        clock: Callable[[], int] = _now_ms,
        table_name: Callable[[int], str | None] = lambda _id: None,
        fence: Callable[[TableContext, int], None] = lambda _ctx, _id: None,
    ) -> None:
        for table_spec in tables.ALL:
            store.create(table_spec, if_not_exists=True)
        self._store = store
        self._partition = partition_desc
        self._clock = clock
        # Errors reach users, who know their tables by name, not by id.
        self._table_name = table_name
        # Runs inside every version install's transaction: a deposed shard owner's commit
        # fails there, in the same transaction that would have moved the head.
        self._fence = fence
        # Commit rows never change once written, so a cached one is never stale.
        self._commits: Lru[str, Commit] = Lru(commit_cache_size)
        # Resolved files of a version, by the id of the commit that made it: a commit makes at
        # most one version, so the id names the file set even across drop and re-create.
        self._files: Lru[str, tuple[SstMeta, ...]] = Lru(64)

    # -- table lifecycle -----------------------------------------------------------------------

    def create_table(self, table_id: int) -> Version:
        """Start the manifest of a table at version 0, with no files."""
        v0 = Version(
            table_id=table_id,
            version=0,
            commit_op=None,
            timestamp_ms=self._clock(),
            snapshot=(),
            flushed_seq=0,
            files=(),
        )

        def fn(ctx: TableContext) -> None:
            heads = ctx.table(tables.HEADS.name)
            if heads.read(self._key(table_id)) is not None:
                raise AlreadyExists(f"{self._name(table_id)} already has a manifest")
            ctx.table(tables.VERSIONS.name).write(tables.version_row(v0, self._partition))
            heads.write({**self._key(table_id), "version": 0})

        run_with_retries(self._store, fn)
        return v0

    def drop_table(self, table_id: int) -> None:
        """Delete every version and commit of a table."""

        def fn(ctx: TableContext) -> None:
            if not ctx.table(tables.HEADS.name).delete(self._key(table_id)):
                raise NotFound(f"{self._name(table_id)} has no manifest")
            ctx.table(tables.VERSIONS.name).delete_all(self._key(table_id))
            ctx.table(tables.COMMITS.name).delete_all(self._key(table_id))

        run_with_retries(self._store, fn)

    # -- reads ---------------------------------------------------------------------------------

    def current(self, table_id: int) -> Version:
        row = run_with_retries(
            self._store,
            lambda ctx: self._version_row(ctx, table_id, self._head(ctx, table_id)),
        )
        return self._version(row)

    def at_version(self, table_id: int, version: int) -> Version:
        row = run_with_retries(self._store, lambda ctx: self._version_row(ctx, table_id, version))
        return self._version(row)

    def at_timestamp(self, table_id: int, timestamp_ms: int) -> Version:
        """The latest version made at or before ``timestamp_ms``."""

        def fn(ctx: TableContext) -> Row:
            # Version timestamps strictly increase, so a binary search finds it in log reads.
            first = self._oldest_row(ctx, table_id)
            lo, hi = int(first["version"]), self._head(ctx, table_id)
            if first["timestamp_ms"] > timestamp_ms:
                raise NotFound(
                    f"{self._name(table_id)} has no version at timestamp {timestamp_ms}: "
                    f"its oldest kept version is from {first['timestamp_ms']}"
                )
            found = first
            while lo < hi:
                mid = (lo + hi + 1) // 2
                row = self._version_row(ctx, table_id, mid)
                if row["timestamp_ms"] <= timestamp_ms:
                    lo, found = mid, row
                else:
                    hi = mid - 1
            return found

        return self._version(run_with_retries(self._store, fn))

    def versions(self, table_id: int) -> list[VersionInfo]:
        """Every version of a table, oldest first."""
        rows = run_with_retries(
            self._store,
            lambda ctx: list(
                ctx.table(tables.VERSIONS.name).scan(
                    KeyRange.prefix(self._key(table_id)),
                    columns=["version", "timestamp_ms", "commit_op"],
                )
            ),
        )
        if not rows:
            raise NotFound(f"{self._name(table_id)} has no manifest")
        return [
            VersionInfo(
                int(r["version"]),
                int(r["timestamp_ms"]),
                None if r["commit_op"] is None else CommitOp(r["commit_op"]),
            )
            for r in rows
        ]

    def referenced_paths(self, table_id: int) -> set[str]:
        """Every file path some kept version of the table refers to. Within a snapshot only the
        first commit can carry a full file set, so the union of the files of every commit
        of every kept snapshot is exactly the union of the kept versions' files."""
        rows = run_with_retries(
            self._store,
            lambda ctx: list(
                ctx.table(tables.VERSIONS.name).scan(
                    KeyRange.prefix(self._key(table_id)), columns=["version", "snapshot"]
                )
            ),
        )
        if not rows:
            raise NotFound(f"{self._name(table_id)} has no manifest")
        ids = list(dict.fromkeys(cid for r in rows for cid in tables.snapshot_of(r)))
        head = int(rows[-1]["version"])
        return {f.path for c in self._load_commits(table_id, ids, head) for f in c.files}

    def expire(self, table_id: int, keep_from: int) -> int:
        """Delete the versions older than ``keep_from`` (never the current one) and the commits
        only they referred to; returns how many versions were deleted. Time travel to them
        fails from then on. Commit rows of in-flight commits are never touched: only ids in
        expired snapshots are candidates."""

        def fn(ctx: TableContext) -> int:
            self._fence(ctx, table_id)
            keep = min(keep_from, self._head(ctx, table_id))
            versions = ctx.table(tables.VERSIONS.name)
            key = self._key(table_id)
            rows = list(
                versions.scan(KeyRange.prefix(key), columns=["version", "snapshot", "commit_id"])
            )
            old = [r for r in rows if r["version"] < keep]
            if not old:
                return 0
            live = {cid for r in rows if r["version"] >= keep for cid in tables.snapshot_of(r)}
            dead = {cid for r in old for cid in tables.snapshot_of(r)} - live
            for r in old:
                versions.delete({**key, "version": r["version"]})
            commits = ctx.table(tables.COMMITS.name)
            for cid in dead:
                commits.delete({**key, "commit_id": cid})
            return len(old)

        return run_with_retries(self._store, fn)

    # -- commit --------------------------------------------------------------------------------

    def commit(
        self,
        table_id: int,
        op: CommitOp,
        *,
        base_version: int | None = None,
        add: Sequence[SstMeta] = (),
        delete: Sequence[str] = (),
        flushed_seq: int | None = None,
    ) -> CommitResult:
        """Add and delete files as of ``base_version`` (default: the current version).

        APPEND and MERGE only add. COMPACTION and UPDATE delete paths live at the base (else
        Conflict) and add their output. If other commits became versions after the base, the
        conflict matrix decides: Conflict, a discarded compaction (``committed=False``), or a
        new version that includes both.
        """
        op = CommitOp(op)
        if op.is_delta and delete:
            raise InvalidArgument(
                f"{self._name(table_id)}: {op} commits only add files, "
                f"they cannot delete {sorted(delete)}"
            )
        if flushed_seq is not None and flushed_seq < 0:
            raise InvalidArgument(
                f"{self._name(table_id)}: flushed_seq must be >= 0, got {flushed_seq}"
            )
        base = (
            self.current(table_id)
            if base_version is None
            else self.at_version(table_id, base_version)
        )
        mine = self._prepare(base, op, add, delete, flushed_seq)
        run_with_retries(
            self._store,
            lambda ctx: ctx.table(tables.COMMITS.name).write(
                tables.commit_row(mine, self._partition)
            ),
        )
        self._commits.put(mine.commit_id, mine)
        try:
            result = self._install(mine, base)
        except (Conflict, InvalidArgument, NotFound, Fenced):
            # Each of these means no version refers to the commit row (an SPI Conflict rolled
            # its transaction back); other errors may have come after the head moved.
            self._forget(mine)
            raise
        if not result.committed:
            self._forget(mine)
        return result

    def _prepare(
        self,
        base: Version,
        op: CommitOp,
        add: Sequence[SstMeta],
        delete: Sequence[str],
        flushed_seq: int | None,
    ) -> Commit:
        live = base.paths
        gone = sorted(set(delete) - live)
        if gone:
            raise Conflict(
                f"{self._name(base.table_id)}: {op} commit deletes files that are not live at "
                f"version {base.version}: {gone}"
            )
        again = sorted(f.path for f in add if f.path in live)
        if again:
            raise InvalidArgument(
                f"{self._name(base.table_id)}: {op} commit adds files already live at version "
                f"{base.version}: {again}"
            )
        files: tuple[SstMeta, ...]
        if op.is_delta:
            files = tuple(add)
        else:
            dropped = set(delete)
            files = (*(f for f in base.files if f.path not in dropped), *add)
        return Commit(
            commit_id=uuid.uuid4().hex,
            table_id=base.table_id,
            op=op,
            files=files,
            deleted=tuple(delete),
            flushed_seq=flushed_seq,
            timestamp_ms=self._clock(),
        )

    def _install(self, mine: Commit, base: Version) -> CommitResult:
        current = base
        theirs: list[Commit] = []
        last: Conflict | None = None
        for attempt in range(COMMIT_ATTEMPTS):
            if attempt:
                time.sleep(random.uniform(0, min(_BACKOFF_CAP_S, _BACKOFF_BASE_S * 2**attempt)))
            result = resolve(mine, current, theirs, now_ms=self._clock())
            if not result.committed:
                return result
            try:
                moved_to = self._store.transact(
                    partial(self._cas, new=result.version, expected=current.version)
                )
            except Conflict as e:
                last = e
                continue
            if moved_to is None:
                self._files.put(mine.commit_id, result.version.files)
                return result
            current = self.at_version(mine.table_id, moved_to)
            # Always against the original base: the matrix looks at everything mine missed.
            theirs = self._commits_after(mine.table_id, base.version, current.version)
        raise Conflict(
            f"{self._name(mine.table_id)}: {mine.op} commit {mine.commit_id} lost the "
            f"compare-and-set {COMMIT_ATTEMPTS} times; the table is too busy, retry later"
        ) from last

    def _cas(self, ctx: TableContext, *, new: Version, expected: int) -> int | None:
        """Install ``new`` if the head is still ``expected``; else the head's version."""
        self._fence(ctx, new.table_id)
        heads = ctx.table(tables.HEADS.name)
        key = self._key(new.table_id)
        row = heads.read(key)
        if row is None:
            raise NotFound(f"{self._name(new.table_id)} was dropped during the commit")
        if row["version"] != expected:
            return int(row["version"])
        ctx.table(tables.VERSIONS.name).write(tables.version_row(new, self._partition))
        heads.write({**key, "version": new.version})
        return None

    def _commits_after(self, table_id: int, base: int, upto: int) -> list[Commit]:
        """The commits of versions ``base + 1 .. upto``, in version order."""
        key = self._key(table_id)
        rows = run_with_retries(
            self._store,
            lambda ctx: list(
                ctx.table(tables.VERSIONS.name).scan(
                    KeyRange(
                        lower={**key, "version": base + 1},
                        upper={**key, "version": upto},
                        upper_inclusive=True,
                    ),
                    columns=["commit_id"],
                )
            ),
        )
        return self._load_commits(table_id, [r["commit_id"] for r in rows], upto)

    def _forget(self, mine: Commit) -> None:
        # Best effort: an unreferenced commit row is harmless, and failing here must not hide
        # the outcome the caller is about to get.
        with suppress(GnomonError):
            run_with_retries(
                self._store,
                lambda ctx: ctx.table(tables.COMMITS.name).delete(
                    {**self._key(mine.table_id), "commit_id": mine.commit_id}
                ),
            )

    # -- helpers -------------------------------------------------------------------------------

    def _key(self, table_id: int) -> dict[str, Any]:
        return {"table_id": table_id, "partition_desc": self._partition}

    def _name(self, table_id: int) -> str:
        name = self._table_name(table_id)
        table = f"table {table_id}" if name is None else f"table {name!r}"
        if self._partition == "-":
            return table
        return f"{table} partition {self._partition!r}"

    def _head(self, ctx: TableContext, table_id: int) -> int:
        row = ctx.table(tables.HEADS.name).read(self._key(table_id))
        if row is None:
            raise NotFound(f"{self._name(table_id)} has no manifest")
        return int(row["version"])

    def _oldest_row(self, ctx: TableContext, table_id: int) -> Row:
        for row in ctx.table(tables.VERSIONS.name).scan(
            KeyRange.prefix(self._key(table_id)), limit=1
        ):
            return row
        raise NotFound(f"{self._name(table_id)} has no manifest")

    def _version_row(self, ctx: TableContext, table_id: int, version: int) -> Row:
        row = ctx.table(tables.VERSIONS.name).read({**self._key(table_id), "version": version})
        if row is None:
            head = self._head(ctx, table_id)
            raise NotFound(
                f"{self._name(table_id)} has no version {version} (current version: {head})"
            )
        return row

    def _version(self, row: Row) -> Version:
        commit_id = row["commit_id"]
        if commit_id is None:
            return tables.version_from_row(row, ())
        files = self._files.get(commit_id)
        if files is None:
            commits = self._load_commits(row["table_id"], tables.snapshot_of(row), row["version"])
            files = materialise(commits)
            self._files.put(commit_id, files)
        return tables.version_from_row(row, files)

    def _load_commits(self, table_id: int, ids: Sequence[str], version: int) -> list[Commit]:
        """The commits ``ids`` (of ``version``, for messages), from the cache where possible
        and otherwise in one transaction, so a long cold snapshot costs O(len(ids)) reads."""
        found: dict[str, Commit] = {}
        for cid in ids:
            cached = self._commits.get(cid)
            if cached is not None:
                found[cid] = cached
        missing = [cid for cid in dict.fromkeys(ids) if cid not in found]
        if missing:
            for c in run_with_retries(
                self._store, lambda ctx: self._fetch_commits(ctx, table_id, missing)
            ):
                self._commits.put(c.commit_id, c)
                found[c.commit_id] = c
        lost = [cid for cid in ids if cid not in found]
        if lost:
            raise NotFound(
                f"{self._name(table_id)}: commits {lost[:5]} of version {version} are missing"
                + (f" (and {len(lost) - 5} more)" if len(lost) > 5 else "")
            )
        return [found[cid] for cid in ids]

    def _fetch_commits(self, ctx: TableContext, table_id: int, ids: list[str]) -> list[Commit]:
        commits = ctx.table(tables.COMMITS.name)
        key = self._key(table_id)
        rows: list[Row] = []
        if len(ids) <= _POINT_READS_MAX:
            for cid in ids:
                row = commits.read({**key, "commit_id": cid})
                if row is not None:
                    rows.append(row)
        else:
            for i in range(0, len(ids), _SCAN_CHUNK):
                chunk = ids[i : i + _SCAN_CHUNK]
                rows.extend(commits.scan(KeyRange.prefix(key), filter=in_("commit_id", chunk)))
        return [tables.commit_from_row(r) for r in rows]
