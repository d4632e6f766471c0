"""Whose query runs next (node/sql/admission.py), on threads as a server runs queries: a
freed turn goes to the user running the fewest, so one user's flood never waits ahead of
another user's query; one user never takes every turn; the queues are bounded for the
server and for each user, refusing at once past them; a query waits at most the queue
timeout; a query whose caller goes away leaves the queue."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from gnomon.errors import Cancelled, Unavailable
from node.security.context import acting_as
from node.security.principal import Principal
from node.sql.cancel import Queries, QueryLimits
from testkit.wait import wait_until

pytestmark = pytest.mark.unit

FLOODER = Principal("flooder")
OTHER = Principal("other")
#: Long enough never to pass in these tests unless one checks it.
LONG_S = 60.0


class Query:
    """One query on a thread of its own, as ``user``: it holds its turn until released."""

    def __init__(
        self,
        queries: Queries,
        user: Principal,
        started: list[str],
        probe: Callable[[], bool] | None = None,
    ) -> None:
        self.name = f"{user.name}-{len(started)}-{id(self)}"
        self.admitted = threading.Event()
        self.release = threading.Event()
        self.error: Exception | None = None

        def run() -> None:
            try:
                with acting_as(user), queries.running(probe=probe):
                    started.append(self.name)
                    self.admitted.set()
                    self.release.wait(LONG_S)
            except Exception as e:
                self.error = e
                self.admitted.set()

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def done(self) -> None:
        self.release.set()
        self.thread.join(LONG_S)


def _queued(
    queries: Queries, n: int, queries_of: list[Query], user: Principal, started: list[str]
) -> None:
    """Start ``n`` queries of ``user`` that must wait, once the queue holds them."""
    before = queries.queued
    queries_of.extend(Query(queries, user, started) for _ in range(n))
    wait_until(f"{n} more queued", lambda: queries.queued == before + n, timeout_s=10, poll_s=0.005)


def test_a_freed_turn_goes_to_the_user_running_fewest_not_the_first_queued() -> None:
    queries = Queries(
        limits=QueryLimits(max_concurrent=2, max_concurrent_per_user=2, queue_timeout_s=LONG_S)
    )
    started: list[str] = []
    running = [Query(queries, FLOODER, started) for _ in range(2)]
    for q in running:
        q.admitted.wait(LONG_S)
    flood: list[Query] = []
    _queued(queries, 3, flood, FLOODER, started)
    other: list[Query] = []
    _queued(queries, 1, other, OTHER, started)
    running[0].done()
    other[0].admitted.wait(LONG_S)
    # The other user's query, queued last, took the freed turn; the flood still waits.
    assert started[2:] == [other[0].name]
    assert queries.queued == 3
    for q in [*running, *other, *flood]:
        q.done()
    assert [q.error for q in flood] == [None] * 3
    assert queries.queued == 0 and queries.running_now == 0


def test_one_user_never_takes_every_turn() -> None:
    queries = Queries(
        limits=QueryLimits(max_concurrent=3, max_concurrent_per_user=2, queue_timeout_s=LONG_S)
    )
    started: list[str] = []
    flood = [Query(queries, FLOODER, started) for _ in range(2)]
    for q in flood:
        q.admitted.wait(LONG_S)
    _queued(queries, 2, flood, FLOODER, started)
    other = Query(queries, OTHER, started)
    assert other.admitted.wait(LONG_S) and other.error is None  # at once, not queued
    assert queries.queued == 2
    for q in [other, *flood]:
        q.done()


def test_the_queues_are_bounded_for_each_user_and_the_server() -> None:
    queries = Queries(
        limits=QueryLimits(
            max_concurrent=1,
            max_concurrent_per_user=1,
            max_queued=3,
            max_queued_per_user=2,
            queue_timeout_s=LONG_S,
        )
    )
    started: list[str] = []
    first = Query(queries, FLOODER, started)
    first.admitted.wait(LONG_S)
    flood: list[Query] = []
    _queued(queries, 2, flood, FLOODER, started)
    refused = Query(queries, FLOODER, started)
    assert refused.admitted.wait(LONG_S)  # refused at once
    assert isinstance(refused.error, Unavailable)
    assert "max_queued_queries_per_user" in str(refused.error)
    other: list[Query] = []
    _queued(queries, 1, other, OTHER, started)
    full = Query(queries, Principal("third"), started)
    assert full.admitted.wait(LONG_S)
    assert isinstance(full.error, Unavailable) and "max_queued_queries)" in str(full.error)
    assert queries.refusals.counts()["user_queued"] == 1
    assert queries.refusals.counts()["queued"] == 1
    for q in [first, *flood, *other]:
        q.done()


def test_a_query_waits_at_most_the_queue_timeout() -> None:
    queries = Queries(limits=QueryLimits(max_concurrent=1, queue_timeout_s=0.2))
    started: list[str] = []
    first = Query(queries, FLOODER, started)
    first.admitted.wait(LONG_S)
    waited = Query(queries, OTHER, started)
    assert waited.admitted.wait(LONG_S)
    assert isinstance(waited.error, Unavailable)
    assert "waited 0.2 s for its turn" in str(waited.error)
    assert queries.refusals.counts()["concurrency"] == 1 and queries.queued == 0
    first.done()


def test_a_query_whose_caller_goes_away_leaves_the_queue() -> None:
    queries = Queries(limits=QueryLimits(max_concurrent=1, queue_timeout_s=LONG_S))
    started: list[str] = []
    first = Query(queries, FLOODER, started)
    first.admitted.wait(LONG_S)
    gone = threading.Event()
    left = Query(queries, FLOODER, started, probe=gone.is_set)
    wait_until("queued", lambda: queries.queued == 1, timeout_s=10, poll_s=0.005)
    gone.set()
    assert left.admitted.wait(LONG_S)
    assert isinstance(left.error, Cancelled)
    assert queries.queued == 0
    first.done()
    assert started == [first.name]


@pytest.mark.parametrize("user", [None, FLOODER])
def test_without_bounds_every_query_runs_at_once(user: Principal | None) -> None:
    queries = Queries()
    with acting_as(user), queries.running(), queries.running():
        assert queries.running_now == 2
