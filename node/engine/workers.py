"""The engine's background threads: flush workers tables ask for flushes, and periodic
chores (garbage collection, the compaction check)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from node.engine.table import Table

log = logging.getLogger("gnomon.engine")


class Flusher:
    """Background flush workers: tables ask for a flush, a worker flushes until the table has
    no immutable memtable left. A failed flush is retried with backoff; the memtable and its
    WAL records stay until it succeeds, so nothing is lost meanwhile."""

    def __init__(self, threads: int) -> None:
        self._pending: list[Table] = []
        self._cond = threading.Condition()
        self._stop = False
        self._workers = [
            threading.Thread(target=self._run, name=f"gnomon-flush-{i}", daemon=True)
            for i in range(threads)
        ]
        for w in self._workers:
            w.start()

    def request(self, table: Table) -> None:
        with self._cond:
            if table not in self._pending:
                self._pending.append(table)
            self._cond.notify()

    def _run(self) -> None:
        backoff = 0.1
        while True:
            with self._cond:
                while not self._pending and not self._stop:
                    self._cond.wait()
                if self._stop:
                    return
                table = self._pending.pop(0)
            try:
                while table.flush_next():
                    pass
                backoff = 0.1
            except Exception as e:  # keep the worker alive; the table keeps its memtable
                table.last_flush_error = e
                log.error("flush failed; will retry", extra={"table": table.name, "error": repr(e)})
                with self._cond:
                    self._cond.wait(backoff)
                    backoff = min(backoff * 2, 30.0)
                self.request(table)

    def stop(self) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        for w in self._workers:
            w.join(timeout=60)


class Periodic:
    """Runs ``fn`` every ``interval_s`` seconds on a daemon thread until stopped."""

    def __init__(self, interval_s: float, fn: Callable[[], object], *, name: str) -> None:
        self._interval_s = interval_s
        self._fn = fn
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if interval_s > 0:
            self._thread = threading.Thread(target=self._run, name=name, daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            self._fn()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=60)
