"""Node liveness and the meta leader election, both on etcd leases.

A node is live while the key ``<ns>/live/<name>`` exists: it hangs on a lease the leader grants at
registration and refreshes on each heartbeat, so a node that stops heartbeating disappears by
itself after the lease's TTL, whichever meta instance leads meanwhile.

The meta leader holds ``<ns>/leader`` (its advertised endpoint), created only if absent and bound
to its own lease; when the leader dies the lease expires, the key vanishes and the next
instance's campaign creates it.
"""

from __future__ import annotations

import logging
from typing import Protocol

from meta.etcd import EtcdClient

log = logging.getLogger("gnomon.meta.liveness")


class NodeLeases(Protocol):
    """What the leader needs of node liveness (:class:`Liveness` on etcd)."""

    def register(self, name: str, ttl_s: int) -> int: ...

    def refresh(self, lease_id: int) -> bool: ...

    def live(self) -> set[str]: ...


class Liveness:
    def __init__(self, etcd: EtcdClient, namespace: str) -> None:
        self._etcd = etcd
        self._prefix = f"{namespace}/live/".encode()

    def register(self, name: str, ttl_s: int) -> int:
        """Grant a lease of ``ttl_s`` seconds and mark ``name`` live under it; the lease id."""
        lease = self._etcd.grant(ttl_s)
        self._etcd.put(self._prefix + name.encode(), name.encode(), lease=lease)
        return lease

    def refresh(self, lease_id: int) -> bool:
        """Keep a node's lease alive; False when it already expired (the node must register
        again)."""
        return self._etcd.keepalive(lease_id) > 0

    def live(self) -> set[str]:
        return {v.decode() for v in self._etcd.get_prefix(self._prefix).values()}


class Election:
    """Campaign for ``<ns>/leader`` under a lease of ``ttl_s`` seconds."""

    def __init__(self, etcd: EtcdClient, namespace: str, identity: str, ttl_s: int) -> None:
        self._etcd = etcd
        self._key = f"{namespace}/leader".encode()
        self.identity = identity
        self._ttl_s = ttl_s
        self._lease = 0

    def campaign(self) -> bool:
        """Try to become leader; True if this instance now leads."""
        if self._lease == 0 or self._etcd.keepalive(self._lease) == 0:
            self._lease = self._etcd.grant(self._ttl_s)
        won = self._etcd.create(self._key, self.identity.encode(), lease=self._lease)
        # Still holding the key from an earlier term of this instance counts as winning too.
        won = won or self._etcd.lease_of(self._key) == self._lease
        if won:
            log.info("won the meta election", extra={"leader": self.identity})
        return won

    def keep(self) -> bool:
        """Refresh the lease while leading; False once leadership is lost."""
        return (
            self._lease != 0
            and self._etcd.keepalive(self._lease) > 0
            and (self._etcd.get(self._key) == self.identity.encode())
        )

    def leader(self) -> str:
        """The current leader's endpoint ('' when nobody leads)."""
        value = self._etcd.get(self._key)
        return value.decode() if value else ""

    def resign(self, *, timeout_s: float) -> None:
        """Let go of the lease (and the leader key on it), waiting at most ``timeout_s``."""
        if self._lease:
            self._etcd.revoke(self._lease, timeout_s=timeout_s)
            self._lease = 0
