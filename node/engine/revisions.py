"""Revisioned batch ingest: HCatalog's revision protocol on the engine's manifest.

A batch job (a Spark write) reserves a revision of a table, stages rows under it and commits or
aborts it. Staged rows are written as SSTs into the object store at once but only recorded
against the revision, so no read sees them. Revisions are numbered per table, monotonically,
and become visible strictly in that order:

- ``reserve``: a new revision in state ``reserved``, with a lease its owner extends by staging
  (or ``heartbeat``). A revision whose lease runs out (its owner vanished) is cancelled by the
  next ``sweep``, which the engine runs periodically and every reserve/commit/abort runs too.
- ``commit``: ``reserved`` → ``pending``; then every pending revision with no reserved one
  below it is published in revision order — all of its files in ONE manifest commit (APPEND,
  or UPDATE for an overwrite of a time range) — and becomes ``latest``.
- Attempts (Spark's commit protocol): a job's task may run more than once (a failed attempt
  retried, a speculative copy), and an attempt that fails midway has staged some rows already.
  Each attempt stages under its own id, and a commit naming the attempts whose work counts
  (those whose results reached the job's driver) publishes their files only; the others' are
  dropped with the commit. A commit naming none publishes everything staged.
- ``abort``/cancel: everything the revision staged is removed and it is marked cancelled;
  pending revisions above it that now have no reserved one below them are published.

Rows staged under a revision carry the WAL sequence reserved with it, so they order against
other writes of the table as if written at reservation time, and concurrent jobs' rows order by
revision. A published revision's rows are removed from the revision tables; ``latest`` is kept
per table, as is the last number handed out.

Crash safety: files are uploaded before they are recorded (a crash leaves unrecorded files the
garbage collector removes after its grace period); recorded files are kept from collection while
their revision is open. Publishing is the manifest commit, then the revision rows' removal: on
open, a pending revision whose files a kept manifest version already refers to was published
and only its rows are removed (``recover``).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, replace
from enum import StrEnum
from functools import partial
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from gnomon.errors import InvalidArgument, NotFound
from gnomon.store.api import KeyRange, Row, StructuredStore, TableContext, run_with_retries
from gnomon.store.spec import spec
from node.engine.batch import conform
from node.engine.flush import put_staged, split_sorted_by_window, sst_key
from node.engine.manifest import CommitOp
from node.engine.schema import PUT, ColumnType
from node.engine.sst.meta import SstMeta
from node.engine.sst.reader import conform_batches
from node.engine.sst.writer import write_sst
from node.engine.table import Table

log = logging.getLogger("gnomon.engine.revisions")

#: Default lease of a reserved revision: its owner must stage or heartbeat within it.
DEFAULT_LEASE_MS = 600_000
#: How long a cancelled revision's row is kept so its owner can learn what happened.
CANCELLED_KEPT_MS = 86_400_000

REVISIONS = spec(
    "revisions",
    [
        ("table_id", "long"),
        ("revision", "long"),
        ("state", "string"),
        ("owner", "string"),
        ("seq", "long"),
        ("mode", "string"),
        ("range_lo", "long"),
        ("range_hi", "long"),
        ("lease_ms", "long"),
        ("lease_until_ms", "long"),
        ("created_ms", "long"),
    ],
    ["table_id", "revision"],
)

#: The files staged under an open revision (a row per file, so concurrent stagers never
#: rewrite the same row).
REVISION_FILES = spec(
    "revision_files",
    [("table_id", "long"), ("revision", "long"), ("path", "string"), ("meta", "string")],
    ["table_id", "revision", "path"],
)

#: The files staged under an open revision by one attempt of a job's task; a table of its own
#: (not a column of ``revision_files``), so catalogs made before attempts existed load as they
#: are.
REVISION_ATTEMPT_FILES = spec(
    "revision_attempt_files",
    [
        ("table_id", "long"),
        ("revision", "long"),
        ("attempt", "string"),
        ("path", "string"),
        ("meta", "string"),
    ],
    ["table_id", "revision", "attempt", "path"],
)

#: The tables listing staged files, each keyed by table and revision first.
_FILE_TABLES = (REVISION_FILES.name, REVISION_ATTEMPT_FILES.name)

#: Per table: the last revision handed out and the latest published one.
REVISION_HEADS = spec(
    "revision_heads",
    [("table_id", "long"), ("last", "long"), ("latest", "long")],
    ["table_id"],
)


class RevisionState(StrEnum):
    #: Being written by its owner.
    RESERVED = "reserved"
    #: Its owner is done; waiting for a lower reserved revision to finish.
    PENDING = "pending"
    #: Published: its rows are visible.
    LATEST = "latest"
    #: Aborted, or its lease ran out: its files are deleted; the row stays for a day so its
    #: owner learns what happened.
    CANCELLED = "cancelled"


class WriteMode(StrEnum):
    APPEND = "append"
    #: Replace the rows of the revision's time range (all time if unbounded).
    OVERWRITE = "overwrite"


@dataclass(frozen=True)
class Revision:
    table_id: int
    revision: int
    state: RevisionState
    owner: str
    #: WAL sequence every row staged under the revision carries.
    seq: int
    mode: WriteMode
    #: [lo, hi) ms for an overwrite; None bounds are open.
    time_range: tuple[int | None, int | None]
    lease_ms: int
    lease_until_ms: int
    created_ms: int

    def to_json(self) -> dict[str, Any]:
        return {
            "table_id": self.table_id,
            "revision": self.revision,
            "state": self.state.value,
            "owner": self.owner,
            "mode": self.mode.value,
            "time_range": list(self.time_range),
        }


def _now_ms() -> int:
    return int(time.time() * 1000)


def _from_row(row: Row) -> Revision:
    return Revision(
        table_id=row["table_id"],
        revision=row["revision"],
        state=RevisionState(row["state"]),
        owner=row["owner"],
        seq=row["seq"],
        mode=WriteMode(row["mode"]),
        time_range=(row["range_lo"], row["range_hi"]),
        lease_ms=row["lease_ms"],
        lease_until_ms=row["lease_until_ms"],
        created_ms=row["created_ms"],
    )


def _to_row(r: Revision) -> Row:
    return {
        "table_id": r.table_id,
        "revision": r.revision,
        "state": r.state.value,
        "owner": r.owner,
        "seq": r.seq,
        "mode": r.mode.value,
        "range_lo": r.time_range[0],
        "range_hi": r.time_range[1],
        "lease_ms": r.lease_ms,
        "lease_until_ms": r.lease_until_ms,
        "created_ms": r.created_ms,
    }


def _inside(lo: int | None, hi: int | None, min_ts: int, max_ts: int) -> bool:
    return (lo is None or min_ts >= lo) and (hi is None or max_ts < hi)


def _overlaps(lo: int | None, hi: int | None, min_ts: int, max_ts: int) -> bool:
    return (lo is None or max_ts >= lo) and (hi is None or min_ts < hi)


class Revisions:
    """The revisions of one engine's tables. ``table`` looks an open table up by name (raising
    NotFound); ``by_id`` by id (None once dropped)."""

    def __init__(
        self,
        meta: StructuredStore,
        *,
        table: Callable[[str], Table],
        by_id: Callable[[int], Table | None],
        clock: Callable[[], int] = _now_ms,
    ) -> None:
        self._meta = meta
        self._table = table
        self._by_id = by_id
        self._clock = clock
        for table_spec in (REVISIONS, REVISION_FILES, REVISION_ATTEMPT_FILES, REVISION_HEADS):
            meta.create(table_spec, if_not_exists=True)
        # State changes and publishing are serialised per engine: a table's revisions are
        # only ever handled by the node that owns the table.
        self._cond = threading.Condition()

    # -- the protocol ----------------------------------------------------------------------------

    def reserve(
        self,
        name: str,
        *,
        owner: str = "",
        mode: WriteMode | str = WriteMode.APPEND,
        time_range: tuple[int | None, int | None] | None = None,
        lease_ms: int = DEFAULT_LEASE_MS,
    ) -> Revision:
        """A new revision of table ``name``, numbered after every earlier one."""
        table = self._table(name)
        mode = WriteMode(mode)
        lo, hi = time_range or (None, None)
        if mode is WriteMode.APPEND and (lo is not None or hi is not None):
            raise InvalidArgument(f"table {name!r}: a time range only applies to an overwrite")
        if lo is not None and hi is not None and lo >= hi:
            raise InvalidArgument(f"table {name!r}: empty overwrite time range [{lo}, {hi})")
        if lease_ms < 1:
            raise InvalidArgument(f"table {name!r}: revision lease must be positive")
        self.sweep()
        with self._cond:
            # Sequence and number are taken together, so revision order is sequence order.
            seq = table.reserve_seq()
            now = self._clock()

            def fn(ctx: TableContext) -> Revision:
                heads = ctx.table(REVISION_HEADS.name)
                head = heads.read({"table_id": table.table_id}) or {"last": 0, "latest": 0}
                rev = Revision(
                    table_id=table.table_id,
                    revision=int(head["last"]) + 1,
                    state=RevisionState.RESERVED,
                    owner=owner,
                    seq=seq,
                    mode=mode,
                    time_range=(lo, hi),
                    lease_ms=lease_ms,
                    lease_until_ms=now + lease_ms,
                    created_ms=now,
                )
                heads.write(
                    {"table_id": table.table_id, "last": rev.revision, "latest": head["latest"]}
                )
                ctx.table(REVISIONS.name).write(_to_row(rev))
                return rev

            rev = run_with_retries(self._meta, fn)
        log.info(
            "reserved revision",
            extra={"table": name, "revision": rev.revision, "mode": mode.value, "owner": owner},
        )
        return rev

    def stage(
        self,
        name: str,
        revision: int,
        data: pa.RecordBatch | pa.Table,
        *,
        attempt: str | None = None,
    ) -> int:
        """Write rows under a reserved revision, invisible until it is published; returns how
        many. Each call writes one SST per segment window it touches. ``attempt`` names the
        task attempt staging them (see ``commit``)."""
        table = self._table(name)
        rev = self._open(table, revision)
        info = table.info
        schema = info.schema
        # String tags outside the primary key stay in the dictionary encoding their series
        # ids are computed from: the sort then moves their indices, not their strings, and
        # the SSTs are written from the dictionaries.
        dictionary = tuple(
            c.name
            for c in schema.columns
            if c.is_tag and c.type is ColumnType.STRING and c.name not in schema.primary_key
        )
        # No size limit: callers stage in chunks (Flight puts are cut at PUT_CHUNK_BYTES).
        batch = conform(name, schema, data, max_bytes=2**62, dictionary=dictionary)
        if batch.num_rows == 0:
            return 0
        lo, hi = rev.time_range
        if rev.mode is WriteMode.OVERWRITE and (lo is not None or hi is not None):
            ts_min, ts_max = (
                v.as_py()
                for v in pc.min_max(
                    batch.column(info.schema.timestamp_key).cast(pa.int64())
                ).values()
            )
            if not _inside(lo, hi, ts_min, ts_max):
                raise InvalidArgument(
                    f"table {name!r} revision {revision}: rows from {ts_min} to {ts_max} lie "
                    f"outside the overwritten time range [{lo}, {hi})"
                )
        n = batch.num_rows
        rows = pa.Table.from_batches(
            [
                pa.RecordBatch.from_arrays(
                    [
                        *batch.columns,
                        pa.array(np.full(n, rev.seq, dtype=np.uint64)),
                        pa.array(np.full(n, PUT, dtype=np.uint8)),
                    ],
                    schema=schema.storage_projection(
                        tuple(schema.storage_arrow().names), dictionary
                    ),
                )
            ]
        )
        metas: list[SstMeta] = []
        try:
            for window_start, part in split_sorted_by_window(rows, info.schema, info.options):
                key = sst_key(table.table_id, window_start)
                metas.append(
                    put_staged(
                        table.store,
                        table.staging_dir,
                        key,
                        partial(
                            write_sst,
                            part,
                            table_id=table.table_id,
                            schema=info.schema,
                            options=info.options,
                            key=key,
                        ),
                    )
                )
            self._record(table, revision, metas, attempt)
        except BaseException:
            self._delete_files(table, [m.path for m in metas])
            raise
        return n

    def heartbeat(self, name: str, revision: int) -> Revision:
        """Extend a reserved revision's lease."""
        table = self._table(name)
        return run_with_retries(self._meta, lambda ctx: self._touch(ctx, table, revision))

    def commit(
        self,
        name: str,
        revision: int,
        *,
        attempts: Collection[str] | None = None,
        wait_s: float = 0.0,
    ) -> Revision:
        """Finish a reserved revision (→ pending) and publish what can be published. Waits
        up to ``wait_s`` for this revision to become latest (lower revisions still reserved
        hold it back); returns it in the state it reached. With ``attempts``, only the files
        those attempts staged are published: the rest (failed or superseded attempts, and
        files staged outside any attempt) are dropped, in the same transaction that ends
        staging, and deleted."""
        table = self._table(name)
        self.sweep()
        kept = None if attempts is None else frozenset(attempts)

        def fn(ctx: TableContext) -> tuple[Revision, list[str]]:
            rev = self._reserved(ctx, table, revision)
            rev = replace(rev, state=RevisionState.PENDING)
            ctx.table(REVISIONS.name).write(_to_row(rev))
            return rev, [] if kept is None else self._drop_attempts(ctx, table, revision, kept)

        with self._cond:
            rev, dropped = run_with_retries(self._meta, fn)
            self._delete_dropped(table, revision, dropped)
            self._advance(table)
            deadline = time.monotonic() + wait_s
            while True:
                current = self.get(name, revision)
                remaining = deadline - time.monotonic()
                if current.state is RevisionState.LATEST or remaining <= 0:
                    break
                self._cond.wait(min(remaining, 1.0))
        log.info(
            "committed revision",
            extra={"table": name, "revision": revision, "state": current.state.value},
        )
        return current if current.state is RevisionState.LATEST else rev

    def abort(self, name: str, revision: int) -> None:
        """Cancel a reserved revision: delete everything it staged, then publish the pending
        revisions it was holding back."""
        table = self._table(name)
        with self._cond:
            self._cancel(table, revision)
            self._advance(table)

    def get(self, name: str, revision: int) -> Revision:
        """A revision as it is now; a published one is reported ``latest`` (its details are
        gone). NotFound for one never reserved."""
        table = self._table(name)

        def fn(ctx: TableContext) -> tuple[Row | None, Row | None]:
            row = ctx.table(REVISIONS.name).read({"table_id": table.table_id, "revision": revision})
            head = ctx.table(REVISION_HEADS.name).read({"table_id": table.table_id})
            return row, head

        row, head = run_with_retries(self._meta, fn)
        if row is not None:
            return _from_row(row)
        if head is not None and revision <= head["latest"] and revision >= 1:
            return Revision(
                table.table_id, revision, RevisionState.LATEST, "", 0, WriteMode.APPEND,
                (None, None), 0, 0, 0,
            )  # fmt: skip
        raise NotFound(f"table {name!r} has no revision {revision}")

    def open_revisions(self, name: str) -> list[Revision]:
        """The reserved and pending revisions of a table, lowest first."""
        table = self._table(name)
        revs = [_from_row(r) for r in self._rows(table.table_id)]
        return [r for r in revs if r.state is not RevisionState.CANCELLED]

    def latest(self, name: str) -> int:
        """The latest published revision of the table (0 if none)."""
        table = self._table(name)
        head = run_with_retries(
            self._meta,
            lambda ctx: ctx.table(REVISION_HEADS.name).read({"table_id": table.table_id}),
        )
        return 0 if head is None else int(head["latest"])

    def sweep(self) -> int:
        """Cancel reserved revisions whose lease ran out (returns how many), and forget
        cancelled ones older than ``CANCELLED_KEPT_MS``."""
        now = self._clock()
        rows = run_with_retries(self._meta, lambda ctx: list(ctx.table(REVISIONS.name).scan()))
        old = [
            {"table_id": r["table_id"], "revision": r["revision"]}
            for r in rows
            if r["state"] == RevisionState.CANCELLED.value
            and r["created_ms"] < now - CANCELLED_KEPT_MS
        ]
        if old:

            def forget(ctx: TableContext) -> None:
                for key in old:
                    ctx.table(REVISIONS.name).delete(key)

            run_with_retries(self._meta, forget)
        expired = [
            _from_row(r)
            for r in rows
            if r["state"] == RevisionState.RESERVED.value and r["lease_until_ms"] < now
        ]
        cancelled = 0
        for rev in expired:
            table = self._by_id(rev.table_id)
            if table is None:
                continue
            with self._cond:
                try:
                    self._cancel(table, rev.revision, expired_before=now)
                except NotFound:
                    continue  # finished or renewed meanwhile
                cancelled += 1
                log.warning(
                    "cancelled revision whose owner vanished",
                    extra={"table": table.name, "revision": rev.revision, "owner": rev.owner},
                )
                self._advance(table)
        return cancelled

    def staged_paths(self, table_id: int) -> set[str]:
        """Files recorded under the table's open revisions (kept from garbage collection)."""
        key = {"table_id": table_id}
        return set(
            run_with_retries(self._meta, lambda ctx: self._file_rows(ctx, key, ["path"])).keys()
        )

    def recover(self) -> None:
        """After a restart: finish publishing pending revisions a crash interrupted (their
        manifest commit is made, only their rows remain), then publish what can be."""
        tables: set[int] = set()
        for row in run_with_retries(self._meta, lambda ctx: list(ctx.table(REVISIONS.name).scan())):
            tables.add(int(row["table_id"]))
        for table_id in sorted(tables):
            table = self._by_id(table_id)
            if table is not None:
                with self._cond:
                    self._advance(table)

    def forget(self, table_id: int) -> None:
        """Drop every revision row of a (dropped) table; its files go with the table."""

        def fn(ctx: TableContext) -> None:
            key = {"table_id": table_id}
            ctx.table(REVISIONS.name).delete_all(key)
            for files in _FILE_TABLES:
                ctx.table(files).delete_all(key)
            ctx.table(REVISION_HEADS.name).delete(key)

        run_with_retries(self._meta, fn)

    # -- internals -------------------------------------------------------------------------------

    def _rows(self, table_id: int) -> list[Row]:
        return run_with_retries(
            self._meta,
            lambda ctx: list(
                ctx.table(REVISIONS.name).scan(KeyRange.prefix({"table_id": table_id}))
            ),
        )

    def _reserved(self, ctx: TableContext, table: Table, revision: int) -> Revision:
        row = ctx.table(REVISIONS.name).read({"table_id": table.table_id, "revision": revision})
        if row is None or row["state"] != RevisionState.RESERVED.value:
            state = "not open (never reserved, or published)"
            if row is not None:
                state = f"already {row['state']}"
            raise NotFound(f"table {table.name!r}: revision {revision} is {state}")
        return _from_row(row)

    def _touch(self, ctx: TableContext, table: Table, revision: int) -> Revision:
        rev = self._reserved(ctx, table, revision)
        rev = replace(rev, lease_until_ms=self._clock() + rev.lease_ms)
        ctx.table(REVISIONS.name).write(_to_row(rev))
        return rev

    def _open(self, table: Table, revision: int) -> Revision:
        return run_with_retries(self._meta, lambda ctx: self._reserved(ctx, table, revision))

    def _record(
        self, table: Table, revision: int, metas: list[SstMeta], attempt: str | None
    ) -> None:
        """Record staged files in the same transaction that checks the revision is still
        reserved: after a concurrent cancel or commit the caller deletes them instead."""
        key: Row = {"table_id": table.table_id, "revision": revision}
        if attempt is not None:
            key["attempt"] = attempt

        def fn(ctx: TableContext) -> None:
            self._touch(ctx, table, revision)
            files = ctx.table(
                REVISION_FILES.name if attempt is None else REVISION_ATTEMPT_FILES.name
            )
            for m in metas:
                files.write({**key, "path": m.path, "meta": json.dumps(m.to_json())})

        run_with_retries(self._meta, fn)

    @staticmethod
    def _file_rows(ctx: TableContext, key: Row, columns: list[str]) -> dict[str, Row]:
        """The staged files under ``key`` (a table, or a table's revision), by path: those
        staged outside any attempt and those of every attempt."""
        return {
            r["path"]: r
            for files in _FILE_TABLES
            for r in ctx.table(files).scan(KeyRange.prefix(key), columns=columns)
        }

    def _files(self, table_id: int, revision: int) -> list[SstMeta]:
        key = {"table_id": table_id, "revision": revision}
        rows = run_with_retries(self._meta, lambda ctx: self._file_rows(ctx, key, ["path", "meta"]))
        return [SstMeta.from_json(json.loads(r["meta"])) for r in rows.values()]

    def _drop_attempts(
        self, ctx: TableContext, table: Table, revision: int, kept: frozenset[str]
    ) -> list[str]:
        """Forget the files of revision ``revision`` staged by attempts not in ``kept`` (and
        outside any attempt); returns their paths."""
        key = {"table_id": table.table_id, "revision": revision}
        loose = ctx.table(REVISION_FILES.name)
        paths = [r["path"] for r in loose.scan(KeyRange.prefix(key), columns=["path"])]
        if paths:
            loose.delete_all(key)
        by_attempt = ctx.table(REVISION_ATTEMPT_FILES.name)
        dropped: set[str] = set()
        for r in by_attempt.scan(KeyRange.prefix(key), columns=["attempt", "path"]):
            if r["attempt"] not in kept:
                dropped.add(r["attempt"])
                paths.append(r["path"])
        for attempt in sorted(dropped):
            by_attempt.delete_all({**key, "attempt": attempt})
        return paths

    def _delete_dropped(self, table: Table, revision: int, paths: list[str]) -> None:
        """Delete the files a commit dropped. They are no longer recorded, so what a failure
        here leaves is an orphan the garbage collector removes after its grace period: the
        commit stands either way."""
        if not paths:
            return
        try:
            self._delete_files(table, paths)
        except Exception as e:
            log.warning(
                "could not delete the files of dropped attempts; garbage collection will",
                extra={"table": table.name, "revision": revision, "error": repr(e)},
            )
            return
        log.info(
            "dropped the files of attempts not committed",
            extra={"table": table.name, "revision": revision, "files": len(paths)},
        )

    def _cancel(self, table: Table, revision: int, *, expired_before: int | None = None) -> None:
        def fn(ctx: TableContext) -> list[str]:
            rev = self._reserved(ctx, table, revision)
            if expired_before is not None and rev.lease_until_ms >= expired_before:
                raise NotFound(f"table {table.name!r}: revision {revision} was renewed")
            key = {"table_id": table.table_id, "revision": revision}
            paths = list(self._file_rows(ctx, key, ["path"]))
            for files in _FILE_TABLES:
                ctx.table(files).delete_all(key)
            ctx.table(REVISIONS.name).write(_to_row(replace(rev, state=RevisionState.CANCELLED)))
            return paths

        paths = run_with_retries(self._meta, fn)
        self._delete_files(table, paths)
        log.info(
            "cancelled revision",
            extra={"table": table.name, "revision": revision, "files": len(paths)},
        )
        self._cond.notify_all()

    def _delete_files(self, table: Table, paths: list[str]) -> None:
        for p in paths:
            table.store.delete(p)
            table.sst_files.forget(p)

    def _advance(self, table: Table) -> None:
        """Publish, lowest first, every pending revision that no reserved one precedes.
        Caller holds ``_cond``."""
        for row in self._rows(table.table_id):
            rev = _from_row(row)
            if rev.state is RevisionState.RESERVED:
                return
            if rev.state is RevisionState.CANCELLED:
                continue
            files = self._files(table.table_id, rev.revision)
            if not self._already_published(table, files):
                self._publish(table, rev, files)

            def fn(ctx: TableContext, rev: Revision = rev) -> None:
                key = {"table_id": rev.table_id, "revision": rev.revision}
                for files in _FILE_TABLES:
                    ctx.table(files).delete_all(key)
                ctx.table(REVISIONS.name).delete(key)
                heads = ctx.table(REVISION_HEADS.name)
                head = heads.read({"table_id": rev.table_id})
                assert head is not None  # written with the reservation
                heads.write({**head, "latest": max(int(head["latest"]), rev.revision)})

            run_with_retries(self._meta, fn)
            log.info(
                "published revision",
                extra={"table": table.name, "revision": rev.revision, "files": len(files)},
            )
            self._cond.notify_all()

    def _already_published(self, table: Table, files: list[SstMeta]) -> bool:
        # A crash between the manifest commit and removing the rows: the files' paths are
        # unique to the revision, so a kept version referring to one means it was published.
        return bool(files) and files[0].path in table.manifest.referenced_paths(table.table_id)

    def _publish(self, table: Table, rev: Revision, files: list[SstMeta]) -> None:
        if rev.mode is WriteMode.APPEND:
            if not files:
                return
            with table.commit_lock:
                result = table.manifest.commit(table.table_id, CommitOp.APPEND, add=files)
                table.advance(result.version)
            return
        # Rows of the range still in memtables must be in SSTs for the update to replace them.
        table.flush()
        lo, hi = rev.time_range
        with table.commit_lock:
            base = table.manifest.current(table.table_id)
            delete: list[str] = []
            add: list[SstMeta] = []
            for f in base.files:
                if not f.is_data or not _overlaps(lo, hi, f.min_ts, f.max_ts):
                    continue
                delete.append(f.path)
                if not _inside(lo, hi, f.min_ts, f.max_ts):
                    add.extend(self._outside(table, f, lo, hi))
            result = table.manifest.commit(
                table.table_id,
                CommitOp.UPDATE,
                base_version=base.version,
                add=[*add, *files],
                delete=delete,
            )
            table.advance(result.version)

    def _outside(
        self, table: Table, f: SstMeta, lo: int | None, hi: int | None
    ) -> Iterator[SstMeta]:
        """The rows of ``f`` outside [lo, hi) as a new SST (none if there are none)."""
        info = table.info
        with table.sst_files.pinned(f.path) as local:
            rows = pq.read_table(local)
        ts = pc.field(info.schema.timestamp_key).cast(pa.int64())
        keep: pc.Expression | None = None
        if lo is not None:
            keep = ts < lo
        if hi is not None:
            keep = ts >= hi if keep is None else keep | (ts >= hi)
        assert keep is not None  # a partially covered file means the range is bounded
        rows = rows.filter(keep)
        if rows.num_rows == 0:
            return
        storage = info.schema.storage_arrow()
        rows = pa.Table.from_batches(
            list(conform_batches(rows.to_batches(), storage, info.schema.fill_value)), storage
        )
        first = int(pc.min(rows.column(info.schema.timestamp_key).cast(pa.int64())).as_py())
        seg = info.options.segment_duration_ms
        key = sst_key(table.table_id, first // seg * seg)
        meta = put_staged(
            table.store,
            table.staging_dir,
            key,
            partial(
                write_sst,
                rows,
                table_id=table.table_id,
                schema=info.schema,
                options=info.options,
                key=key,
            ),
        )
        # Rewriting applies no tombstone the original had not applied.
        yield replace(meta, applied_seq=f.tombstones_applied)
