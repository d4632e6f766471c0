"""Authentication: the ``Authorization`` value a request carries, turned into a
:class:`~node.security.principal.Principal` or refused.

Accepted forms, the same on HTTP, gRPC metadata and Arrow Flight headers:

- ``Basic base64(user:password)`` (HTTP clients, InfluxDB tools, the horaedb-client SDK's
  ``set_authorization``);
- ``Bearer gnm_<id>.<secret>`` (an API token);
- ``Cluster <secret>`` (another node of the cluster, or the meta service, holding the
  cluster secret; see :data:`~node.security.principal.CLUSTER`).

A successful check is cached for ``cache_s`` seconds under a hash of the value, so a client
sending the same credentials on every request pays the scrypt check once per period; a
revoked token, a changed password or a changed grant is seen once its cache entry ages out.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import threading
import time
from typing import Protocol

from gnomon.errors import Unauthenticated
from node.security.accounts import Accounts
from node.security.principal import CLUSTER, Principal

#: Cached checks kept at most (the oldest dropped first).
CACHE_ENTRIES = 4096
CLUSTER_SCHEME = "Cluster"


class Authenticates(Protocol):
    def authenticate(self, authorization: str | None) -> Principal:
        """The caller proven by ``authorization`` (the header's value); Unauthenticated if
        it is missing or proves nothing."""


def basic(user: str, password: str) -> str:
    """The ``Authorization`` value of HTTP Basic credentials."""
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode("ascii")


def cluster(secret: str) -> str:
    """The ``Authorization`` value a node sends to another with the cluster secret."""
    return f"{CLUSTER_SCHEME} {secret}"


class Authenticator:
    """Checks credentials against ``accounts``; ``cluster_secret`` (None: no node may call
    as the cluster) admits other nodes."""

    def __init__(
        self, accounts: Accounts, *, cluster_secret: str | None = None, cache_s: float = 5.0
    ) -> None:
        self.accounts = accounts
        self._cluster = None if not cluster_secret else cluster_secret.encode()
        self.cache_s = cache_s
        self._cache: dict[bytes, tuple[float, Principal]] = {}
        self._lock = threading.Lock()

    def authenticate(self, authorization: str | None) -> Principal:
        if not authorization:
            raise Unauthenticated(
                "authentication required: send Authorization: Basic (user and password) or "
                "Bearer (an API token)"
            )
        scheme, _, value = authorization.strip().partition(" ")
        value = value.strip()
        if scheme == CLUSTER_SCHEME:
            if self._cluster is None or not hmac.compare_digest(value.encode(), self._cluster):
                raise Unauthenticated("wrong cluster secret")
            return CLUSTER
        key = hashlib.sha256(authorization.encode("utf-8", "surrogateescape")).digest()
        now = time.monotonic()
        with self._lock:
            hit = self._cache.get(key)
        if hit is not None and now - hit[0] < self.cache_s:
            return hit[1]
        principal = self._check(scheme.lower(), value)
        if self.cache_s > 0:
            with self._lock:
                if len(self._cache) >= CACHE_ENTRIES:
                    self._cache.pop(next(iter(self._cache)))
                self._cache[key] = (now, principal)
        return principal

    def _check(self, scheme: str, value: str) -> Principal:
        if scheme == "basic":
            try:
                decoded = base64.b64decode(value, validate=True).decode("utf-8")
            except (binascii.Error, UnicodeDecodeError):
                raise Unauthenticated(
                    "malformed Basic credentials: not base64 of user:password"
                ) from None
            user, sep, password = decoded.partition(":")
            if not sep:
                raise Unauthenticated("malformed Basic credentials: no ':' after the user name")
            return self.accounts.check_password(user, password)
        if scheme == "bearer":
            return self.accounts.check_token(value)
        raise Unauthenticated(f"unsupported authorization scheme {scheme!r}: use Basic or Bearer")
