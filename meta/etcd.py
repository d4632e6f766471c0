"""The few etcd calls meta makes beside the StructuredTable store: leases (node liveness, the
leader election) and single keys bound to them. Thin wrappers over the ``pyetcd`` gRPC stubs,
moving to the next endpoint when one is unreachable."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import grpc
from pyetcd import etcdrpc  # type: ignore[import-untyped]

from gnomon.errors import Unavailable
from gnomon.store.etcd import prefix_end

T = TypeVar("T")

_OPTIONS = [
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
]


class EtcdClient:
    """Leases and keys on an etcd cluster given as ``host:port[,host:port...]``."""

    def __init__(self, endpoints: str | Sequence[str], *, timeout_s: float = 5.0) -> None:
        items = endpoints.split(",") if isinstance(endpoints, str) else list(endpoints)
        self.targets = [i.strip().removeprefix("http://").rstrip("/") for i in items if i.strip()]
        if not self.targets:
            raise Unavailable("no etcd endpoint given")
        self._timeout_s = timeout_s
        self._channels = [grpc.insecure_channel(t, options=_OPTIONS) for t in self.targets]
        self._current = 0
        self._lock = threading.Lock()

    def close(self) -> None:
        for channel in self._channels:
            channel.close()

    def _call(self, fn: Callable[[grpc.Channel], T]) -> T:
        first = self._current
        error: grpc.RpcError | None = None
        for i in range(len(self._channels)):
            index = (first + i) % len(self._channels)
            try:
                return fn(self._channels[index])
            except grpc.RpcError as e:
                code = e.code() if isinstance(e, grpc.Call) else None
                if code not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                    raise
                error = e
                with self._lock:
                    self._current = (index + 1) % len(self._channels)
        raise Unavailable(f"etcd at {','.join(self.targets)} is unavailable: {error}") from error

    def _kv(self, method: str, request: Any) -> Any:
        return self._call(
            lambda ch: getattr(etcdrpc.KVStub(ch), method)(request, timeout=self._timeout_s)
        )

    # -- leases ---------------------------------------------------------------------------------

    def grant(self, ttl_s: int) -> int:
        request = etcdrpc.LeaseGrantRequest(TTL=ttl_s)
        response = self._call(
            lambda ch: etcdrpc.LeaseStub(ch).LeaseGrant(request, timeout=self._timeout_s)
        )
        return int(response.ID)

    def keepalive(self, lease_id: int) -> int:
        """Refresh a lease; its TTL in seconds, 0 when it already expired."""
        request = etcdrpc.LeaseKeepAliveRequest(ID=lease_id)

        def call(ch: grpc.Channel) -> int:
            responses = etcdrpc.LeaseStub(ch).LeaseKeepAlive(
                iter([request]), timeout=self._timeout_s
            )
            for response in responses:
                return int(response.TTL)
            return 0

        return self._call(call)

    def revoke(self, lease_id: int) -> None:
        request = etcdrpc.LeaseRevokeRequest(ID=lease_id)
        try:
            self._call(
                lambda ch: etcdrpc.LeaseStub(ch).LeaseRevoke(request, timeout=self._timeout_s)
            )
        except grpc.RpcError as e:
            # Revoking a lease that already expired is what we wanted anyway.
            if not isinstance(e, grpc.Call) or e.code() is not grpc.StatusCode.NOT_FOUND:
                raise

    # -- keys -----------------------------------------------------------------------------------

    def put(self, key: bytes, value: bytes, *, lease: int = 0) -> None:
        self._kv("Put", etcdrpc.PutRequest(key=key, value=value, lease=lease))

    def create(self, key: bytes, value: bytes, *, lease: int = 0) -> bool:
        """Put ``key`` only if it does not exist; whether it was created."""
        compare = etcdrpc.Compare(
            key=key,
            result=etcdrpc.Compare.EQUAL,
            target=etcdrpc.Compare.CREATE,
            create_revision=0,
        )
        put = etcdrpc.RequestOp(request_put=etcdrpc.PutRequest(key=key, value=value, lease=lease))
        response = self._kv("Txn", etcdrpc.TxnRequest(compare=[compare], success=[put]))
        return bool(response.succeeded)

    def get(self, key: bytes) -> bytes | None:
        response = self._kv("Range", etcdrpc.RangeRequest(key=key))
        return bytes(response.kvs[0].value) if response.kvs else None

    def lease_of(self, key: bytes) -> int | None:
        """The lease ``key`` hangs on (0 for none), or None if the key does not exist."""
        response = self._kv("Range", etcdrpc.RangeRequest(key=key))
        return int(response.kvs[0].lease) if response.kvs else None

    def get_prefix(self, prefix: bytes) -> dict[bytes, bytes]:
        request = etcdrpc.RangeRequest(key=prefix, range_end=prefix_end(prefix))
        return {bytes(kv.key): bytes(kv.value) for kv in self._kv("Range", request).kvs}

    def delete(self, key: bytes) -> None:
        self._kv("DeleteRange", etcdrpc.DeleteRangeRequest(key=key))
