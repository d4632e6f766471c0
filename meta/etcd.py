"""The few etcd calls meta makes beside the StructuredTable store: leases (node liveness, the
leader election) and single keys bound to them. Thin wrappers over the ``pyetcd`` gRPC stubs on
a :class:`~gnomon.etcd.EtcdConnection`, which moves to the next endpoint when one is
unreachable."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

from pyetcd import etcdrpc  # type: ignore[import-untyped]

from gnomon.errors import NotFound
from gnomon.etcd import Endpoint, EtcdAccess, EtcdConnection, prefix_end


class EtcdClient:
    """Leases and keys on an etcd cluster given as ``host:port[,host:port...]`` (see
    :func:`gnomon.etcd.parse_endpoints`), reached as ``access`` says (user, TLS). Every request
    may go on to the next endpoint, as each is safe to repeat (a repeated create reads as lost,
    which the election checks)."""

    def __init__(
        self,
        endpoints: str | Sequence[str],
        *,
        timeout_s: float = 5.0,
        access: EtcdAccess | None = None,
    ) -> None:
        self._etcd = EtcdConnection(
            endpoints, timeout_s=timeout_s, owner="meta etcd client", access=access
        )

    def close(self) -> None:
        self._etcd.close()

    # -- leases ---------------------------------------------------------------------------------

    def grant(self, ttl_s: int) -> int:
        request = etcdrpc.LeaseGrantRequest(TTL=ttl_s)
        response = self._etcd.call(
            lambda ep: ep.lease.LeaseGrant(request, timeout=self._etcd.timeout_s)
        )
        return int(response.ID)

    def keepalive(self, lease_id: int) -> int:
        """Refresh a lease; its TTL in seconds, 0 when it already expired."""
        request = etcdrpc.LeaseKeepAliveRequest(ID=lease_id)

        def call(ep: Endpoint) -> int:
            responses = ep.lease.LeaseKeepAlive(iter([request]), timeout=self._etcd.timeout_s)
            for response in responses:
                return int(response.TTL)
            return 0

        return self._etcd.call(call)

    def revoke(self, lease_id: int, *, timeout_s: float | None = None) -> None:
        """Revoke a lease, waiting at most ``timeout_s`` (default: the client's timeout)."""
        request = etcdrpc.LeaseRevokeRequest(ID=lease_id)
        wait_s = self._etcd.timeout_s if timeout_s is None else timeout_s
        # Revoking a lease that already expired is what we wanted anyway.
        with contextlib.suppress(NotFound):
            self._etcd.call(lambda ep: ep.lease.LeaseRevoke(request, timeout=wait_s))

    # -- keys -----------------------------------------------------------------------------------

    def put(self, key: bytes, value: bytes, *, lease: int = 0) -> None:
        self._etcd.kv("Put", etcdrpc.PutRequest(key=key, value=value, lease=lease))

    def create(self, key: bytes, value: bytes, *, lease: int = 0) -> bool:
        """Put ``key`` only if it does not exist; whether it was created."""
        compare = etcdrpc.Compare(
            key=key,
            result=etcdrpc.Compare.EQUAL,
            target=etcdrpc.Compare.CREATE,
            create_revision=0,
        )
        put = etcdrpc.RequestOp(request_put=etcdrpc.PutRequest(key=key, value=value, lease=lease))
        response = self._etcd.kv("Txn", etcdrpc.TxnRequest(compare=[compare], success=[put]))
        return bool(response.succeeded)

    def get(self, key: bytes) -> bytes | None:
        response = self._etcd.kv("Range", etcdrpc.RangeRequest(key=key))
        return bytes(response.kvs[0].value) if response.kvs else None

    def lease_of(self, key: bytes) -> int | None:
        """The lease ``key`` hangs on (0 for none), or None if the key does not exist."""
        response = self._etcd.kv("Range", etcdrpc.RangeRequest(key=key))
        return int(response.kvs[0].lease) if response.kvs else None

    def get_prefix(self, prefix: bytes) -> dict[bytes, bytes]:
        request = etcdrpc.RangeRequest(key=prefix, range_end=prefix_end(prefix))
        return {bytes(kv.key): bytes(kv.value) for kv in self._etcd.kv("Range", request).kvs}

    def delete(self, key: bytes) -> None:
        self._etcd.kv("DeleteRange", etcdrpc.DeleteRangeRequest(key=key))
