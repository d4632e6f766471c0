"""Sending a request that reached the wrong node on to the owner of its tables, once.

The forwarded call carries the metadata ``forwarded-from: <this node>`` (HoraeDB's marker),
and with a cluster secret the secret and the caller's user (``gnomon/peer.py``), so the owner
authorises it as the caller's own call;
a node never forwards a call that carries it, so a route that is stale on two nodes at once
costs an error naming the owner, never a loop. A forward that fails is that error to the
caller too: the request is never executed on a node that does not own the table (HoraeDB
runs a failed forwarded query locally; a stale replica would answer wrong).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import grpc

from gnomon.errors import Unavailable
from gnomon.peer import Channels, Peer
from gnomon.proto import storage_pb2
from node.security.context import on_behalf_of

FORWARDED_FROM = "forwarded-from"
_SERVICE = "storage.StorageService"


def forwarded_from(metadata: Sequence[tuple[str, str | bytes]] | None) -> str | None:
    """The node a call was forwarded from, or None for a call from a client."""
    for key, value in metadata or ():
        if key == FORWARDED_FROM:
            return value.decode() if isinstance(value, bytes) else value
    return None


class Forwarder:
    def __init__(self, me: str, *, peer: Peer | None = None, timeout_s: float = 30.0) -> None:
        self.me = me
        self.peer = peer or Peer()
        self._timeout_s = timeout_s
        self._channels = Channels(self.peer.channel)

    def _call(
        self, endpoint: str, method: str, request: Any, response: Callable[[bytes], Any]
    ) -> Any:
        metadata = ((FORWARDED_FROM, self.me), *self.peer.metadata(on_behalf_of()))
        # Two tries: a call that found the owner unreachable closes the channel it shared
        # with calls running meanwhile, which then get a new one (grpc raises ValueError for
        # a closed channel, not an RpcError).
        retried = False
        while True:
            channel = self._channels.get(endpoint)
            stub: Any = channel.unary_unary(
                f"/{_SERVICE}/{method}",
                request_serializer=lambda m: m.SerializeToString(),
                response_deserializer=response,
            )
            try:
                return stub(request, timeout=self._timeout_s, metadata=metadata)
            except ValueError as e:
                if "closed channel" not in str(e):
                    raise
                self._channels.broken(endpoint, channel)
                if retried:
                    raise Unavailable(
                        f"forwarding {method} to the owner {endpoint} failed: its connection closed"
                    ) from None
                retried = True
            except grpc.RpcError as e:
                self._channels.broken(endpoint, channel)
                raise Unavailable(
                    f"forwarding {method} to the owner {endpoint} failed: "
                    f"{e.code().name} {e.details()}"
                ) from None

    def write(self, endpoint: str, request: storage_pb2.WriteRequest) -> storage_pb2.WriteResponse:
        response: storage_pb2.WriteResponse = self._call(
            endpoint, "Write", request, storage_pb2.WriteResponse.FromString
        )
        return response

    def sql_query(self, endpoint: str, request: storage_pb2.SqlQueryRequest) -> bytes:
        """The owner's serialised ``SqlQueryResponse``, to pass on as it is."""
        data: bytes = self._call(endpoint, "SqlQuery", request, bytes)
        return data

    def close(self) -> None:
        self._channels.close()
