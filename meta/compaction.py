"""Choosing a compaction node for a data node that offloads a compaction.

A node is a candidate only while it holds a live lease *and* its last heartbeat is fresh (within
half its lease TTL): a node whose heartbeat broke keeps its lease for up to a TTL, during which
it may be hung or cut off, and a task sent there would only time out. Among candidates the
least loaded wins, by the load its last heartbeat reported plus what meta sent it since (a
heartbeat is seconds old; picks in between would otherwise all go to the same node); among
equally loaded ones, picks take turns. (What was sent since counts only for a node that
reports its slots, as each task takes one.)
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Mapping, Sequence


def least_loaded(candidates: Sequence[str], loads: Mapping[str, float], turn: int) -> str | None:
    """The candidate with the lowest load (unreported counts as 0); among equally loaded
    ones, the ``turn``-th in name order, so successive picks take turns. None when there is
    no candidate: the caller compacts locally, which is not an error."""
    if not candidates:
        return None
    lowest = min(loads.get(c, 0.0) for c in candidates)
    tied = sorted(c for c in candidates if loads.get(c, 0.0) == lowest)
    return tied[turn % len(tied)]


class CompactionPicker:
    """:func:`least_loaded` over the nodes with a fresh heartbeat, with the turn counter and
    each node's heartbeat times and picks since its last heartbeat kept across calls."""

    def __init__(self, default_ttl_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._turns = itertools.count()
        #: The lease TTL of a node seen heartbeating but not registering (it registered with
        #: an earlier leader).
        self._default_ttl_s = default_ttl_s
        self._clock = clock
        self._lock = threading.Lock()
        #: Node -> (monotonic time of its last registration or heartbeat, its lease TTL).
        self._beats: dict[str, tuple[float, float]] = {}
        #: Node -> tasks meta sent it since its last heartbeat.
        self._picked: dict[str, int] = {}

    def beat(self, node: str, ttl_s: float | None = None) -> None:
        """``node`` registered (holding a lease of ``ttl_s``) or heartbeat just now; its
        reported load now counts what was sent before."""
        with self._lock:
            known = self._beats.get(node)
            if ttl_s is None:
                ttl_s = self._default_ttl_s if known is None else known[1]
            self._beats[node] = (self._clock(), ttl_s)
            self._picked.pop(node, None)

    def forget(self, node: str) -> None:
        with self._lock:
            self._beats.pop(node, None)
            self._picked.pop(node, None)

    def age(self, node: str) -> float | None:
        """Seconds since ``node``'s last heartbeat; None if none reached this instance."""
        with self._lock:
            beat = self._beats.get(node)
        return None if beat is None else self._clock() - beat[0]

    def fresh(self, node: str) -> bool:
        with self._lock:
            beat = self._beats.get(node)
        return beat is not None and self._clock() - beat[0] <= beat[1] / 2

    def pick(
        self,
        live: Sequence[str],
        loads: Mapping[str, float],
        slots: Mapping[str, float],
    ) -> str | None:
        """The node to send a task to, of the ``live`` ones (by lease), given their reported
        ``loads`` (busy share of their slots) and ``slots`` (of those that report them)."""
        candidates = [n for n in live if self.fresh(n)]
        with self._lock:
            # Only a node that reported its slots has its load raised by what was sent since.
            effective = {
                n: loads.get(n, 0.0) + self._picked.get(n, 0) / max(slots[n], 1.0)
                if n in slots
                else loads.get(n, 0.0)
                for n in candidates
            }
            chosen = least_loaded(candidates, effective, next(self._turns))
            if chosen is not None:
                self._picked[chosen] = self._picked.get(chosen, 0) + 1
        return chosen
