"""Runs procedures one step at a time: each step's changes and the procedure's advance are one
store commit, then the in-memory state and the event bus follow.

One runner per leading instance, driven by one thread (the leader's worker), so procedures never
race each other over the same shards; a procedure that cannot go on is marked failed and lets go
of its shards.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import deque
from dataclasses import replace
from typing import Any

from gnomon.errors import GnomonError, NotLeader
from gnomon.shard_control import NodeCalls
from meta.events import EventBus
from meta.model import Procedure, ProcedureStatus
from meta.procedures import KINDS, StepResult, release_all
from meta.state import ClusterState
from meta.store import NEXT_PROCEDURE_ID, ClusterStore, now_ms
from meta.tables import Batch

log = logging.getLogger("gnomon.meta.procedures")

#: Exit code of a meta process stopped by the crash hook (a test seam, see ``crash_after``).
CRASH_EXIT_CODE = 86


class ProcedureRunner:
    """Starts procedures and runs them to the end.

    ``crash_after`` (``"<kind>:<step>"``, a test seam) makes the process exit abruptly right
    after committing that step of the first procedure of that kind, to prove a successor
    resumes it.
    """

    def __init__(
        self,
        state: ClusterState,
        store: ClusterStore,
        lock: threading.RLock,
        bus: EventBus,
        calls: NodeCalls,
        *,
        crash_after: str | None = None,
    ) -> None:
        self._calls = calls
        self._state = state
        self._store = store
        self._lock = lock
        self._bus = bus
        self._crash_after = crash_after
        self._finished: deque[Procedure] = deque(maxlen=1000)
        self._done = threading.Condition(lock)

    def start(self, kind: str, params: dict[str, Any]) -> Procedure:
        """Persist a new procedure (it runs on the next :meth:`run_all`)."""
        if kind not in KINDS:
            raise GnomonError(f"unknown procedure kind {kind!r}")
        with self._lock:
            proc_id = self._state.counter(NEXT_PROCEDURE_ID) + 1
            proc = Procedure(proc_id, kind, params, 0, ProcedureStatus.RUNNING, "", now_ms())
            self._commit(Batch(procedures=[proc], counters={NEXT_PROCEDURE_ID: proc_id}))
        log.info("procedure started", extra={"procedure": proc_id, "kind": kind})
        return proc

    def run_all(self) -> int:
        """Run every running procedure to its end, oldest first; the number run."""
        count = 0
        while True:
            with self._lock:
                pending = self._state.running_procedures()
            if not pending:
                return count
            for proc in pending:
                self._run(proc)
                count += 1

    def find(self, proc_id: int) -> Procedure | None:
        with self._lock:
            found = self._state.procedures.get(proc_id)
            if found is not None:
                return found
            return next((p for p in self._finished if p.id == proc_id), None)

    def wait(self, proc_id: int, timeout_s: float) -> Procedure | None:
        """The procedure once it finished, or as it stands after ``timeout_s``."""
        with self._done:
            self._done.wait_for(
                lambda: (
                    (p := self.find(proc_id)) is None or p.status is not ProcedureStatus.RUNNING
                ),
                timeout=timeout_s,
            )
            return self.find(proc_id)

    def _run(self, proc: Procedure) -> None:
        steps = KINDS.get(proc.kind, ())
        while proc.status is ProcedureStatus.RUNNING:
            try:
                with self._lock:
                    if proc.step >= len(steps):
                        raise GnomonError(f"procedure kind {proc.kind!r} has no step {proc.step}")
                    result = steps[proc.step](self._state, proc)
                # Outside the lock: a data node flushing must not hold up routes and
                # heartbeats. The shards acted on are held by this procedure meanwhile.
                if result.act is not None:
                    result.act(self._calls)
            except NotLeader:
                raise
            except GnomonError as e:
                with self._lock:
                    proc = self._fail(proc, e)
                break
            with self._lock:
                done_step = proc.step
                proc = self._advance(proc, result, len(steps))
            self._bus.publish(result.events)
            self._maybe_crash(proc, done_step)
        with self._done:
            self._finished.append(proc)
            self._done.notify_all()
        log.info(
            "procedure finished",
            extra={"procedure": proc.id, "kind": proc.kind, "status": proc.status.value},
        )

    def _advance(self, proc: Procedure, result: StepResult, steps: int) -> Procedure:
        step = proc.step if result.repeat else proc.step + 1
        status = ProcedureStatus.DONE if step >= steps else ProcedureStatus.RUNNING
        params = proc.params if result.params is None else result.params
        new = replace(proc, step=step, status=status, params=params, updated_ms=now_ms())
        result.batch.procedures.append(new)
        self._commit(result.batch)
        return new

    def _fail(self, proc: Procedure, error: GnomonError) -> Procedure:
        log.warning("procedure failed", extra={"procedure": proc.id, "error": str(error)})
        failed = replace(proc, status=ProcedureStatus.FAILED, error=str(error), updated_ms=now_ms())
        batch = release_all(self._state, proc)
        batch.procedures.append(failed)
        self._commit(batch)
        return failed

    def _commit(self, batch: Batch) -> None:
        self._store.commit(batch)
        self._state.apply(batch)

    def _maybe_crash(self, proc: Procedure, step: int) -> None:
        if self._crash_after == f"{proc.kind}:{step}":
            log.error("crash hook: exiting", extra={"procedure": proc.id, "step": step})
            os._exit(CRASH_EXIT_CODE)
