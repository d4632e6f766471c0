"""Servers run as subprocesses (the external services of `gnomon dev-cluster`, and the real
servers of the integration tests): started on 127.0.0.1 with free ports,
waited for until they accept connections, stopped by pid."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(
    port: int,
    *,
    timeout_s: float = 30.0,
    proc: subprocess.Popen[bytes] | None = None,
    log: Path | None = None,
) -> None:
    """Block until 127.0.0.1:port accepts a connection (bounded by ``timeout_s``)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            tail = log.read_text()[-4000:] if log is not None and log.exists() else ""
            raise RuntimeError(f"server exited with {proc.returncode} before listening:\n{tail}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listening on 127.0.0.1:{port} after {timeout_s}s")


class Server:
    """A subprocess whose output goes to ``log``; ``stop`` kills its whole process group."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        log: Path,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
    ) -> None:
        self.log = log
        self._log_file = open(log, "wb")  # noqa: SIM115 - kept open for the process's lifetime
        self.proc = subprocess.Popen(
            list(argv),
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
            cwd=cwd,
            start_new_session=True,
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def wait_for_port(self, port: int, timeout_s: float = 30.0) -> None:
        wait_for_port(port, timeout_s=timeout_s, proc=self.proc, log=self.log)

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Signal the whole process group (servers may fork helpers)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, sig)

    def stop(self, timeout_s: float = 10.0) -> None:
        if self.proc.poll() is None:
            self.kill(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.kill(signal.SIGKILL)
                self.proc.wait(timeout=timeout_s)
        self._log_file.close()
