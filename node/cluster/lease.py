"""Self-fencing: a node stops acknowledging writes before the meta service can consider its
lease expired.

The meta service grants a node's lease in etcd when the node registers and extends it on each
heartbeat; etcd counts the TTL from when it handles the request, which is after the node sent
it. So the lease lasts at least until ``sent + ttl`` on the node's own monotonic clock, and the
meta service reopens the node's shards elsewhere only after that. The node treats its lease as
current until ``sent + ttl - margin``: the margin covers the clocks of two machines running at
slightly different rates and a write that checked the lease just before it lapsed and then
waited for the WAL (the write checks again before it is acknowledged).
"""

from __future__ import annotations

import threading
import time

#: Fraction of the TTL kept as margin, and its floor in seconds.
MARGIN_FRACTION = 0.2
MIN_MARGIN_S = 1.0


def margin_s(ttl_s: float) -> float:
    return max(MIN_MARGIN_S, ttl_s * MARGIN_FRACTION)


class LeaseClock:
    """True (called) while writes may be acknowledged."""

    def __init__(self) -> None:
        self._valid_until = 0.0
        self._lock = threading.Lock()

    def renewed(self, sent: float, ttl_s: int) -> None:
        """Meta accepted a registration or heartbeat sent at monotonic time ``sent``."""
        until = sent + ttl_s - margin_s(ttl_s)
        with self._lock:
            self._valid_until = max(self._valid_until, until)

    def remaining_s(self) -> float:
        return self._valid_until - time.monotonic()

    def __call__(self) -> bool:
        return time.monotonic() < self._valid_until
