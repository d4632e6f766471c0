"""Helpers for tests that run `gnomon` commands as a user does."""

from __future__ import annotations

import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from testkit.procs import Server
from tests.server.conftest import Running

ROOT = Path(__file__).resolve().parents[2]

#: The last line `gnomon standalone` prints, once it has loaded the demo (the ports open
#: before) and handles SIGTERM.
READY = "stop:   Ctrl-C"


def wait_for_output(server: Server, text: str = READY, timeout_s: float = 120.0) -> None:
    """Block until ``server`` printed ``text`` (bounded in time; fails if it exits first)."""
    deadline = time.monotonic() + timeout_s
    while text not in server.log.read_text():
        assert server.proc.poll() is None, server.log.read_text()[-4000:]
        assert time.monotonic() < deadline, f"no {text!r} after {timeout_s}s"
        time.sleep(0.05)


@dataclass
class Demo(Running):
    """`gnomon standalone --demo` as `make run` starts it, on free ports."""

    def stop(self) -> None:
        """SIGTERM (a graceful stop, as Ctrl-C), which must succeed."""
        self.server.kill(signal.SIGTERM)
        assert self.server.proc.wait(timeout=60) == 0, self.server.log.read_text()[-4000:]
        self.server.stop()


def start_demo(data_dir: Path, log: Path, *extra: str) -> Demo:
    """Start it and wait until the demo is loaded and it serves."""
    server, ports = Server.start_gnomon(
        [
            sys.executable,
            "-m",
            "gnomon_app.cli",
            *extra,
            "standalone",
            "--demo",
            "--data-dir",
            str(data_dir),
            "--http-port=0",
            "--grpc-port=0",
            "--flight-port=0",
            "--wal-sync",
            "never",
        ],
        log=log,
        cwd=ROOT,
        timeout_s=120,
    )
    try:
        wait_for_output(server)
    except BaseException:
        server.stop()
        raise
    return Demo(ports["http"], ports["grpc"], ports["flight"], data_dir, server)
