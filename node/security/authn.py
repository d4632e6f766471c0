"""Authentication: the ``Authorization`` value a request carries, turned into a
:class:`~node.security.principal.Principal` or refused.

Accepted forms, the same on HTTP, gRPC metadata and Arrow Flight headers:

- ``Basic base64(user:password)`` (HTTP clients, InfluxDB tools, the horaedb-client SDK's
  ``set_authorization``);
- ``Bearer gnm_<id>.<secret>`` (an API token);
- ``Bearer gns_<user>:<expiry>:<mac>`` (a session token this server or its cluster issued
  after checking the user's password: :mod:`node.security.sessions`);
- ``Cluster <secret>`` (another node of the cluster, or the meta service, holding the
  cluster secret; see :data:`~node.security.principal.CLUSTER`), acting as itself or, when
  it names one (``gnomon-on-behalf-of``, ``gnomon/peer.py``), as the user whose call it
  forwards.

The PostgreSQL protocol checks passwords with SCRAM-SHA-256 instead where the account has a
verifier (:meth:`Authenticator.scram_verifier`, :mod:`node.security.scram`).

A successful check is cached for ``cache_s`` seconds under a hash of the value, so a client
sending the same credentials on every request pays the scrypt check once per period; a
revoked token, a changed password or a changed grant is seen once its cache entry ages out.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
import threading
import time
from collections.abc import Callable
from typing import Protocol

from gnomon.errors import Unauthenticated
from gnomon.peer import CLUSTER_SCHEME, holds_secret
from node.security import scram
from node.security.accounts import Accounts
from node.security.principal import CLUSTER, Principal
from node.security.sessions import SESSION_PREFIX, SessionTokens

#: Cached checks kept at most (the oldest dropped first).
CACHE_ENTRIES = 4096
#: Keeps the key of mock SCRAM verifiers apart from other uses of the cluster secret.
_MOCK_CONTEXT = b"gnomon scram mock verifiers v1"


class Authenticates(Protocol):
    def authenticate(self, authorization: str | None, on_behalf_of: str | None = None) -> Principal:
        """The caller proven by ``authorization`` (the header's value); Unauthenticated if
        it is missing or proves nothing. ``on_behalf_of``: the user a node holding the
        cluster secret forwards a call of (ignored from anyone else)."""

    def session_token(self, user: str) -> str:
        """A short-lived bearer token for ``user`` (whose password was just checked) that
        this server and its cluster accept."""

    def scram_verifier(self, user: str) -> scram.Verifier | None:
        """The SCRAM-SHA-256 verifier to check ``user``'s proof against: a mock one, the
        same each time, when there is no such user (its exchange then fails as a wrong
        password does); None when the account has none (its password was set before
        verifiers were kept), so it can only send its password."""

    def scram_principal(self, user: str) -> Principal:
        """``user``, whose SCRAM proof was just checked, with its grants."""


def basic(user: str, password: str) -> str:
    """The ``Authorization`` value of HTTP Basic credentials."""
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode("ascii")


class Authenticator:
    """Checks credentials against ``accounts``; ``cluster_secret`` (None: no node may call
    as the cluster) admits other nodes and keys the session tokens."""

    def __init__(
        self, accounts: Accounts, *, cluster_secret: str | None = None, cache_s: float = 5.0
    ) -> None:
        self.accounts = accounts
        self._cluster = cluster_secret or None
        self.sessions = SessionTokens.for_cluster(cluster_secret)
        # From the cluster secret, so every node answers an unknown user with the same salt;
        # without one, random per process as the session key is.
        self._mock_key = (
            hmac.new(cluster_secret.encode(), _MOCK_CONTEXT, hashlib.sha256).digest()
            if cluster_secret
            else secrets.token_bytes(32)
        )
        self.cache_s = cache_s
        self._cache: dict[bytes, tuple[float, Principal]] = {}
        self._lock = threading.Lock()

    def authenticate(self, authorization: str | None, on_behalf_of: str | None = None) -> Principal:
        if not authorization:
            raise Unauthenticated(
                "authentication required: send Authorization: Basic (user and password) or "
                "Bearer (an API token)"
            )
        scheme, _, value = authorization.strip().partition(" ")
        value = value.strip()
        if scheme == CLUSTER_SCHEME:
            if self._cluster is None or not holds_secret(self._cluster, authorization):
                raise Unauthenticated("wrong cluster secret")
            return CLUSTER if on_behalf_of is None else self._vouched(on_behalf_of)
        return self._cached(authorization, lambda: self._check(scheme.lower(), value))

    def session_token(self, user: str) -> str:
        return self.sessions.issue(user)

    def scram_verifier(self, user: str) -> scram.Verifier | None:
        try:
            return self.accounts.scram_verifier(user)
        except Unauthenticated:
            return scram.mock_verifier(self._mock_key, user)

    def scram_principal(self, user: str) -> Principal:
        return self.accounts.vouched(user, via="SCRAM exchange")

    def _vouched(self, user: str) -> Principal:
        # Keyed apart from any Authorization value (those hold a space, names cannot).
        return self._cached(f"vouched:{user}", lambda: self.accounts.vouched(user))

    def _cached(self, key_text: str, check: Callable[[], Principal]) -> Principal:
        key = hashlib.sha256(key_text.encode("utf-8", "surrogateescape")).digest()
        now = time.monotonic()
        with self._lock:
            hit = self._cache.get(key)
        if hit is not None and now - hit[0] < self.cache_s:
            return hit[1]
        principal = check()
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
        if scheme == "bearer" and value.startswith(SESSION_PREFIX):
            return self.accounts.vouched(self.sessions.user(value), via="session token")
        if scheme == "bearer":
            return self.accounts.check_token(value)
        raise Unauthenticated(f"unsupported authorization scheme {scheme!r}: use Basic or Bearer")
