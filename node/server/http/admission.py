"""The rate of new HTTP connections each client address may open (``max_connections_per_s``):
a token bucket per address, so that one client opening connections in a loop is turned away
while the others are served."""

from __future__ import annotations

import time
from collections.abc import Callable

#: Addresses remembered at most; past it those whose bucket has refilled are forgotten (a
#: full bucket is what a new address starts with), so a scan from many addresses cannot grow
#: the table without bound.
MAX_ADDRESSES = 65536


class ConnectionRate:
    """Admits at most ``per_s`` new connections a second from one address, with bursts of
    ``max(1, per_s)``. Used from the event loop's thread only."""

    def __init__(self, per_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        if per_s <= 0:
            raise ValueError(f"a connection rate must be positive, not {per_s}")
        self.per_s = per_s
        self.burst = max(1.0, per_s)
        self._clock = clock
        #: Per address: tokens left and when they were counted.
        self._buckets: dict[str, tuple[float, float]] = {}

    def admit(self, address: str) -> bool:
        """Whether a new connection from ``address`` is taken (it spends a token if so)."""
        now = self._clock()
        tokens, then = self._buckets.get(address, (self.burst, now))
        tokens = min(self.burst, tokens + (now - then) * self.per_s)
        if tokens < 1.0:
            self._buckets[address] = (tokens, now)
            return False
        if address not in self._buckets and len(self._buckets) >= MAX_ADDRESSES:
            self._forget_refilled(now)
        self._buckets[address] = (tokens - 1.0, now)
        return True

    def _forget_refilled(self, now: float) -> None:
        full = [
            a for a, (t, at) in self._buckets.items() if t + (now - at) * self.per_s >= self.burst
        ]
        # None refilled (many addresses, each still busy): the oldest half goes, starting
        # afresh if it comes back.
        for address in full or list(self._buckets)[: MAX_ADDRESSES // 2]:
            del self._buckets[address]
