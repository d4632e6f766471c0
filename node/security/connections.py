"""The rate of new connections each client address may open (setting
``max_connections_per_s``): a token bucket per address, so that one client opening
connections in a loop is turned away while the others are served.

HTTP asks :class:`ConnectionRate` when a connection is accepted. gRPC and Arrow Flight (a
gRPC service) show a server no connection, only calls, each naming its peer as
``ipv4:ADDRESS:PORT``: :class:`PeerConnections` takes a peer it has not seen as a new
connection from that address (a client's port is its connection's), so the calls of a
connection over the rate are refused until its address's bucket lets it in, and the calls of
an admitted one are never charged again.
"""

from __future__ import annotations

import threading
import time
import urllib.parse
from collections import OrderedDict
from collections.abc import Callable

#: Addresses remembered at most; past it those whose bucket has refilled are forgotten (a
#: full bucket is what a new address starts with), so a scan from many addresses cannot grow
#: the table without bound.
MAX_ADDRESSES = 65536
#: Admitted gRPC connections remembered at most (the least recently calling forgotten first:
#: one forgotten and calling again is charged as new, once).
MAX_PEERS = 65536
SETTING = "max_connections_per_s"


class ConnectionRate:
    """Admits at most ``per_s`` new connections a second from one address, with bursts of
    ``max(1, per_s)``. Safe to call from any thread."""

    def __init__(self, per_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        if per_s <= 0:
            raise ValueError(f"a connection rate must be positive, not {per_s}")
        self.per_s = per_s
        self.burst = max(1.0, per_s)
        self._clock = clock
        #: Per address: tokens left and when they were counted.
        self._buckets: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def admit(self, address: str) -> bool:
        """Whether a new connection from ``address`` is taken (it spends a token if so)."""
        with self._lock:
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

    def refusal(self, address: str) -> str:
        """What a connection from ``address`` over the rate is told."""
        return (
            f"too many new connections from {address}: at most {self.per_s:g} a second "
            f"({SETTING}); reuse connections"
        )


class PeerConnections:
    """New gRPC connections told apart by the peer of their calls, admitted by ``rate``;
    ``on_refused`` is called for each call refused."""

    def __init__(self, rate: ConnectionRate, on_refused: Callable[[], None] = lambda: None):
        self.rate = rate
        self._on_refused = on_refused
        self._admitted: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()

    def refusal(self, peer: str) -> str | None:
        """None if a call from ``peer`` (gRPC's ``context.peer()``) may go on, else what it
        is told."""
        with self._lock:
            if peer in self._admitted:
                self._admitted.move_to_end(peer)
                return None
        address = peer_address(peer)
        if not self.rate.admit(address):
            self._on_refused()
            return self.rate.refusal(address)
        with self._lock:
            self._admitted[peer] = None
            while len(self._admitted) > MAX_PEERS:
                self._admitted.popitem(last=False)
        return None


def peer_address(peer: str) -> str:
    """The client address of a gRPC peer: ``ipv4:10.0.0.1:5000`` is 10.0.0.1,
    ``ipv6:[::1]:5000`` (or its brackets %-encoded, as newer gRPC sends) is ::1; one without a
    port (a Unix socket) is itself."""
    _, _, rest = urllib.parse.unquote(peer).partition(":")
    host, colon, port = rest.rpartition(":")
    if not colon or not port.isdigit():
        return rest or peer
    return host[1:-1] if host.startswith("[") and host.endswith("]") else host
