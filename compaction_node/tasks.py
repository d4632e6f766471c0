"""The tasks a compaction node holds: ``slots`` merge at once, as many more wait their turn,
and further ones are refused (the data node then merges itself). What the node reports of its
load comes from here: running and queued tasks, slots, input bytes merged per second, CPU."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from gnomon.errors import Unavailable


@dataclass
class TaskInfo:
    task_id: str
    table_id: int
    inputs: int
    input_bytes: int
    requester: str
    taken: float = field(default_factory=time.monotonic)
    running: bool = False


@dataclass(frozen=True)
class Counts:
    done: int
    failed: int
    discarded: int
    bytes_read: int
    bytes_written: int


class Tasks:
    def __init__(self, slots: int, *, name: str) -> None:
        self.slots = slots
        self.name = name
        self._tasks: dict[str, TaskInfo] = {}
        self._cond = threading.Condition()
        self._done = self._failed = self._discarded = 0
        self._bytes_read = self._bytes_written = 0
        self._closed = False
        self._last = (time.monotonic(), time.process_time(), 0)
        self._last_figures: dict[str, float] = {}

    @contextmanager
    def slot(self, info: TaskInfo) -> Iterator[None]:
        """Hold a slot for the task (waiting behind the running ones); Unavailable when the
        node is full or stopping."""
        with self._cond:
            if self._closed:
                raise Unavailable(f"compaction node {self.name} is stopping")
            if len(self._tasks) >= 2 * self.slots:
                raise Unavailable(
                    f"compaction node {self.name} is full: {self.slots} tasks running and "
                    f"{len(self._tasks) - self.slots} waiting"
                )
            if info.task_id in self._tasks:
                raise Unavailable(f"task {info.task_id} is already on {self.name}")
            self._tasks[info.task_id] = info
            try:
                self._cond.wait_for(lambda: self._closed or self._running() < self.slots)
                if self._closed:
                    raise Unavailable(f"compaction node {self.name} is stopping")
                info.running = True
            except BaseException:
                del self._tasks[info.task_id]
                self._cond.notify_all()
                raise
        try:
            yield
        finally:
            with self._cond:
                del self._tasks[info.task_id]
                self._cond.notify_all()

    def _running(self) -> int:
        return sum(1 for t in self._tasks.values() if t.running)

    def finished(self, *, bytes_read: int, bytes_written: int) -> None:
        with self._cond:
            self._done += 1
            self._bytes_read += bytes_read
            self._bytes_written += bytes_written

    def failed(self) -> None:
        with self._cond:
            self._failed += 1

    def discarded(self) -> None:
        with self._cond:
            self._discarded += 1

    def close(self) -> None:
        """Refuse new tasks and wake the waiting ones (they are refused too)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    # -- what is reported --------------------------------------------------------------------

    def held(self) -> list[TaskInfo]:
        with self._cond:
            return sorted(self._tasks.values(), key=lambda t: t.taken)

    def counts(self) -> Counts:
        with self._cond:
            return Counts(
                self._done, self._failed, self._discarded, self._bytes_read, self._bytes_written
            )

    def load(self) -> float:
        """The share of the slots taken, waiting tasks counted: 1.0 is a full house."""
        with self._cond:
            return len(self._tasks) / self.slots

    def figures(self) -> dict[str, float]:
        """Running, queued, slots, input bytes merged per second and CPU seconds per second
        since the previous call (one call per heartbeat)."""
        now = (time.monotonic(), time.process_time(), self.counts().bytes_read)
        elapsed = max(now[0] - self._last[0], 1e-6)
        cpu = (now[1] - self._last[1]) / elapsed
        rate = (now[2] - self._last[2]) / elapsed
        self._last = now
        with self._cond:
            running = self._running()
            queued = len(self._tasks) - running
            done, failed = self._done, self._failed
        self._last_figures = {
            "running": float(running),
            "queued": float(queued),
            "slots": float(self.slots),
            "bytes_per_s": rate,
            "cpu": cpu,
            "tasks_done": float(done),
            "tasks_failed": float(failed),
        }
        return dict(self._last_figures)

    def last_figures(self) -> dict[str, float]:
        """What the last :meth:`figures` call reported (the rates of the last heartbeat)."""
        return dict(self._last_figures)
