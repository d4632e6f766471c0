"""Whose query runs next on a server (:class:`Admission`): at most ``max_concurrent`` queries
at once, and ``max_concurrent_per_user`` of one user; the others wait in a queue bounded
for the server (``max_queued``) and for each user (``max_queued_per_user``), at most
``queue_timeout_s`` each. A freed slot goes to the waiting query whose user runs the fewest,
the longest waiting of them: one user's flood waits behind itself, never ahead of another
user's query. A query waiting while its caller goes away (its probe says so) leaves the
queue within :data:`PROBE_S`.

A query waits on the request's thread. The queue bounds bound those threads: a server's
pools have room for :meth:`QueryLimits.threads_held` of them and more, so a request past
the bounds is refused at once instead of waiting for a thread, unseen by any timeout (200
queries of one user left 184 unanswered after 45 s under a 30 s queue timeout). Queries
without a user (a server without authentication) have only the server's bounds.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from gnomon.errors import Cancelled, Unavailable

if TYPE_CHECKING:
    from node.sql.cancel import QueryLimits, Refusals

#: Seconds between two looks of a waiting query at its caller.
PROBE_S = 0.1


class _Waiter:
    __slots__ = ("granted", "user")

    def __init__(self, user: str | None) -> None:
        self.user = user
        self.granted = threading.Event()


class Admission:
    """The running and waiting queries of a server, by user."""

    def __init__(self, limits: QueryLimits, refusals: Refusals) -> None:
        self._limits = limits
        self._refusals = refusals
        self._lock = threading.Lock()
        self._running = 0
        self._running_by: Counter[str | None] = Counter()
        self._waiting: list[_Waiter] = []
        self._waiting_by: Counter[str | None] = Counter()

    @property
    def queued(self) -> int:
        """Queries waiting for their turn now."""
        with self._lock:
            return len(self._waiting)

    @contextlib.contextmanager
    def turn(self, user: str | None, probe: Callable[[], bool] | None) -> Iterator[None]:
        """Run the block when the query of ``user`` gets its turn: Unavailable when the
        queues are full or it waited queue_timeout_s, Cancelled when ``probe`` says its
        caller went away while it waited."""
        limits = self._limits
        if limits.max_concurrent is None and limits.max_concurrent_per_user is None:
            yield
            return
        waiter = self._enter(user)
        try:
            if not waiter.granted.is_set():
                self._wait(waiter, probe)
            yield
        finally:
            if waiter.granted.is_set():
                with self._lock:
                    self._running -= 1
                    self._running_by[user] -= 1
                    self._grant()

    def _enter(self, user: str | None) -> _Waiter:
        """The query's place: granted at once, or queued; Unavailable past a queue bound."""
        limits = self._limits
        waiter = _Waiter(user)
        with self._lock:
            # Free slots went to the waiting queries that may run as they were freed:
            # those waiting now may not, and a query that may takes its slot.
            if self._free() and self._under_cap(user):
                self._start(waiter)
                return waiter
            waiting = len(self._waiting)
            mine = self._waiting_by[user]
            if limits.max_queued is not None and waiting >= limits.max_queued:
                refused, message = "queued", (
                    f"server busy: {waiting} queries wait for their turn, as many as it queues "
                    "(setting max_queued_queries); try again"
                )
            elif (
                user is not None
                and limits.max_queued_per_user is not None
                and mine >= limits.max_queued_per_user
            ):
                refused, message = "user_queued", (
                    f"too many queries of user {user!r}: {mine} wait for their turn, as many "
                    "as one user may queue (setting max_queued_queries_per_user); try again"
                )
            else:
                self._waiting.append(waiter)
                self._waiting_by[user] += 1
                return waiter
        self._refusals.count(refused)
        raise Unavailable(message)

    def _wait(self, waiter: _Waiter, probe: Callable[[], bool] | None) -> None:
        limits = self._limits
        deadline = time.monotonic() + limits.queue_timeout_s
        while True:
            left = deadline - time.monotonic()
            if waiter.granted.wait(max(min(PROBE_S, left), 0.0)):
                return
            gone = probe is not None and probe()
            if not gone and time.monotonic() < deadline:
                continue
            with self._lock:
                if waiter.granted.is_set():
                    return  # its turn came as it gave up: it runs (a gone caller's stops)
                self._waiting.remove(waiter)
                self._waiting_by[waiter.user] -= 1
                running_mine = self._running_by[waiter.user]
            if gone:
                raise Cancelled(
                    "query cancelled: the client closed the connection while it waited for "
                    "its turn"
                )
            self._refusals.count("concurrency")
            if waiter.user is not None and not self._under_cap(waiter.user, running_mine):
                raise Unavailable(
                    f"server busy: user {waiter.user!r} has {running_mine} queries running "
                    f"and this one waited {limits.queue_timeout_s:g} s for its turn (settings "
                    "max_concurrent_queries_per_user, query_queue_timeout_s); try again"
                )
            raise Unavailable(
                f"server busy: {limits.max_concurrent} queries running and this one waited "
                f"{limits.queue_timeout_s:g} s for its turn (settings max_concurrent_queries, "
                "query_queue_timeout_s); try again"
            )

    # -- under the lock ---------------------------------------------------------------------

    def _free(self) -> bool:
        most = self._limits.max_concurrent
        return most is None or self._running < most

    def _under_cap(self, user: str | None, running: int | None = None) -> bool:
        most = self._limits.max_concurrent_per_user
        if user is None or most is None:
            return True
        return (self._running_by[user] if running is None else running) < most

    def _start(self, waiter: _Waiter) -> None:
        self._running += 1
        self._running_by[waiter.user] += 1
        waiter.granted.set()

    def _grant(self) -> None:
        """Give the free slots to waiting queries: each to one whose user may run one more,
        of the user running the fewest, the longest waiting of those."""
        while self._free():
            ready = [w for w in self._waiting if self._under_cap(w.user)]
            if not ready:
                return
            best = min(ready, key=lambda w: self._running_by[w.user])
            self._waiting.remove(best)
            self._waiting_by[best.user] -= 1
            self._start(best)
