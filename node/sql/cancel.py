"""Stopping a query whose caller went away, whose time limit passed or whose server is
stopping.

A server runs each query under a :class:`CancelToken` (:meth:`Queries.running`). The token
is current in the request's thread while the query is planned, so the engine tables the
query registers take it along (:mod:`node.sql.provider`) and their scans call
:meth:`CancelToken.check` between batches: DataFusion calls the scans from threads of its
own, where the request's context is not current. A check raises :class:`Cancelled` once
the token is cancelled (the gRPC call ended, the server is stopping), its deadline passed
or its probe (has the HTTP client closed its connection?) says the caller is gone.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar

from gnomon.errors import Cancelled, DeadlineExceeded

#: The server-side limit on one query's time, unless configured otherwise.
DEFAULT_QUERY_TIMEOUT_S = 300.0


class CancelToken:
    """Whether one query should stop. ``probe`` answers whether its caller is gone; it is
    asked at every check, so it must be cheap (one non-blocking system call)."""

    __slots__ = ("_probe", "_reason", "deadline", "timeout_s")

    def __init__(
        self, timeout_s: float | None = None, *, probe: Callable[[], bool] | None = None
    ) -> None:
        self.timeout_s = timeout_s
        self.deadline = None if not timeout_s else time.monotonic() + timeout_s
        self._probe = probe
        self._reason: str | None = None

    def cancel(self, reason: str) -> None:
        """Stop the query at its next check; the first reason given is the one reported."""
        if self._reason is None:
            self._reason = reason

    @property
    def cancelled(self) -> bool:
        return self._reason is not None

    def check(self) -> None:
        """Raise Cancelled (DeadlineExceeded past the deadline) if the query should stop."""
        if self._reason is None and self._probe is not None and self._probe():
            self.cancel("the client closed the connection")
        if self._reason is not None:
            raise Cancelled(f"query cancelled: {self._reason}")
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise DeadlineExceeded(
                f"query exceeded the server's time limit of {self.timeout_s:g} s "
                "(setting query_timeout_s); narrow it (fewer columns, a time range, a LIMIT)"
            )


_current: ContextVar[CancelToken | None] = ContextVar("gnomon_cancel_token", default=None)


def current() -> CancelToken | None:
    """The token of the query running in this context, if any."""
    return _current.get()


class Queries:
    """The queries a server is running, each under its own token with the server's time
    limit (``timeout_s``, 0 for none), so that stopping can cancel those still running."""

    def __init__(self, timeout_s: float = DEFAULT_QUERY_TIMEOUT_S) -> None:
        self.timeout_s = timeout_s
        self._tokens: set[CancelToken] = set()
        self._cond = threading.Condition()
        self._stopping: str | None = None

    @contextlib.contextmanager
    def running(
        self, *, timeout_s: float | None = None, probe: Callable[[], bool] | None = None
    ) -> Iterator[CancelToken]:
        """A token current for the query run inside; ``timeout_s`` (a caller's own deadline)
        shortens the server's limit, never extends it."""
        limit = self.timeout_s or None
        if timeout_s is not None:
            limit = timeout_s if limit is None else min(limit, timeout_s)
        token = CancelToken(limit, probe=probe)
        with self._cond:
            if self._stopping is not None:
                token.cancel(self._stopping)
            self._tokens.add(token)
        reset = _current.set(token)
        try:
            yield token
        finally:
            _current.reset(reset)
            with self._cond:
                self._tokens.discard(token)
                self._cond.notify_all()

    def cancel_all(self, reason: str) -> int:
        """Cancel every running query, and any started from now on; returns how many ran."""
        with self._cond:
            self._stopping = reason
            for token in self._tokens:
                token.cancel(reason)
            return len(self._tokens)

    def wait_done(self, timeout_s: float) -> bool:
        """Wait until no query runs; False if some still do after ``timeout_s``."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._tokens, timeout_s)
