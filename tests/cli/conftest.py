"""Helpers for tests that run `gnomon` commands as a user does."""

from __future__ import annotations

import time

from tests.support.procs import Server

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
