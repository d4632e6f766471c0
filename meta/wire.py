"""What meta's gRPC server and client share: the service name, how errors travel as gRPC
statuses, and the model-to-message conversions."""

from __future__ import annotations

import json

import grpc

from gnomon.errors import (
    AlreadyExists,
    Conflict,
    GnomonError,
    InvalidArgument,
    NotFound,
    NotLeader,
    Status,
    Unauthenticated,
    Unavailable,
)
from gnomon.proto import meta_pb2 as pb
from meta.events import EventKind, ShardEvent
from meta.model import NodeKind, Procedure, Table

SERVICE = "gnomon.meta.MetaService"
#: The port of a meta endpoint named without one.
DEFAULT_PORT = 2390
#: Trailing metadata of a NOT-leader answer: the leader's endpoint.
LEADER_KEY = "gnomon-meta-leader"

_CODES = {
    Status.INVALID_ARGUMENT: grpc.StatusCode.INVALID_ARGUMENT,
    Status.TOO_LARGE: grpc.StatusCode.INVALID_ARGUMENT,
    Status.NOT_FOUND: grpc.StatusCode.NOT_FOUND,
    Status.ALREADY_EXISTS: grpc.StatusCode.ALREADY_EXISTS,
    Status.CONFLICT: grpc.StatusCode.ABORTED,
    Status.UNAVAILABLE: grpc.StatusCode.UNAVAILABLE,
}
_ERRORS: dict[grpc.StatusCode, type[GnomonError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument,
    grpc.StatusCode.NOT_FOUND: NotFound,
    grpc.StatusCode.ALREADY_EXISTS: AlreadyExists,
    grpc.StatusCode.ABORTED: Conflict,
    grpc.StatusCode.UNAVAILABLE: Unavailable,
    grpc.StatusCode.DEADLINE_EXCEEDED: Unavailable,
    grpc.StatusCode.UNAUTHENTICATED: Unauthenticated,
}

NODE_KINDS = {
    NodeKind.DATA: pb.DATA,
    NodeKind.COMPACTION: pb.COMPACTION,
    NodeKind.QUERY: pb.QUERY,
}
NODE_KINDS_BACK = {v: k for k, v in NODE_KINDS.items()}


def grpc_code(e: GnomonError) -> grpc.StatusCode:
    if isinstance(e, NotLeader):
        return grpc.StatusCode.FAILED_PRECONDITION
    return _CODES.get(e.status, grpc.StatusCode.INTERNAL)


#: What a meta endpoint must be, said when something else answers there.
_EXPECTED = (
    f"--meta takes a meta service's gRPC address (port {DEFAULT_PORT} unless --grpc-port "
    "moved it)"
)


def error_of(e: grpc.RpcError, target: str) -> GnomonError:
    """The gnomon error a failed call stands for."""
    if not isinstance(e, grpc.Call):
        return Unavailable(f"meta at {target}: {e}")
    details = e.details() or ""
    code = e.code()
    # Another server's port given for meta's: said at once, not retried as if meta were away.
    if code is grpc.StatusCode.UNIMPLEMENTED:
        return InvalidArgument(
            f"{target} is no meta service: it answers gRPC but not meta's calls (as a data "
            f"node's gRPC or Arrow Flight port does); {_EXPECTED}"
        )
    if code is grpc.StatusCode.UNAVAILABLE and "http1.x server" in details:
        return InvalidArgument(
            f"{target} is no meta service: it answers HTTP/1.1, not gRPC (as a data node's HTTP "
            f"port does); {_EXPECTED}"
        )
    if code is grpc.StatusCode.FAILED_PRECONDITION:
        metadata = dict(e.trailing_metadata() or ())
        leader = str(metadata.get(LEADER_KEY, ""))
        return NotLeader(f"meta at {target}: {details}", leader=leader)
    return _ERRORS.get(code, GnomonError)(f"meta at {target}: {details}")


def table_info(t: Table) -> pb.TableInfo:
    return pb.TableInfo(
        id=t.id,
        name=t.name,
        schema=t.schema,
        shard_id=t.shard_id,
        partitions=t.partitions,
        parent_id=t.parent_id,
        partition_index=t.partition_index,
    )


def procedure_info(p: Procedure) -> pb.ProcedureInfo:
    return pb.ProcedureInfo(
        id=p.id,
        kind=p.kind,
        status=p.status.value,
        step=p.step,
        error=p.error,
        params=json.dumps(p.params),
    )


def shard_event(e: ShardEvent) -> pb.ShardEvent:
    kind = pb.ShardEvent.OPEN if e.kind is EventKind.OPEN else pb.ShardEvent.CLOSE
    return pb.ShardEvent(
        kind=kind, shard_id=e.shard_id, node=e.node, role=e.role.value, epoch=e.epoch
    )
