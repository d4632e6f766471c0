"""The one way gnomon talks to etcd: endpoint parsing, the gRPC channels, failover between
endpoints and the mapping of etcd's errors onto :mod:`gnomon.errors`.

Both etcd users build on :class:`EtcdConnection`: the StructuredTable backend
(:class:`gnomon.store.etcd.EtcdStore`) and the meta service's leases and keys
(:class:`meta.etcd.EtcdClient`).

Endpoints are written ``host:port[,host:port...]``: each may carry an ``http://`` prefix, the
whole list an ``etcd://`` one. TLS (``https://``) is not supported and is refused naming the
endpoint rather than silently spoken to in plain text.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
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
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
]

# The codes that say "this endpoint cannot answer now": the next one may.
_UNREACHABLE = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})


# -- endpoints ----------------------------------------------------------------------------------


def parse_endpoints(endpoints: str | Sequence[str]) -> list[str]:
    """The gRPC targets (``host:port``) of ``host:port[,host:port...]`` or of a sequence of
    single endpoints; :class:`~gnomon.errors.InvalidArgument` naming the first bad one."""
    if isinstance(endpoints, str):
        text = endpoints.strip()
        if text[: len(LIST_SCHEME)].lower() == LIST_SCHEME:
            text = text[len(LIST_SCHEME) :]
        items = text.split(",") if text else []
    else:
        items = list(endpoints)
    if not items:
        raise InvalidArgument("no etcd endpoint given: expected host:port[,host:port...]")
    return [_parse_endpoint(item) for item in items]


def _parse_endpoint(item: str) -> str:
    text = item.strip()
    scheme, sep, rest = text.partition("://")
    if sep:
        if scheme.lower() == "https":
            raise InvalidArgument(
                f"etcd endpoint {text!r}: TLS (https) is not supported, give host:port or "
                "http://host:port"
            )
        if scheme.lower() != "http":
            raise InvalidArgument(
                f"etcd endpoint {text!r}: unknown scheme {scheme!r}; only http:// may prefix "
                f"an endpoint and {LIST_SCHEME} the whole list"
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


def _error_of(e: grpc.RpcError, target: str) -> GnomonError:
    """A gnomon error for an answer of etcd at ``target`` other than "unreachable"."""
    code = _status_of(e)
    details = _details(e)
    where = f"etcd at {target}"
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


class Endpoint:
    """One etcd member: its channel and the stubs on it."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.channel = grpc.insecure_channel(target, options=CHANNEL_OPTIONS)
        self.kv = etcdrpc.KVStub(self.channel)
        self.lease = etcdrpc.LeaseStub(self.channel)


class EtcdConnection:
    """Channels to every endpoint of one etcd cluster (see :func:`parse_endpoints`).

    Requests go to the current endpoint; one that is unreachable makes the next endpoint the
    current one. ``owner`` names the user in :class:`~gnomon.errors.Closed` errors; ``timeout_s``
    is what callers pass as every request's deadline. Thread-safe.
    """

    def __init__(
        self, endpoints: str | Sequence[str], *, timeout_s: float, owner: str = "etcd client"
    ) -> None:
        self.targets = parse_endpoints(endpoints)
        self.timeout_s = timeout_s
        self._owner = owner
        self._endpoints = [Endpoint(t) for t in self.targets]
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
        at most once, and with ``failover=False``, for requests whose outcome would be unknown,
        only the current one).

        Raises :class:`~gnomon.errors.Unavailable` naming the endpoints tried when none
        answered, :class:`~gnomon.errors.Closed` once closed, and the matching gnomon error for
        any other gRPC error (a compacted revision is a ``Conflict``, a request over etcd's
        limits ``TooLarge``, a missing lease ``NotFound``).
        """
        self.check_open()
        first = self._current
        tries = len(self._endpoints) if failover else 1
        tried: list[str] = []
        last: grpc.RpcError | None = None
        for index in [(first + i) % len(self._endpoints) for i in range(tries)]:
            endpoint = self._endpoints[index]
            try:
                return fn(endpoint)
            except grpc.RpcError as e:
                if self.closed:
                    raise self._closed_error() from e
                if _status_of(e) not in _UNREACHABLE:
                    raise _error_of(e, endpoint.target) from e
                tried.append(endpoint.target)
                last = e
                self._move_past(index)
            except ValueError as e:
                # grpc raises ValueError for a channel that close() closed meanwhile.
                if self.closed:
                    raise self._closed_error() from e
                raise
        raise Unavailable(f"etcd at {', '.join(tried)} is unavailable: {_details(last)}") from last

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
