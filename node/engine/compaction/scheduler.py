"""Background compaction: worker threads (their number is the concurrency limit) take tables
that asked for compaction and run one job at a time for them. A table that had work is queued
again, so a busy table does not starve the others; two workers may compact one table at once,
on different windows (the compactor keeps their files apart)."""

from __future__ import annotations

import logging
import threading
from collections import deque

from node.engine.compaction.compactor import Compactor

log = logging.getLogger("gnomon.engine")


class CompactionScheduler:
    def __init__(self, threads: int, *, retry_s: float = 5.0) -> None:
        self._queue: deque[Compactor] = deque()
        self._queued: set[int] = set()
        self._running = 0
        self._cond = threading.Condition()
        self._stop = False
        self._retry_s = retry_s
        self._workers = [
            threading.Thread(target=self._run, name=f"gnomon-compact-{i}", daemon=True)
            for i in range(threads)
        ]
        for w in self._workers:
            w.start()

    @property
    def enabled(self) -> bool:
        return bool(self._workers)

    def request(self, compactor: Compactor) -> None:
        if not self._workers:
            return
        with self._cond:
            if id(compactor) not in self._queued and not self._stop:
                self._queued.add(id(compactor))
                self._queue.append(compactor)
                self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._stop:
                    self._cond.wait()
                if self._stop:
                    return
                compactor = self._queue.popleft()
                self._queued.discard(id(compactor))
                self._running += 1
            again = False
            try:
                again = compactor.step()
            except Exception as e:  # keep the worker alive; inputs stay live, nothing is lost
                log.error(
                    "compaction failed", extra={"table": compactor.table.name, "error": repr(e)}
                )
                with self._cond:
                    self._cond.wait(self._retry_s)
            finally:
                with self._cond:
                    self._running -= 1
                    self._cond.notify_all()
            if again:
                self.request(compactor)

    def wait_idle(self, timeout_s: float) -> bool:
        """Wait until no compaction is queued or running; False on timeout."""
        with self._cond:
            return self._cond.wait_for(
                lambda: self._stop or (not self._queue and not self._running), timeout_s
            )

    def stop(self) -> None:
        with self._cond:
            self._stop = True
            self._queue.clear()
            self._queued.clear()
            self._cond.notify_all()
        for w in self._workers:
            w.join(timeout=60)
