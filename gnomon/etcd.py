"""The one way gnomon talks to etcd: endpoint parsing, the gRPC channels, etcd's own
authentication and TLS, failover between endpoints and the mapping of etcd's errors onto
:mod:`gnomon.errors`.

Both etcd users build on :class:`EtcdConnection`: the StructuredTable backend
(:class:`gnomon.store.etcd.EtcdStore`) and the meta service's leases and keys
(:class:`meta.etcd.EtcdClient`).

Endpoints are written ``host:port[,host:port...]``: each may carry an ``http://`` prefix (or
``https://`` when TLS is on), the whole list an ``etcd://`` one. How a connection proves
itself to etcd is an :class:`EtcdAccess`: a user and password (etcd's authentication: a token
asked for once, sent with every request and asked for again when etcd drops it), the CA of
etcd's certificate (TLS), a client certificate (etcd's ``--client-cert-auth``). An
``https://`` endpoint without TLS settings is refused naming the endpoint rather than spoken
to in plain text, and so is an ``http://`` one with them.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import grpc
from pyetcd import etcdrpc  # type: ignore[import-untyped]

from gnomon.errors import (
    Closed,
    Conflict,
    GnomonError,
    InvalidArgument,
    NotFound,
    TooLarge,
    Unavailable,
)

T = TypeVar("T")

#: The scheme that may prefix a whole endpoint list.
LIST_SCHEME = "etcd://"

CHANNEL_OPTIONS = [
    # Rows are bounded by etcd's request size, pages of them are not.
    ("grpc.max_receive_message_length", -1),
    # Come back quickly after the server restarts instead of backing off for minutes.
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
]
#: The gRPC option that is, despite its name, the shortest time gRPC gives one connection
#: attempt (the TCP connect and etcd's first HTTP/2 SETTINGS frame; gRPC's MIN_CONNECT_TIMEOUT,
#: 20 s unless set). An attempt gets the longer of it and the current reconnect backoff.
CONNECT_TIMEOUT_OPTION = "grpc.min_reconnect_backoff_ms"

# The codes that say "this endpoint cannot answer now": the next one may.
_UNREACHABLE = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})
# How gRPC fails a call it never sent: the channel had no connection and its last attempt to
# make one failed (or it waits out the backoff before the next). Nothing reached etcd, so the
# call may be sent again whatever it asks.
_NOT_CONNECTED = "failed to connect to all addresses"
#: The pauses between rounds of connection attempts (see :meth:`EtcdConnection.call`), growing
#: like gRPC's own reconnect backoff: the channel tries again by itself meanwhile.
RECONNECT_PAUSE_S = (0.1, 1.0)


# -- access -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EtcdAccess:
    """How a connection proves itself to etcd and knows it speaks to etcd (the settings
    ``etcd_user``, ``etcd_password``, ``etcd_ca``, ``etcd_cert``, ``etcd_key`` of the roles
    that reach etcd). ``user`` and ``password``: etcd's authentication; ``ca``: PEM file of the
    CA that signed etcd's certificate, and ``cert``/``key``: PEM files of a client certificate
    (etcd's ``--client-cert-auth``; without a user, etcd takes its common name as the user).
    Either file makes the connection speak TLS. The default is none: plain gRPC, no user."""

    user: str | None = None
    password: str | None = field(default=None, repr=False)
    ca: str | None = None
    cert: str | None = None
    key: str | None = None

    def __post_init__(self) -> None:
        if (self.user is None) != (self.password is None):
            raise InvalidArgument(
                "etcd authentication needs both etcd_user and etcd_password (or etcd_password_file)"
            )
        if (self.cert is None) != (self.key is None):
            raise InvalidArgument("an etcd client certificate needs both etcd_cert and etcd_key")

    @property
    def tls(self) -> bool:
        return self.ca is not None or self.cert is not None

    def channel_credentials(self) -> grpc.ChannelCredentials:
        """The TLS credentials of a channel to etcd (read from the PEM files now)."""
        return grpc.ssl_channel_credentials(
            root_certificates=_pem(self.ca, "etcd_ca"),
            private_key=_pem(self.key, "etcd_key"),
            certificate_chain=_pem(self.cert, "etcd_cert"),
        )


def _pem(path: str | None, setting: str) -> bytes | None:
    if path is None:
        return None
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise InvalidArgument(f"{setting} {path!r} cannot be read: {e.strerror}") from None


# -- endpoints ----------------------------------------------------------------------------------


def parse_endpoints(endpoints: str | Sequence[str], *, tls: bool = False) -> list[str]:
    """The gRPC targets (``host:port``) of ``host:port[,host:port...]`` or of a sequence of
    single endpoints, each optionally ``https://`` with ``tls``, else ``http://``;
    :class:`~gnomon.errors.InvalidArgument` naming the first bad one."""
    if isinstance(endpoints, str):
        text = endpoints.strip()
        if text[: len(LIST_SCHEME)].lower() == LIST_SCHEME:
            text = text[len(LIST_SCHEME) :]
        items = text.split(",") if text else []
    else:
        items = list(endpoints)
    if not items:
        raise InvalidArgument("no etcd endpoint given: expected host:port[,host:port...]")
    return [_parse_endpoint(item, tls) for item in items]


def _parse_endpoint(item: str, tls: bool) -> str:
    text = item.strip()
    scheme, sep, rest = text.partition("://")
    if sep:
        if scheme.lower() == "https" and not tls:
            raise InvalidArgument(
                f"etcd endpoint {text!r}: TLS (https) needs etcd_ca, the CA of etcd's "
                "certificate (or a client certificate: etcd_cert, etcd_key); give it, or "
                "host:port or http://host:port"
            )
        if scheme.lower() == "http" and tls:
            raise InvalidArgument(
                f"etcd endpoint {text!r}: etcd is reached over TLS (etcd_ca or etcd_cert is "
                "set), give host:port or https://host:port"
            )
        if scheme.lower() not in ("http", "https"):
            raise InvalidArgument(
                f"etcd endpoint {text!r}: unknown scheme {scheme!r}; only http:// or https:// "
                f"may prefix an endpoint and {LIST_SCHEME} the whole list"
            )
        text = rest
    target = text.rstrip("/")
    host, colon, port = target.rpartition(":")
    # A bare IPv6 address must be bracketed, or its last group would read as the port.
    bad_host = not host or any(c.isspace() or c in "/@" for c in host)
    bad_host = bad_host or (":" in host and not (host.startswith("[") and host.endswith("]")))
    if not colon or bad_host or not port.isdigit() or not 0 < int(port) < 65536:
        raise InvalidArgument(
            f"etcd endpoint {item.strip()!r} is not host:port (expected "
            "host:port[,host:port...], each optionally http://)"
        )
    return target


# -- errors -------------------------------------------------------------------------------------


def _status_of(e: grpc.RpcError) -> grpc.StatusCode | None:
    return e.code() if isinstance(e, grpc.Call) else None


def _details(e: grpc.RpcError | None) -> str:
    if e is None:
        return "no endpoint tried"
    return (e.details() if isinstance(e, grpc.Call) else None) or str(e)


# etcd's answers to a request without a (valid) token. A stale token, or one from before the
# users or roles changed, is refused before the request is applied, so asking for a new token
# and sending the request again is safe even where the outcome must not be unknown.
_NO_USER = "user name is empty"
_TOKEN_REFUSED = ("invalid auth token", "revision of auth store is old", _NO_USER)
# etcd's answer to a login while its authentication is off: requests need no token then.
_AUTH_OFF = "authentication is not enabled"


def _token_refused(e: grpc.RpcError) -> bool:
    details = _details(e)
    return any(s in details for s in _TOKEN_REFUSED)


def _never_sent(e: grpc.RpcError) -> bool:
    """Whether gRPC failed the call before sending it, for want of a connection."""
    return _status_of(e) is grpc.StatusCode.UNAVAILABLE and _NOT_CONNECTED in _details(e)


def _error_of(e: grpc.RpcError, target: str) -> GnomonError:
    """A gnomon error for an answer of etcd at ``target`` other than "unreachable"."""
    code = _status_of(e)
    details = _details(e)
    where = f"etcd at {target}"
    # etcd refusing gnomon's own credentials is the deployment's fault, not a caller's: it
    # stays an internal error, whatever request it was met on.
    if _NO_USER in details:
        return GnomonError(
            f"{where} requires authentication: set etcd_user and etcd_password (or a client "
            f"certificate, etcd_cert and etcd_key): {details}"
        )
    if "authentication failed" in details:
        return GnomonError(
            f"{where} refused the etcd user name or password (etcd_user, etcd_password): {details}"
        )
    if code is grpc.StatusCode.PERMISSION_DENIED:
        return GnomonError(
            f"{where} refused: the etcd user lacks read and write permission on the keys of "
            f"the namespace: {details}"
        )
    if code is grpc.StatusCode.OUT_OF_RANGE and "compacted" in details:
        return Conflict(f"{where}: the snapshot read from was compacted: {details}")
    if any(s in details for s in ("too many operations", "too large", "larger than max")):
        return TooLarge(f"{where} refused the request: {details}")
    if code is grpc.StatusCode.RESOURCE_EXHAUSTED:
        return Unavailable(f"{where}: {details}", retryable=False)
    if code is grpc.StatusCode.NOT_FOUND:
        return NotFound(f"{where}: {details}")
    return GnomonError(f"{where} failed: {code}: {details}")


# -- the connection -----------------------------------------------------------------------------


class _Login:
    """The token of etcd's authentication for one user: asked for on first use and again when
    etcd drops it (unused for its ``--auth-token-ttl``, or issued before the users or roles
    changed). ``token`` is None before the first login and "" while etcd's authentication is
    off (requests go without one then). Thread-safe."""

    def __init__(self, user: str, password: str) -> None:
        self._request = etcdrpc.AuthenticateRequest(name=user, password=password)
        self._lock = threading.Lock()
        self.token: str | None = None

    def renew(self, endpoint: Endpoint, stale: str | None, timeout_s: float) -> None:
        """Log in at ``endpoint`` unless another thread replaced the token ``stale`` since."""
        with self._lock:
            if self.token != stale:
                return
            try:
                response = endpoint.auth.Authenticate(self._request, timeout=timeout_s)
            except grpc.RpcError as e:
                if _AUTH_OFF not in _details(e):
                    raise
                self.token = ""
                return
            self.token = str(response.token)


@dataclass(frozen=True)
class _CallDetails(grpc.ClientCallDetails):  # type: ignore[misc]
    method: str
    timeout: float | None
    metadata: tuple[tuple[str, str | bytes], ...] | None
    credentials: grpc.CallCredentials | None
    wait_for_ready: bool | None
    compression: grpc.Compression | None


class _SendToken(grpc.UnaryUnaryClientInterceptor, grpc.StreamStreamClientInterceptor):  # type: ignore[misc]
    """Adds the login's token to every call (etcd reads it from the ``token`` metadata)."""

    def __init__(self, login: _Login) -> None:
        self._login = login

    def _with_token(self, details: grpc.ClientCallDetails) -> grpc.ClientCallDetails:
        token = self._login.token
        if not token:
            return details
        return _CallDetails(
            details.method,
            details.timeout,
            (*(details.metadata or ()), ("token", token)),
            details.credentials,
            details.wait_for_ready,
            details.compression,
        )

    def intercept_unary_unary(
        self, continuation: Callable[..., Any], details: grpc.ClientCallDetails, request: Any
    ) -> Any:
        return continuation(self._with_token(details), request)

    def intercept_stream_stream(
        self,
        continuation: Callable[..., Any],
        details: grpc.ClientCallDetails,
        request_iterator: Iterator[Any],
    ) -> Any:
        return continuation(self._with_token(details), request_iterator)


class Endpoint:
    """One etcd member: its channel and the stubs on it (each call carrying the token of
    ``login``, if any, but the login itself). Each attempt to connect to it gets ``connect_s``
    seconds before gRPC gives it up."""

    def __init__(
        self,
        target: str,
        credentials: grpc.ChannelCredentials | None,
        login: _Login | None,
        *,
        connect_s: float,
    ) -> None:
        self.target = target
        options = [*CHANNEL_OPTIONS, (CONNECT_TIMEOUT_OPTION, max(1, round(connect_s * 1000)))]
        self.channel = (
            grpc.insecure_channel(target, options=options)
            if credentials is None
            else grpc.secure_channel(target, credentials, options=options)
        )
        self.auth = etcdrpc.AuthStub(self.channel)
        calls = (
            self.channel
            if login is None
            else grpc.intercept_channel(self.channel, _SendToken(login))
        )
        self.kv = etcdrpc.KVStub(calls)
        self.lease = etcdrpc.LeaseStub(calls)


class EtcdConnection:
    """Channels to every endpoint of one etcd cluster (see :func:`parse_endpoints`), reached
    as ``access`` says (default: plain gRPC, no user).

    Requests go to the current endpoint; one that is unreachable makes the next endpoint the
    current one. ``owner`` names the user in :class:`~gnomon.errors.Closed` errors; ``timeout_s``
    is what callers pass as every request's deadline. Thread-safe.

    A request may take ``timeout_s``, so connecting may too: each connection attempt gets as
    long (a slower one would leave the request no time; cutting it shorter fails requests
    that still had time, as when etcd or this process is slow to be scheduled on a busy
    machine). A request that was not sent for want of a connection is sent again, within
    ``timeout_s`` of its start (see :meth:`call`).
    """

    def __init__(
        self,
        endpoints: str | Sequence[str],
        *,
        timeout_s: float,
        owner: str = "etcd client",
        access: EtcdAccess | None = None,
    ) -> None:
        access = access or EtcdAccess()
        self.targets = parse_endpoints(endpoints, tls=access.tls)
        self.timeout_s = timeout_s
        self._owner = owner
        credentials = access.channel_credentials() if access.tls else None
        self._login = (
            None
            if access.user is None or access.password is None
            else _Login(access.user, access.password)
        )
        self._endpoints = [
            Endpoint(t, credentials, self._login, connect_s=timeout_s) for t in self.targets
        ]
        self._current = 0
        self._lock = threading.Lock()
        self.closed = False

    def __str__(self) -> str:
        return f"etcd at {','.join(self.targets)}"

    def close(self) -> None:
        with self._lock:
            if self.closed:
                return
            self.closed = True
        for endpoint in self._endpoints:
            endpoint.channel.close()

    def check_open(self) -> None:
        if self.closed:
            raise self._closed_error()

    def _closed_error(self) -> Closed:
        return Closed(f"{self._owner} on {self} is closed")

    def call(self, fn: Callable[[Endpoint], T], *, failover: bool = True) -> T:
        """``fn`` on the current endpoint; where that is unreachable, on the next (each endpoint
        at most once a round, and with ``failover=False``, for requests whose outcome would be
        unknown, only the current one). When no endpoint of a round could be connected to
        (gRPC did not send the request), another round follows after a pause
        (:data:`RECONNECT_PAUSE_S`) while ``timeout_s`` since the first has not passed: the
        channels keep connecting meanwhile, and a request never sent is safe to send again.

        Raises :class:`~gnomon.errors.Unavailable` naming the endpoints tried when none
        answered, :class:`~gnomon.errors.Closed` once closed, and the matching gnomon error for
        any other gRPC error (a compacted revision is a ``Conflict``, a request over etcd's
        limits ``TooLarge``, a missing lease ``NotFound``).
        """
        self.check_open()
        deadline = time.monotonic() + self.timeout_s
        pause, longest = RECONNECT_PAUSE_S
        while True:
            first = self._current
            tries = len(self._endpoints) if failover else 1
            tried: list[str] = []
            last: grpc.RpcError | None = None
            connected = False
            for index in [(first + i) % len(self._endpoints) for i in range(tries)]:
                endpoint = self._endpoints[index]
                try:
                    return self._logged_in(endpoint, fn)
                except grpc.RpcError as e:
                    if self.closed:
                        raise self._closed_error() from e
                    if _status_of(e) not in _UNREACHABLE:
                        raise _error_of(e, endpoint.target) from e
                    tried.append(endpoint.target)
                    last = e
                    connected = connected or not _never_sent(e)
                    self._move_past(index)
                except ValueError as e:
                    # grpc raises ValueError for a channel that close() closed meanwhile.
                    if self.closed:
                        raise self._closed_error() from e
                    raise
            if connected or time.monotonic() + pause > deadline:
                raise Unavailable(
                    f"etcd at {', '.join(tried)} is unavailable: {_details(last)}"
                ) from last
            time.sleep(pause)
            self.check_open()
            pause = min(longest, pause * 2)

    def _logged_in(self, endpoint: Endpoint, fn: Callable[[Endpoint], T]) -> T:
        """``fn`` on ``endpoint`` with a token (with a login): asked for first if there is
        none yet, and asked for again once if etcd refuses the one sent."""
        login = self._login
        if login is None:
            return fn(endpoint)
        if login.token is None:
            login.renew(endpoint, None, self.timeout_s)
        sent = login.token
        try:
            return fn(endpoint)
        except grpc.RpcError as e:
            if not _token_refused(e):
                raise
        login.renew(endpoint, sent, self.timeout_s)
        return fn(endpoint)

    def kv(self, method: str, request: Any, *, failover: bool = True) -> Any:
        """One unary KV request (``Range``, ``Put``, ``Txn``, ...) through :meth:`call`."""
        return self.call(
            lambda ep: getattr(ep.kv, method)(request, timeout=self.timeout_s), failover=failover
        )

    def _move_past(self, index: int) -> None:
        # Later requests start at the next endpoint, unless another thread already moved on.
        with self._lock:
            if self._current == index:
                self._current = (index + 1) % len(self._endpoints)


# -- keys ---------------------------------------------------------------------------------------


def prefix_end(prefix: bytes) -> bytes:
    """The smallest key greater than every key starting with ``prefix`` (etcd's range end)."""
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        raise InvalidArgument(f"no key follows every key starting with {prefix!r}")
    return stripped[:-1] + bytes([stripped[-1] + 1])
