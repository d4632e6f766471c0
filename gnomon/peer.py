"""How the processes of a cluster call each other: data nodes (forwards, ingest puts, remote
scans), the meta service (its clients: nodes, compaction nodes, the admin CLI; and its
Release calls to nodes) and compaction nodes.

With a cluster secret every internal call carries ``authorization: Cluster <secret>``, and
the meta service, the compaction nodes and a data node's shard control refuse calls without
it. A call a node makes for a user (a forwarded write or query) also names that user in
``gnomon-on-behalf-of``; the receiving node believes the name only from a holder of the
secret and authorises the call as that user, so a forward is allowed exactly what the
user's own call would be. With a CA, every internal call (to data nodes, the meta service,
compaction nodes) uses TLS and trusts that CA: a cluster with a CA serves TLS on every
process (``tls_cert``/``tls_key`` of each role).
"""

from __future__ import annotations

import hmac
import os
import threading
from abc import abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

AUTHORIZATION = "authorization"
ON_BEHALF_OF = "gnomon-on-behalf-of"
CLUSTER_SCHEME = "Cluster"
SECRET_ENV = "GNOMON_CLUSTER_SECRET"
CA_ENV = "GNOMON_CLUSTER_CA"

Metadata = tuple[tuple[str, str], ...]


def cluster_authorization(secret: str) -> str:
    """The ``Authorization`` value a process sends to another with the cluster secret."""
    return f"{CLUSTER_SCHEME} {secret}"


def holds_secret(secret: str, authorization: str | None) -> bool:
    """Whether ``authorization`` presents ``secret`` (compared in constant time)."""
    scheme, _, value = (authorization or "").strip().partition(" ")
    return scheme == CLUSTER_SCHEME and hmac.compare_digest(value.strip().encode(), secret.encode())


def metadata_value(metadata: Sequence[tuple[str, str | bytes]] | None, key: str) -> str | None:
    for k, v in metadata or ():
        if k == key:
            return v if isinstance(v, str) else v.decode("latin-1")
    return None


@dataclass(frozen=True)
class Peer:
    """``secret``: the cluster secret (None: internal calls carry none); ``ca``: PEM file of
    the CA the cluster's certificates are signed by (None: plain gRPC and Flight)."""

    secret: str | None = None
    ca: str | None = None

    @classmethod
    def from_env(cls) -> Peer:
        """The secret and CA in GNOMON_CLUSTER_SECRET and GNOMON_CLUSTER_CA (the admin CLI)."""
        return cls(os.environ.get(SECRET_ENV) or None, os.environ.get(CA_ENV) or None)

    def metadata(self, on_behalf_of: str | None = None) -> Metadata:
        """What an internal gRPC call sends (``on_behalf_of``: the user it is made for)."""
        if self.secret is None:
            return ()
        sent: Metadata = ((AUTHORIZATION, cluster_authorization(self.secret)),)
        if on_behalf_of is not None:
            sent += ((ON_BEHALF_OF, on_behalf_of),)
        return sent

    def flight_headers(self, on_behalf_of: str | None = None) -> list[tuple[bytes, bytes]]:
        return [(k.encode(), v.encode()) for k, v in self.metadata(on_behalf_of)]

    def channel(self, target: str, options: Sequence[tuple[str, Any]] = ()) -> grpc.Channel:
        """A channel to ``target``, over TLS with a CA."""
        if self.ca is not None:
            creds = grpc.ssl_channel_credentials(root_certificates=Path(self.ca).read_bytes())
            return grpc.secure_channel(target, creds, options=list(options))
        return grpc.insecure_channel(target, options=list(options))

    def flight_location(self, endpoint: str) -> str:
        """The Flight URI of a data node's ``host:port`` (a URI is kept as given)."""
        if "://" in endpoint:
            return endpoint
        return f"grpc+{'tls' if self.ca is not None else 'tcp'}://{endpoint}"

    def flight_options(self) -> dict[str, Any]:
        """Keyword arguments of ``pyarrow.flight.connect`` for a data node."""
        return {} if self.ca is None else {"tls_root_certs": Path(self.ca).read_bytes()}


class Channels:
    """gRPC channels kept per endpoint and made by ``make`` on first use: every internal
    client holds one. A channel whose call failed is dropped (:meth:`broken`), so the next
    call makes it again rather than reusing a broken one."""

    def __init__(self, make: Callable[[str], grpc.Channel]) -> None:
        self._make = make
        self._open: dict[str, grpc.Channel] = {}
        self._lock = threading.Lock()

    def get(self, endpoint: str) -> grpc.Channel:
        with self._lock:
            channel = self._open.get(endpoint)
            if channel is None:
                channel = self._open[endpoint] = self._make(endpoint)
            return channel

    def broken(self, endpoint: str, channel: grpc.Channel) -> None:
        with self._lock:
            if self._open.get(endpoint) is channel:
                del self._open[endpoint]
        channel.close()

    def close(self) -> None:
        with self._lock:
            for channel in self._open.values():
                channel.close()
            self._open.clear()


class HandlerInterceptor(grpc.ServerInterceptor):  # type: ignore[misc]
    """A server interceptor that hands the handler of each call's method to :meth:`wrap`
    (a call of no method is left to gRPC's answer)."""

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler[Any, Any] | None],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        handler = continuation(details)
        return None if handler is None else self.wrap(handler, details)

    @abstractmethod
    def wrap(
        self, handler: grpc.RpcMethodHandler[Any, Any], details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler[Any, Any]:
        """``handler`` with this interceptor's check around it."""


#: The methods of the standard gRPC health service: probes (a kubelet's, a load balancer's)
#: hold no secret, and the answer tells nothing but whether the process serves.
_HEALTH_METHODS = "/grpc.health.v1.Health/"


class SecretCheck(HandlerInterceptor):
    """Refuses (UNAUTHENTICATED) every call that does not present the cluster secret: the
    meta service's and the compaction nodes' servers, whose callers are all of the cluster.
    The health service is left open."""

    def __init__(self, secret: str) -> None:
        self.secret = secret

    def wrap(
        self, handler: grpc.RpcMethodHandler[Any, Any], details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler[Any, Any]:
        if details.method.startswith(_HEALTH_METHODS) or holds_secret(
            self.secret, metadata_value(details.invocation_metadata, AUTHORIZATION)
        ):
            return handler
        return refusing(
            handler,
            "this service takes calls from the cluster only: wrong or "
            "missing cluster secret (GNOMON_CLUSTER_SECRET)",
        )


def refusing(
    handler: grpc.RpcMethodHandler[Any, Any], message: str
) -> grpc.RpcMethodHandler[Any, Any]:
    """``handler`` with every method answering UNAUTHENTICATED ``message``."""

    def refuse(request: Any, context: grpc.ServicerContext) -> Any:
        context.abort(grpc.StatusCode.UNAUTHENTICATED, message)

    return handler._replace(  # type: ignore[attr-defined,no-any-return]
        unary_unary=handler.unary_unary and refuse,
        stream_unary=handler.stream_unary and refuse,
        unary_stream=handler.unary_stream and refuse,
        stream_stream=handler.stream_stream and refuse,
    )
