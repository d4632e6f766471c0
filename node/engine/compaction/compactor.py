"""Compaction of one table: plan on the current manifest version, run the merge tasks, and
install each result with a ``compaction`` commit.

A commit names the version its task was planned on as its base, so the manifest's conflict
matrix decides what happens when something else committed meanwhile: flushes (appends) are
reordered on top of the compaction's output, an update or another compaction discards it. A
discard by another of this table's compactions (which work on disjoint files) is not final: if
no update or merge came in and every input is still live, the commit is tried again on the new
version. A discarded or failed result's files are deleted; after a crash they are orphans that
garbage collection removes, and the inputs stay live, so no row is lost or doubled.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass

from gnomon.errors import Conflict, GnomonError, NotFound
from node.engine.compaction.picker import can_purge, pick, ttl_floor
from node.engine.compaction.runner import run_task
from node.engine.compaction.task import CompactionTask
from node.engine.manifest import CommitOp, Version
from node.engine.sst.meta import SstMeta
from node.engine.table import Table
from node.engine.tombstones import RangeTombstone

log = logging.getLogger("gnomon.engine")

#: Rounds of plan-run-commit a synchronous compaction makes at most; each round shrinks the
#: table, so this bounds only pathological plans.
MAX_ROUNDS = 64


@dataclass(frozen=True)
class Job:
    base: Version
    #: The merge to run; None for a job that only removes files.
    task: CompactionTask | None
    #: Files the commit removes: the task's inputs, or expired and dead tombstone files.
    removes: tuple[SstMeta, ...]


def run_locally(table: Table, task: CompactionTask) -> list[SstMeta]:
    """Run ``task`` in this process, on ``table``'s store and scratch space."""
    return run_task(
        task, store=table.store, sst_files=table.sst_files, staging_dir=table.staging_dir
    )


class Compactor:
    def __init__(
        self,
        table: Table,
        *,
        run: Callable[[CompactionTask], list[SstMeta]] | None = None,
        clock: Callable[[], int] = lambda: int(time.time() * 1000),
    ) -> None:
        self.table = table
        self._run = run or functools.partial(run_locally, table)
        self._clock = clock
        self._busy: set[str] = set()
        #: Base versions of planned jobs not yet committed or released.
        self._bases: list[int] = []
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._closed = False
        #: SSTs merged away by background steps, for observability and tests.
        self.merged_away = 0

    # -- planning --------------------------------------------------------------------------------

    def plan(self, *, max_jobs: int | None = None) -> list[Job]:
        """Jobs for the current version; their files are busy until committed or released."""
        t = self.table
        version = t.manifest.current(t.table_id)
        tombstones = self._tombstones(version)
        now = self._clock()
        with self._lock:
            if self._closed:
                return []
            plan = pick(version.files, tombstones, t.info.options, now_ms=now, busy=self._busy)
            jobs: list[Job] = []
            if plan.expired or plan.dead_tombstones:
                jobs.append(Job(version, None, (*plan.expired, *plan.dead_tombstones)))
            for p in plan.picks:
                jobs.append(self._job(version, tombstones, p.inputs, p.purge_deletes, now))
            jobs = jobs[:max_jobs]
            for job in jobs:
                self._register(job)
        return jobs

    def _tombstones(self, version: Version) -> dict[str, list[RangeTombstone]]:
        files = self.table.sst_files
        return {f.path: files.tombstones(f.path) for f in version.files if not f.is_data}

    def _register(self, job: Job) -> None:
        self._busy.update(f.path for f in job.removes)
        self._bases.append(job.base.version)

    def plan_merge(self, paths: Sequence[str]) -> Job:
        """A job merging exactly the given data files of the current version (manual
        compaction); deletion markers are purged only if nothing outside them is older."""
        t = self.table
        version = t.manifest.current(t.table_id)
        by_path = {f.path: f for f in version.files if f.is_data}
        missing = sorted(set(paths) - by_path.keys())
        if missing:
            raise NotFound(f"table {t.name!r}: no live data files {missing}")
        inputs = tuple(by_path[p] for p in paths)
        tombstones = self._tombstones(version)
        purge = can_purge(inputs, list(by_path.values()))
        with self._lock:
            taken = self._busy & set(paths)
            if taken:
                raise Conflict(f"table {t.name!r}: files {sorted(taken)} are being compacted")
            job = self._job(version, tombstones, inputs, purge, self._clock())
            self._register(job)
        return job

    def _job(
        self,
        version: Version,
        tombstones: Mapping[str, Sequence[RangeTombstone]],
        inputs: tuple[SstMeta, ...],
        purge: bool,
        now: int,
    ) -> Job:
        info = self.table.info
        live = [r for rs in tombstones.values() for r in rs]
        ranges = tuple(
            r for r in live if any(r.may_shadow(f.min_ts, f.max_ts, f.min_seq) for f in inputs)
        )
        task = CompactionTask(
            table_id=self.table.table_id,
            schema=info.schema,
            options=info.options,
            inputs=inputs,
            range_tombstones=ranges,
            purge_deletes=purge,
            ttl_floor_ms=ttl_floor(info.options, now),
            applied_seq=version.flushed_seq,
            output_prefix=f"tables/{self.table.table_id}",
        )
        return Job(version, task, inputs)

    # -- acting ----------------------------------------------------------------------------------

    def run(self, job: Job) -> list[SstMeta]:
        """The job's merge (nothing for a job that only removes files); on failure the job's
        files are released and no output is left."""
        try:
            return [] if job.task is None else self._run(job.task)
        except BaseException:
            self.release(job)
            raise

    def finish(self, job: Job, outputs: Sequence[SstMeta]) -> int:
        """Commit ``outputs`` for ``job`` and release its files; the number of SSTs merged
        away, 0 if the result was discarded (its outputs are then deleted)."""
        try:
            committed = self.commit(job, outputs)
        finally:
            self.release(job)
        if not committed:
            self._delete(outputs)
            return 0
        return len(job.removes) - len(outputs)

    def execute(self, job: Job) -> int:
        return self.finish(job, self.run(job))

    def release(self, job: Job) -> None:
        with self._lock:
            self._busy.difference_update(f.path for f in job.removes)
            self._bases.remove(job.base.version)
            self._idle.notify_all()

    def close(self, timeout_s: float = 60.0) -> None:
        """Plan nothing more and wait for running jobs (a dropped table's files are deleted
        only after its last compaction has written its outputs)."""
        with self._lock:
            self._closed = True
            self._idle.wait_for(lambda: not self._bases, timeout_s)

    def pinned_version(self) -> int | None:
        """The oldest base version of a job in flight (retention must keep it), if any."""
        with self._lock:
            return min(self._bases, default=None)

    def commit(self, job: Job, outputs: Sequence[SstMeta]) -> bool:
        """Install ``outputs`` in place of the job's files; False if the result was discarded
        (the caller deletes the outputs)."""
        t = self.table
        removes = [f.path for f in job.removes]
        base = job.base.version
        with t.commit_lock:
            while True:
                try:
                    result = t.manifest.commit(
                        t.table_id,
                        CommitOp.COMPACTION,
                        base_version=base,
                        delete=removes,
                        add=outputs,
                    )
                except Conflict as e:
                    log.info("compaction dropped", extra={"table": t.name, "reason": str(e)})
                    return False
                if result.committed:
                    t.advance(result.version)
                    return True
                if not self._can_rebase(base, result.version, removes):
                    log.info("compaction discarded", extra={"table": t.name, "base": base})
                    return False
                base = result.version.version

    def _can_rebase(self, base: int, current: Version, removes: Sequence[str]) -> bool:
        if not set(removes) <= current.paths:
            return False
        between = [
            v.commit_op
            for v in self.table.manifest.versions(self.table.table_id)
            if base < v.version <= current.version
        ]
        return all(op in (CommitOp.APPEND, CommitOp.COMPACTION) for op in between)

    def _delete(self, outputs: Sequence[SstMeta]) -> None:
        # Best effort: what is left is unreferenced and garbage collection removes it.
        for meta in outputs:
            with suppress(GnomonError, OSError):
                self.table.store.delete(meta.path)

    # -- entry points ----------------------------------------------------------------------------

    def step(self) -> bool:
        """Plan and execute one job (background use); False when there was nothing to do."""
        jobs = self.plan(max_jobs=1)
        if not jobs:
            return False
        merged = self.execute(jobs[0])
        with self._lock:
            self.merged_away += merged
        return True

    def compact(self) -> int:
        """Compact until the picker finds nothing (synchronous); SSTs merged away."""
        total = 0
        for _ in range(MAX_ROUNDS):
            jobs = self.plan()
            if not jobs:
                break
            for i, job in enumerate(jobs):
                try:
                    total += self.execute(job)
                except BaseException:
                    for rest in jobs[i + 1 :]:
                        self.release(rest)
                    raise
        return total
