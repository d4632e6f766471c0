"""Short-lived bearer tokens a server hands out for a user whose password it has just checked
(the Arrow Flight basic-token handshake: pyarrow's ``client.authenticate_basic_token``), so
that the client's later calls skip the scrypt password check.

A session token is signed, not stored: ``gns_<user>:<expires_ms>:<mac>``, where ``mac`` is
HMAC-SHA256 over the user and the expiry under the server's session key. Checking one is a
hash and a clock read, and issuing one writes nothing to the catalog. The key is random per
server process (a restart ends every session), or derived from the cluster secret when one
is set, so any node of the cluster accepts a token another issued (Flight clients redeem
tickets at the nodes serving the data). A session cannot be revoked by itself: it ends at
its expiry (:data:`SESSION_TTL_S`), and a dropped user's sessions stop working at once since
the user is looked up on every check past the authenticator's cache.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time

from gnomon.errors import Unauthenticated

SESSION_PREFIX = "gns_"
#: How long a session token is good for.
SESSION_TTL_S = 900.0
#: Keeps the key derived from the cluster secret apart from other uses of that secret.
_KEY_CONTEXT = b"gnomon session tokens v1"


class SessionTokens:
    """Issues and checks session tokens under one key (``key`` None: a random one)."""

    def __init__(self, key: bytes | None = None, *, ttl_s: float = SESSION_TTL_S) -> None:
        self._key = key if key is not None else secrets.token_bytes(32)
        self.ttl_s = ttl_s

    @classmethod
    def for_cluster(
        cls, cluster_secret: str | None, *, ttl_s: float = SESSION_TTL_S
    ) -> SessionTokens:
        """Tokens every node holding ``cluster_secret`` accepts (None: this process only)."""
        if not cluster_secret:
            return cls(ttl_s=ttl_s)
        key = hmac.new(cluster_secret.encode(), _KEY_CONTEXT, hashlib.sha256).digest()
        return cls(key, ttl_s=ttl_s)

    def issue(self, user: str) -> str:
        expires_ms = int((time.time() + self.ttl_s) * 1000)
        signed = f"{user}:{expires_ms}"
        return f"{SESSION_PREFIX}{signed}:{self._mac(signed)}"

    def user(self, token: str) -> str:
        """The user ``token`` was issued to; Unauthenticated if it is malformed, signed
        under another key, or expired."""
        signed, _, mac = token.removeprefix(SESSION_PREFIX).rpartition(":")
        user, _, expires = signed.rpartition(":")
        if not token.startswith(SESSION_PREFIX) or not user or not expires.isdigit():
            raise Unauthenticated(
                f"malformed session token: expected {SESSION_PREFIX}<user>:<expiry>:<mac>"
            )
        if not hmac.compare_digest(mac, self._mac(signed)):
            raise Unauthenticated("session token not issued by this server or its cluster")
        if int(expires) < time.time() * 1000:
            raise Unauthenticated(
                "session token expired: authenticate again (the Flight handshake with user "
                "and password issues a new one)"
            )
        return user

    def _mac(self, signed: str) -> str:
        digest = hmac.new(self._key, signed.encode("utf-8", "surrogateescape"), hashlib.sha256)
        return base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode("ascii")
