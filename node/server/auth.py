"""The authentication hooks of the servers: each takes a request's ``Authorization`` (an HTTP
header, gRPC metadata, an Arrow Flight header), asks the authenticator who the caller is and
runs the request as that caller (:func:`node.security.context.acting_as`), so the SQL
executor, the ingestor and the Flight service can authorise what it does. A server without
an authenticator runs every request unchecked.

HTTP leaves ``/health`` (probes) and ``/openapi.json`` open; gRPC and Flight check every call.
A gRPC or Flight call from another node holding the cluster secret that names a user
(``gnomon-on-behalf-of``, ``gnomon/peer.py``) runs as that user. The Flight handshake with a
user and password (pyarrow's ``authenticate_basic_token``) answers a session token
(:mod:`node.security.sessions`) the client sends as its bearer from then on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import grpc
import pyarrow.flight as flight

from gnomon.errors import Unauthenticated
from gnomon.peer import (
    AUTHORIZATION,
    ON_BEHALF_OF,
    HandlerInterceptor,
    metadata_value,
    refusing,
)
from node.security.authn import Authenticates
from node.security.context import acting_as
from node.security.principal import Principal

#: HTTP endpoints anyone may call.
OPEN_PATHS = frozenset({"/health", "/openapi.json"})
#: What a 401 answer asks HTTP clients for.
CHALLENGE = 'Basic realm="gnomon", charset="UTF-8"'
#: The name the Flight middleware is registered under.
FLIGHT_MIDDLEWARE = "auth"


def http_caller(
    authenticator: Authenticates | None, path: str, authorization: str | None
) -> Principal | None:
    """The caller of an HTTP request to ``path``; None when nothing is checked (no
    authenticator, an open endpoint). Unauthenticated if the credentials prove nothing."""
    if authenticator is None or path in OPEN_PATHS:
        return None
    return authenticator.authenticate(authorization)


# -- gRPC ---------------------------------------------------------------------------------------


class GrpcAuth(HandlerInterceptor):
    """Refuses a call without valid credentials (gRPC UNAUTHENTICATED, as HoraeDB does) and
    runs the others as their caller."""

    def __init__(self, authenticator: Authenticates) -> None:
        self.authenticator = authenticator

    def wrap(
        self, handler: grpc.RpcMethodHandler[Any, Any], details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler[Any, Any]:
        try:
            metadata = details.invocation_metadata
            principal = self.authenticator.authenticate(
                metadata_value(metadata, AUTHORIZATION), metadata_value(metadata, ON_BEHALF_OF)
            )
        except Unauthenticated as e:
            return refusing(handler, e.message)
        return _as_caller(handler, principal)


def _as_caller(
    handler: grpc.RpcMethodHandler[Any, Any], principal: Principal
) -> grpc.RpcMethodHandler[Any, Any]:
    return around_calls(handler, lambda _: acting_as(principal))


def around_calls(
    handler: grpc.RpcMethodHandler[Any, Any],
    around: Callable[[grpc.ServicerContext], AbstractContextManager[Any]],
) -> grpc.RpcMethodHandler[Any, Any]:
    """``handler`` with each of its methods run inside ``around(context)``."""

    def unary(fn: Callable[..., Any]) -> Callable[..., Any]:
        def call(request: Any, context: grpc.ServicerContext) -> Any:
            with around(context):
                return fn(request, context)

        return call

    def streaming(fn: Callable[..., Iterator[Any]]) -> Callable[..., Iterator[Any]]:
        def call(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
            with around(context):
                yield from fn(request, context)

        return call

    return handler._replace(  # type: ignore[attr-defined,no-any-return]
        unary_unary=handler.unary_unary and unary(handler.unary_unary),
        stream_unary=handler.stream_unary and unary(handler.stream_unary),
        unary_stream=handler.unary_stream and streaming(handler.unary_stream),
        stream_stream=handler.stream_stream and streaming(handler.stream_stream),
    )


# -- Arrow Flight -------------------------------------------------------------------------------


class _FlightCaller(flight.ServerMiddleware):  # type: ignore[misc]
    def __init__(self, principal: Principal, session: str | None = None) -> None:
        self.principal = principal
        self.session = session

    def sending_headers(self) -> dict[str, list[str] | list[bytes]]:
        # pyarrow's authenticate_basic_token returns the handshake's authorization header.
        return {} if self.session is None else {AUTHORIZATION: [f"Bearer {self.session}"]}


class FlightAuth(flight.ServerMiddlewareFactory):  # type: ignore[misc]
    """Refuses a Flight call without valid credentials (UNAUTHENTICATED) and keeps the
    caller for the service (:func:`flight_caller`). Clients send the ``authorization``
    header with every call (``FlightCallOptions(headers=[(b"authorization", ...)])``), or
    handshake with user and password first and send the session token answered."""

    def __init__(self, authenticator: Authenticates) -> None:
        self.authenticator = authenticator

    def start_call(self, info: flight.CallInfo, headers: dict[str, list[Any]]) -> _FlightCaller:
        try:
            principal = self.authenticator.authenticate(
                _header(headers, AUTHORIZATION), _header(headers, ON_BEHALF_OF)
            )
        except Unauthenticated as e:
            raise flight.FlightUnauthenticatedError(e.message) from None
        # Only a checked password earns a session: a session token cannot renew itself.
        if info.method == flight.FlightMethod.HANDSHAKE and principal.via == "password":
            return _FlightCaller(principal, self.authenticator.session_token(principal.name))
        return _FlightCaller(principal)


class MiddlewareHandshake(flight.ServerAuthHandler):  # type: ignore[misc]
    """Lets the Flight handshake through to :class:`FlightAuth`, which checks every call
    (a server without an auth handler refuses the handshake as unimplemented)."""

    def authenticate(self, outgoing: Any, incoming: Any) -> None:
        pass

    # pyarrow's stubs say bool; its server takes the caller's identity, a string.
    def is_valid(self, token: str) -> str:  # type: ignore[override]
        return ""


def _header(headers: dict[str, list[Any]], key: str) -> str | None:
    value = (headers.get(key) or [None])[0]
    return value.decode("latin-1") if isinstance(value, bytes) else value


def flight_caller(context: flight.ServerCallContext) -> Principal | None:
    """The caller of a Flight call (None on a server without authentication)."""
    middleware = context.get_middleware(FLIGHT_MIDDLEWARE)
    return None if middleware is None else middleware.principal  # type: ignore[attr-defined,no-any-return]
