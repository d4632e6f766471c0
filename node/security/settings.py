"""A server's security settings, and the check that it is not left open where others can
reach it: a server bound to an address other than loopback refuses to start without
authentication unless it is told ``insecure`` (a network that is trusted for another reason)."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from gnomon.errors import InvalidArgument
from gnomon.store.api import StructuredStore
from gnomon.tls import ServerTls
from node.security.accounts import Accounts
from node.security.authn import Authenticator


def is_loopback(bind: str) -> bool:
    if bind == "localhost":
        return True
    try:
        return ipaddress.ip_address(bind.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything


@dataclass(frozen=True)
class Security:
    """``auth``: every request authenticated (users and tokens in the catalog);
    ``cluster_secret``: what nodes and the meta service present to each other, and the key
    the account records are signed with; ``tls``:
    the servers' certificate; ``auth_cache_s``: how long a successful check is reused."""

    auth: bool = False
    insecure: bool = False
    cluster_secret: str | None = None
    tls: ServerTls | None = None
    auth_cache_s: float = 5.0

    def check_exposure(self, bind: str, role: str) -> None:
        if self.auth or self.insecure or is_loopback(bind):
            return
        raise InvalidArgument(
            f"gnomon {role} would serve {bind} without authentication: turn it on (--auth, "
            "after creating an admin: gnomon admin users create NAME --superuser) or, on a "
            "network trusted otherwise, say so with --insecure"
        )

    def authenticator(self, store: StructuredStore) -> Authenticator | None:
        """The authenticator over the accounts in ``store`` (None: authentication off)."""
        if not self.auth:
            return None
        return Authenticator(
            Accounts(store, cluster_secret=self.cluster_secret),
            cluster_secret=self.cluster_secret,
            cache_s=self.auth_cache_s,
        )
