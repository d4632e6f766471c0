"""The one call the meta service makes to a data node: "let go of this shard, or of these of
its tables, before I move them" (``gnomon/proto/node.proto``). Both ends live here so the
method name and error mapping are written once: the data node serves it next to its storage
service, the meta service's procedures call it. With a cluster secret the call carries it
and the node refuses a call without it, whatever its other authentication.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any, Protocol

import grpc

from gnomon.errors import Conflict, GnomonError, NotFound, Unavailable
from gnomon.peer import AUTHORIZATION, Channels, Peer, holds_secret, metadata_value
from gnomon.proto import node_pb2 as pb

SERVICE = "gnomon.node.ShardControl"
_RELEASE = f"/{SERVICE}/Release"

#: Longest a release may take: it flushes the tables it lets go of.
RELEASE_TIMEOUT_S = 60.0

Release = Callable[[int, int, Collection[int] | None], Sequence[str]]


def handler(release: Release, secret: str | None = None) -> grpc.GenericRpcHandler:
    """The service over ``release(shard_id, epoch, table_ids or None for all)``; ``secret``:
    the cluster secret a caller must present."""

    def call(req: pb.ReleaseRequest, context: grpc.ServicerContext) -> pb.ReleaseResponse:
        if secret is not None and not holds_secret(
            secret, metadata_value(context.invocation_metadata(), AUTHORIZATION)
        ):
            context.abort(
                grpc.StatusCode.UNAUTHENTICATED, "shard control takes the cluster secret only"
            )
        tables = None if req.whole_shard else list(req.table_ids)
        try:
            names = release(req.shard_id, req.epoch, tables)
        except GnomonError as e:
            code = (
                grpc.StatusCode.FAILED_PRECONDITION
                if isinstance(e, Conflict)
                else grpc.StatusCode.UNAVAILABLE
            )
            context.abort(code, e.message)
        return pb.ReleaseResponse(tables=names)

    method = grpc.unary_unary_rpc_method_handler(
        call,
        request_deserializer=pb.ReleaseRequest.FromString,
        response_serializer=pb.ReleaseResponse.SerializeToString,
    )
    return grpc.method_handlers_generic_handler(SERVICE, {"Release": method})


class NodeCalls(Protocol):
    def release(
        self, node: str, shard_id: int, epoch: int, table_ids: Collection[int] | None
    ) -> list[str]:
        """Ask ``node`` to let go of the shard (``table_ids`` None) or of those tables; the
        names it let go of. Unavailable if it cannot be reached; Conflict if it holds the
        shard at a later epoch."""
        ...


class GrpcNodeCalls:
    def __init__(self, *, peer: Peer | None = None, timeout_s: float = RELEASE_TIMEOUT_S) -> None:
        self.peer = peer or Peer()
        self._timeout_s = timeout_s
        self._channels = Channels(self.peer.channel)

    def release(
        self, node: str, shard_id: int, epoch: int, table_ids: Collection[int] | None
    ) -> list[str]:
        channel = self._channels.get(node)
        stub: Any = channel.unary_unary(
            _RELEASE,
            request_serializer=pb.ReleaseRequest.SerializeToString,
            response_deserializer=pb.ReleaseResponse.FromString,
        )
        req = pb.ReleaseRequest(
            shard_id=shard_id,
            epoch=epoch,
            table_ids=sorted(table_ids or ()),
            whole_shard=table_ids is None,
        )
        try:
            resp: pb.ReleaseResponse = stub(
                req, timeout=self._timeout_s, metadata=self.peer.metadata()
            )
        except grpc.RpcError as e:
            self._channels.broken(node, channel)
            what = f"node {node} could not release shard {shard_id}: {e.details()}"
            if e.code() is grpc.StatusCode.FAILED_PRECONDITION:
                raise Conflict(what) from None
            if e.code() is grpc.StatusCode.UNIMPLEMENTED:
                raise NotFound(f"{what} (it serves no shard control)") from None
            raise Unavailable(what) from None
        return list(resp.tables)

    def close(self) -> None:
        self._channels.close()
