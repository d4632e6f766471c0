"""Which node serves each table a request names, as the servers see it.

The servers ask one question whatever the mode: "which of these tables are served elsewhere,
and where?" A standalone node serves everything (:class:`LocalRouter`); a cluster node
answers from its route cache, treating every table whose shard is open here as local even if
the cache still names another node (a failover it has not heard of yet). Requests for remote
tables go to their owner through :class:`~node.cluster.forward.Forwarder`.
"""

from __future__ import annotations

import contextvars
import functools
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent import futures
from dataclasses import replace
from typing import Protocol, TypeVar

from gnomon.errors import MovedPartway, NotOwner
from node.cluster.forward import Forwarder
from node.cluster.routes import Route, RouteCache

T = TypeVar("T")
K = TypeVar("K")
P = TypeVar("P")

#: How long a request waits for a table that is moving (migrate, split, merge, failover) to
#: open at its new home before the move becomes its caller's error.
MOVE_WAIT_S = 15.0

#: The ``ResponseHeader.code`` of a forwarded request that met "not owner" on the node it was
#: sent to (HTTP's Misdirected Request): the forwarding node looks for the owner again. Only
#: nodes see it; clients get the outcome of the retries.
MISDIRECTED = 421


def move_pauses(wait_s: float = MOVE_WAIT_S) -> Iterator[float]:
    """Growing pauses between tries of a request meeting a table on its way to another shard
    or node, for up to ``wait_s``."""
    deadline = time.monotonic() + wait_s
    pause = 0.02
    while time.monotonic() + pause <= deadline:
        yield pause
        pause = min(pause * 2, 0.5)


def through_moves(call: Callable[[], T], router: Router, *, wait_s: float = MOVE_WAIT_S) -> T:
    """``call()``; while it answers "not owner" (nothing was written or read: a table is on
    its way to another shard or node), forget the routes that led there and try again after a
    growing pause (:func:`move_pauses`)."""
    for pause in move_pauses(wait_s):
        try:
            return call()
        except MovedPartway:
            raise
        except NotOwner as e:
            router.owner_moved(e)
        time.sleep(pause)
    return call()


def resolved(value: T) -> futures.Future[T]:
    """A future holding ``value`` already (work done before the others were started)."""
    done: futures.Future[T] = futures.Future()
    done.set_result(value)
    return done


def where_served(
    items: Sequence[K],
    place: Callable[[Sequence[K]], list[list[P]]],
    run: Callable[[list[P]], T],
    *,
    item_of: Callable[[P], K],
    name_of: Callable[[P], str],
    moved: Callable[[NotOwner], None],
    submit: Callable[[Callable[[], T]], futures.Future[T]],
    partway: Callable[[MovedPartway], T] | None = None,
    wait_s: float = MOVE_WAIT_S,
) -> list[tuple[list[P], futures.Future[T]]]:
    """``run`` on each group ``place`` makes of ``items`` by where they are served, in
    parallel (a single group in this thread). A group that met "not owner" did nothing (or,
    :class:`MovedPartway`, stored the tables it names), so its other items alone are placed
    and run again after a growing pause (:func:`move_pauses`), ``moved`` told of each such
    answer first; nothing stored is run twice (a request's stored part written again would
    be stored twice); ``partway`` gives what the stored tables of such a group count for
    (writes: the rows stored; without it, the group fails with it). Each group with its
    outcome; one still meeting "not owner" at the end has it as its failure."""

    def start(groups: list[list[P]]) -> list[tuple[list[P], futures.Future[T]]]:
        if len(groups) == 1:
            done: futures.Future[T] = futures.Future()
            try:
                done.set_result(run(groups[0]))
            except Exception as e:
                done.set_exception(e)
            return [(groups[0], done)]
        # A copy of the caller's context for each: its identity goes with the work.
        return [
            (g, submit(functools.partial(contextvars.copy_context().run, run, g))) for g in groups
        ]

    running = start(place(items))

    def again(error: BaseException | None) -> bool:
        if isinstance(error, MovedPartway):
            return partway is not None
        return isinstance(error, NotOwner)

    for pause in move_pauses(wait_s):
        moving = [(g, e) for g, f in running if again(e := f.exception())]
        if not moving:
            break
        running = [(g, f) for g, f in running if not again(f.exception())]
        rest: list[K] = []
        for group, error in moving:
            assert isinstance(error, NotOwner)
            moved(error)
            written = error.written if isinstance(error, MovedPartway) else frozenset()
            if partway is not None and isinstance(error, MovedPartway):
                running.append(
                    ([p for p in group if name_of(p) in written], resolved(partway(error)))
                )
            rest += [item_of(p) for p in group if name_of(p) not in written]
        time.sleep(pause)
        running += start(place(rest))
    return running


class Router(Protocol):
    def route(self, tables: Sequence[str]) -> dict[str, str]:
        """The endpoint of the node serving each table it knows (the Route RPC's answer)."""

    def remote(self, tables: Sequence[str]) -> dict[str, str]:
        """The tables served by another node, with its endpoint; tables served here or
        unknown (about to be created) are left out."""

    def remote_routes(self, tables: Sequence[str]) -> dict[str, Route]:
        """Like :meth:`remote`, with the owners' other endpoints (``Route.endpoints``)."""

    def routes(self, tables: Sequence[str]) -> dict[str, Route]:
        """The routes of the tables it knows, naming :attr:`me` for those served here."""

    @property
    def me(self) -> str:
        """This node's gRPC endpoint as routes name it ("" where there are no routes)."""

    def owner_moved(self, error: NotOwner) -> None:
        """A request met "not owner": forget what pointed it there."""

    @property
    def forwarder(self) -> Forwarder | None:
        """Sends requests to other nodes; None where there are none."""


class LocalRouter:
    """Standalone: every table is served here. Routes name ``advertise`` (host:port) when
    given; otherwise there are none, as with a stock standalone HoraeDB, and the SDK keeps
    using the address its user gave (a bind address such as 0.0.0.0 is no address to give)."""

    def __init__(self, advertise: str | None = None) -> None:
        self._advertise = advertise

    def route(self, tables: Sequence[str]) -> dict[str, str]:
        return {t: self._advertise for t in tables} if self._advertise else {}

    def remote(self, tables: Sequence[str]) -> dict[str, str]:
        return {}

    def remote_routes(self, tables: Sequence[str]) -> dict[str, Route]:
        return {}

    def routes(self, tables: Sequence[str]) -> dict[str, Route]:
        return {}

    @property
    def me(self) -> str:
        return self._advertise or ""

    def owner_moved(self, error: NotOwner) -> None:
        return None

    @property
    def forwarder(self) -> Forwarder | None:
        return None


class ClusterRouter:
    def __init__(
        self,
        me: str,
        routes: RouteCache,
        forwarder: Forwarder,
        *,
        local_shards: Callable[[], Sequence[int]],
    ) -> None:
        self._me = me
        self._routes = routes
        self._forwarder = forwarder
        self._local_shards = local_shards

    @property
    def me(self) -> str:
        return self._me

    def routes(self, tables: Sequence[str]) -> dict[str, Route]:
        return self._routes_now(tables)

    def _routes_now(self, tables: Sequence[str]) -> dict[str, Route]:
        """The routes of ``tables`` that name a node, this one for shards open here."""
        local = set(self._local_shards())
        out = {}
        for name, r in self._routes.lookup(tables).items():
            if r.shard_id in local and r.endpoint != self.me:
                r = replace(r, endpoint=self.me)
            if r.endpoint:
                out[name] = r
        return out

    def route(self, tables: Sequence[str]) -> dict[str, str]:
        return {t: r.endpoint for t, r in self._routes_now(tables).items()}

    def remote(self, tables: Sequence[str]) -> dict[str, str]:
        return {t: r.endpoint for t, r in self.remote_routes(tables).items()}

    def remote_routes(self, tables: Sequence[str]) -> dict[str, Route]:
        return {t: r for t, r in self._routes_now(tables).items() if r.endpoint != self.me}

    def owner_moved(self, error: NotOwner) -> None:
        if error.shard_id is not None:
            self._routes.invalidate(shard_id=error.shard_id)
        else:
            self._routes.invalidate()

    @property
    def forwarder(self) -> Forwarder | None:
        return self._forwarder
