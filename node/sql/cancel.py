"""Stopping a query whose caller went away, whose time limit passed or whose server is
stopping.

A server runs each query under a :class:`CancelToken` (:meth:`Queries.running`). The token
is current in the request's thread while the query is planned, so the engine tables the
query registers take it along (:mod:`node.sql.provider`) and their scans call
:meth:`CancelToken.check` between batches: DataFusion calls the scans from threads of its
own, where the request's context is not current. A check raises :class:`Cancelled` once
the token is cancelled (the gRPC call ended, the server is stopping), its deadline passed
or its probe (has the HTTP client closed its connection?) says the caller is gone.

The token also carries the server's :class:`QueryLimits` for the query (its memory budget,
the largest answer, the values its generating functions may make) and the query's account
of the server's memory budget (:mod:`node.security.memory`, released when the query ends),
and :meth:`Queries.running` gives it its turn among the server's and its user's queries
(:mod:`node.sql.admission`). Each limit that turns a query away is counted in
:class:`Refusals` (the servers' ``/metrics`` show them).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass

from gnomon.errors import Cancelled, DeadlineExceeded, TooLarge
from gnomon.metrics import Tally
from node.security import context
from node.security.memory import MemoryBudget, QueryMemory
from node.sql.admission import Admission

#: The server-side limit on one query's time, unless configured otherwise.
DEFAULT_QUERY_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class QueryLimits:
    """What one query may take (None: no limit): queries running at once, of the server and
    of one user, and waiting their turn (:mod:`node.sql.admission`; each waits at most
    ``queue_timeout_s``), the statement's length, the memory its DataFusion operators hold,
    the size of its answer, the values its generating functions make
    (:mod:`node.sql.generators`); and what all running queries may hold together
    (``server_memory_bytes``, :mod:`node.security.memory`)."""

    max_concurrent: int | None = None
    max_concurrent_per_user: int | None = None
    max_queued: int | None = None
    max_queued_per_user: int | None = None
    queue_timeout_s: float = 30.0
    max_statement_bytes: int | None = None
    memory_bytes: int | None = None
    max_result_bytes: int | None = None
    server_memory_bytes: int | None = None
    max_generated_values: int | None = None

    def threads_held(self) -> int | None:
        """The most request threads queries hold at once, running or waiting their turn
        (None: no bound); a server's pools have room for them and more."""
        if self.max_concurrent is None or self.max_queued is None:
            return None
        return self.max_concurrent + self.max_queued


#: The limits a query can be refused by, as counted in :class:`Refusals`.
LIMITS = (
    "concurrency",
    "queued",
    "user_queued",
    "timeout",
    "statement_bytes",
    "memory_bytes",
    "result_bytes",
    "server_memory_bytes",
    "generated_values",
)


class Refusals(Tally):
    """How many queries each limit (:data:`LIMITS`) turned away since start."""

    def __init__(self) -> None:
        super().__init__(LIMITS)


class CancelToken:
    """Whether one query should stop. ``probe`` answers whether its caller is gone; it is
    asked at every check, so it must be cheap (one non-blocking system call)."""

    __slots__ = (
        "_probe",
        "_reason",
        "_timed_out",
        "deadline",
        "limits",
        "memory",
        "refusals",
        "timeout_s",
    )

    def __init__(
        self,
        timeout_s: float | None = None,
        *,
        probe: Callable[[], bool] | None = None,
        limits: QueryLimits | None = None,
        refusals: Refusals | None = None,
        memory: QueryMemory | None = None,
    ) -> None:
        self.timeout_s = timeout_s
        self.limits = limits or QueryLimits()
        self.refusals = refusals or Refusals()
        #: What the query holds of the server's memory budget.
        self.memory = memory or MemoryBudget().query()
        self.deadline = None if not timeout_s else time.monotonic() + timeout_s
        self._probe = probe
        self._reason: str | None = None
        self._timed_out = False

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
            # Each scan of the query meets the deadline; the query is counted once.
            if not self._timed_out:
                self._timed_out = True
                self.refusals.count("timeout")
            raise DeadlineExceeded(
                f"query exceeded the server's time limit of {self.timeout_s:g} s "
                "(setting query_timeout_s); narrow it (fewer columns, a time range, a LIMIT)"
            )

    def check_statement(self, statement: str) -> None:
        """TooLarge if ``statement`` is longer than the query's limit."""
        most = self.limits.max_statement_bytes
        # Characters are counted first: a statement within the limit in bytes is within it.
        if most is not None and len(statement) > most:
            size = len(statement.encode("utf-8", "surrogatepass"))
            if size > most:
                self.refusals.count("statement_bytes")
                raise TooLarge(
                    f"SQL statement of {size} bytes exceeds the limit of {most} bytes "
                    "(setting max_statement_bytes)"
                )

    def check_result(self, nbytes: int) -> None:
        """TooLarge if an answer of ``nbytes`` exceeds the query's limit."""
        limit = self.limits.max_result_bytes
        if limit is not None and nbytes > limit:
            self.refusals.count("result_bytes")
            raise TooLarge(
                f"query answer of {nbytes} bytes exceeds the server's limit of {limit} bytes "
                "(setting max_result_bytes); select fewer rows or columns, or aggregate"
            )


_current: ContextVar[CancelToken | None] = ContextVar("gnomon_cancel_token", default=None)


def current() -> CancelToken | None:
    """The token of the query running in this context, if any."""
    return _current.get()


def over_memory(detail: str) -> TooLarge:
    """The error of a query over its memory budget (DataFusion's ``detail``), counted
    against the running query's limits."""
    token = current()
    if token is not None:
        token.refusals.count("memory_bytes")
    return TooLarge(
        f"query needs more memory than its budget (setting query_memory_bytes): {detail}"
    )


class Queries:
    """The queries a server is running, each under its own token with the server's time
    limit (``timeout_s``, 0 for none), so that stopping can cancel those still running."""

    def __init__(
        self, timeout_s: float = DEFAULT_QUERY_TIMEOUT_S, limits: QueryLimits | None = None
    ) -> None:
        self.timeout_s = timeout_s
        self.limits = limits or QueryLimits()
        #: What the running queries hold together (server_memory_bytes).
        self.memory = MemoryBudget(self.limits.server_memory_bytes)
        self.refusals = Refusals()
        self._admission = Admission(self.limits, self.refusals)
        self._tokens: set[CancelToken] = set()
        self._cond = threading.Condition()
        self._stopping: str | None = None

    @property
    def queued(self) -> int:
        """Queries waiting for their turn now."""
        return self._admission.queued

    @contextlib.contextmanager
    def running(
        self,
        *,
        timeout_s: float | None = None,
        probe: Callable[[], bool] | None = None,
    ) -> Iterator[CancelToken]:
        """A token current for the query run inside; ``timeout_s`` (a caller's own deadline)
        shortens the server's limit, never extends it. The query waits for its turn first,
        as its caller's (the current principal's) query (:mod:`node.sql.admission`)."""
        limit = self.timeout_s or None
        if timeout_s is not None:
            limit = timeout_s if limit is None else min(limit, timeout_s)
        principal = context.current()
        user = None if principal is None else principal.name
        with self._admission.turn(user, probe), self._token(limit, probe) as token:
            yield token

    @contextlib.contextmanager
    def _token(
        self, limit: float | None, probe: Callable[[], bool] | None
    ) -> Iterator[CancelToken]:
        token = CancelToken(
            limit,
            probe=probe,
            limits=self.limits,
            refusals=self.refusals,
            memory=self.memory.query(lambda: self.refusals.count("server_memory_bytes")),
        )
        with self._cond:
            if self._stopping is not None:
                token.cancel(self._stopping)
            self._tokens.add(token)
        reset = _current.set(token)
        try:
            yield token
        finally:
            _current.reset(reset)
            token.memory.release_all()
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

    @property
    def running_now(self) -> int:
        with self._cond:
            return len(self._tokens)

    def wait_done(self, timeout_s: float) -> bool:
        """Wait until no query runs; False if some still do after ``timeout_s``."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._tokens, timeout_s)
