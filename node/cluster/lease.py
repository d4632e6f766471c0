"""Self-fencing: a node stops acknowledging writes before the meta service can consider its
lease expired.

The meta service grants a node's lease in etcd when the node registers and extends it on each
heartbeat; etcd counts the TTL from when it handles the request, which is after the node sent
it. So the lease lasts at least until ``sent + ttl`` on the node's own monotonic clock, and the
meta service reopens the node's shards elsewhere only after that. The node treats its lease as
current until ``sent + ttl - margin``: the margin covers the clocks of two machines running at
slightly different rates and a write that checked the lease just before it lapsed and then
waited for the WAL (the write checks again before it is acknowledged).

A lease renewed after it lapsed (the node was paused, or cut off, past it) is not current
until the shard keeper has read the meta service's shards since: meanwhile its shards may
have been given to other nodes, and the copies still open here would answer reads from data
the new leaders have moved past.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

#: Fraction of the TTL kept as margin, and its floor in seconds.
MARGIN_FRACTION = 0.2
MIN_MARGIN_S = 1.0


def margin_s(ttl_s: float) -> float:
    return max(MIN_MARGIN_S, ttl_s * MARGIN_FRACTION)


class LeaseClock:
    """True (called) while writes may be acknowledged and leader reads answered."""

    def __init__(self, on_lapse_renewed: Callable[[], None] = lambda: None) -> None:
        self._valid_until = 0.0
        #: When a renewal last ended a lapse, and when the latest keeper pass to end began:
        #: the lease counts only once the second is the later.
        self._renewed_at = 0.0
        self._pass_began = 0.0
        #: Told when a renewal ends a lapse (the keeper makes its next pass at once).
        self._on_lapse_renewed = on_lapse_renewed
        self._lock = threading.Lock()

    def renewed(self, sent: float, ttl_s: int) -> None:
        """Meta accepted a registration or heartbeat sent at monotonic time ``sent``."""
        until = sent + ttl_s - margin_s(ttl_s)
        with self._lock:
            lapsed = 0.0 < self._valid_until <= sent
            if lapsed:
                self._renewed_at = time.monotonic()
            self._valid_until = max(self._valid_until, until)
        if lapsed:
            self._on_lapse_renewed()

    def caught_up(self, started: float) -> None:
        """A keeper pass begun at monotonic time ``started`` has brought the shards open here
        up to date with the meta service."""
        with self._lock:
            self._pass_began = max(self._pass_began, started)

    def remaining_s(self) -> float:
        return self._valid_until - time.monotonic()

    def __call__(self) -> bool:
        return self._pass_began >= self._renewed_at and time.monotonic() < self._valid_until
