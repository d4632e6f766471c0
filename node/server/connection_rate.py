"""The gRPC hook of the rate of new connections (``max_connections_per_s``,
:mod:`node.security.connections`): a call on a connection over its address's rate is
refused RESOURCE_EXHAUSTED before it runs. (The Flight service checks its calls itself,
node/server/flight.py; HTTP its connections as they are accepted, node/server/http/.)"""

from __future__ import annotations

import contextlib
from typing import Any

import grpc

from gnomon.peer import HandlerInterceptor
from node.security.connections import PeerConnections
from node.server.auth import around_calls


class GrpcConnectionRate(HandlerInterceptor):
    def __init__(self, connections: PeerConnections) -> None:
        self.connections = connections

    def wrap(
        self, handler: grpc.RpcMethodHandler[Any, Any], details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler[Any, Any]:
        return around_calls(handler, self._admitted)

    def _admitted(self, context: grpc.ServicerContext) -> contextlib.nullcontext[None]:
        refusal = self.connections.refusal(context.peer())
        if refusal is not None:
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, refusal)
        return contextlib.nullcontext()
