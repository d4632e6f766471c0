"""What the compaction service's server and client share: the service name and how errors
travel as gRPC statuses."""

from __future__ import annotations

import grpc

from gnomon.errors import (
    DeadlineExceeded,
    GnomonError,
    InvalidArgument,
    NotFound,
    Status,
    Unavailable,
)

SERVICE = "gnomon.compaction.CompactionService"

_CODES = {
    Status.INVALID_ARGUMENT: grpc.StatusCode.INVALID_ARGUMENT,
    Status.NOT_FOUND: grpc.StatusCode.NOT_FOUND,
    Status.UNAVAILABLE: grpc.StatusCode.UNAVAILABLE,
    Status.DEADLINE_EXCEEDED: grpc.StatusCode.DEADLINE_EXCEEDED,
}
_ERRORS: dict[grpc.StatusCode, type[GnomonError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument,
    grpc.StatusCode.NOT_FOUND: NotFound,
    grpc.StatusCode.UNAVAILABLE: Unavailable,
    grpc.StatusCode.CANCELLED: Unavailable,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceeded,
}


def grpc_code(e: GnomonError) -> grpc.StatusCode:
    return _CODES.get(e.status, grpc.StatusCode.INTERNAL)


def error_of(e: grpc.RpcError, node: str) -> GnomonError:
    """The gnomon error a failed call to compaction node ``node`` stands for."""
    if not isinstance(e, grpc.Call):
        return Unavailable(f"compaction node {node}: {e}")
    return _ERRORS.get(e.code(), GnomonError)(f"compaction node {node}: {e.details() or ''}")
