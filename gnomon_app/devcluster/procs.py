"""Servers run as subprocesses (the external services of `gnomon dev-cluster`, and the real
servers of the integration tests and benchmarks): on 127.0.0.1, waited for until they listen,
stopped by pid.

A port picked free and handed to a server can be taken by another process before the server
binds it. So gnomon's own servers are started on port 0 and report the ports they got in a
ports file (:meth:`Server.start_gnomon`); a server that must be told its port up front is
started through :func:`on_free_ports`, which starts it again on other ports when one was
taken first."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Self, TypeVar

log = logging.getLogger("gnomon.devcluster")

T = TypeVar("T")

#: How many times longer than on an idle machine a wait for the processes may last before it
#: is called failed. A machine busy with other jobs runs every process slower, by about its
#: load average (measured on two cores: at a load of 18 a data node took up to 33 s to start,
#: 16 times its 2 s when idle); the dev cluster and its tests are to stand a load of 50.
#: Only a hung wait lasts that long: a process that ends, or a condition that holds, ends the
#: wait at once.
SLOWDOWN = 50.0
#: Seconds a gnomon server takes to serve once started, on an idle machine (measured on two
#: cores: a data node 1.5 to 2 s, a meta instance 0.4 s; etcd, the broker and the S3 server
#: less).
START_S = 2.0
#: How long a server's start is waited for.
START_TIMEOUT_S = SLOWDOWN * START_S
#: Starts on freshly picked ports before giving up: each attempt loses only if another
#: process takes a port in the moment between its pick and the server binding it.
PORT_ATTEMPTS = 5
#: How servers say that a port they were given is taken: the C library's words (Go, Python,
#: PostgreSQL), Rust's (tansu), werkzeug's (moto) and gnomon's own.
_PORT_TAKEN = re.compile(
    r"address (?:already )?in use|\bport \d+\b[^\n]*\bis in use\b", re.IGNORECASE
)


class PortTaken(RuntimeError):
    """A server ended without listening: another process holds a port it was given."""


def free_ports(count: int) -> tuple[int, ...]:
    """``count`` distinct ports nothing is bound to now (another process may bind one
    before the caller does: see :func:`on_free_ports`)."""
    with contextlib.ExitStack() as held:
        socks = [held.enter_context(socket.socket()) for _ in range(count)]
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return tuple(int(s.getsockname()[1]) for s in socks)


def free_port() -> int:
    """A port nothing is bound to now: for an address where nothing should answer."""
    return free_ports(1)[0]


def on_free_ports(
    start: Callable[[tuple[int, ...]], T], count: int = 1
) -> tuple[T, tuple[int, ...]]:
    """What ``start`` returns, with the ports it was given: ``start`` starts a server on
    ``count`` ports picked free and waits until it serves, raising :class:`PortTaken` when
    another process took one first; it is then called again on new ports, up to
    PORT_ATTEMPTS times."""
    attempt = 1
    while True:
        ports = free_ports(count)
        try:
            return start(ports), ports
        except PortTaken:
            if attempt == PORT_ATTEMPTS:
                raise
            attempt += 1


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

    @classmethod
    def start_gnomon(
        cls,
        argv: Sequence[str],
        *,
        log: Path,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        timeout_s: float = START_TIMEOUT_S,
    ) -> tuple[Self, dict[str, int]]:
        """A gnomon server (``argv``: its command; ports given as 0 are picked free) started
        and waited for until it serves, with the ports it listens on by protocol as it
        reports them (``--ports-file``, a file beside ``log``). Stopped if it does not
        start; :class:`PortTaken` if a port it was given is taken."""
        ports_file = log.with_name(f"{log.name}.ports.json")
        ports_file.unlink(missing_ok=True)
        server = cls([*argv, f"--ports-file={ports_file}"], log=log, env=env, cwd=cwd)
        server._wait(ports_file.exists, timeout_s, "serving")
        ports: dict[str, int] = json.loads(ports_file.read_text())
        return server, ports

    @property
    def pid(self) -> int:
        return self.proc.pid

    def wait_for_port(self, port: int, timeout_s: float = START_TIMEOUT_S) -> None:
        """Block until this server listens on ``port``: not merely until something answers
        there, which may be another process holding the port. If it does not, it is stopped
        and the wait raises: :class:`PortTaken` if it ended saying a port is in use."""
        self._wait(lambda: _listens(self.proc.pid, port), timeout_s, f"listening on {port}")

    def _wait(self, ready: Callable[[], bool], timeout_s: float, what: str) -> None:
        """Poll until ``ready``; the server is stopped if it ends first or takes longer than
        ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        try:
            while not ready():
                if self.proc.poll() is not None:
                    tail = self.log.read_text(errors="replace")[-4000:]
                    error = PortTaken if _PORT_TAKEN.search(tail) else RuntimeError
                    raise error(f"server exited with {self.proc.returncode}, not {what}:\n{tail}")
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{self.log.name}: not {what} after {timeout_s}s")
                time.sleep(0.05)
        except BaseException:
            self.stop()
            raise

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
                log.warning(
                    "process did not stop on SIGTERM; killed",
                    extra={"log": str(self.log), "waited_s": timeout_s},
                )
                self.kill(signal.SIGKILL)
                self.proc.wait(timeout=timeout_s)
        self._log_file.close()


def how_it_ended(returncode: int) -> str:
    """How a process ended, from its return code (a negative one: the signal that killed
    it)."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"was killed by {name}"
    return f"exited with code {returncode}"


def _listens(group: int, port: int) -> bool:
    """Whether a process of process group ``group`` has a TCP socket listening on ``port``
    (Linux: the kernel's socket tables and each process's descriptors)."""
    listening = _listening_sockets(port)
    if not listening:
        return False
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if os.getpgid(int(entry.name)) == group and _sockets_of(entry.path) & listening:
                return True
    return False


def _listening_sockets(port: int) -> set[str]:
    """The inodes of the TCP sockets listening on ``port`` at any address."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(FileNotFoundError), open(table, encoding="ascii") as f:
            next(f)  # the header
            for line in f:
                # sl local_address rem_address st ... inode; the address is HEX:HEXPORT and
                # state 0A is LISTEN.
                fields = line.split()
                if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                    inodes.add(fields[9])
    return inodes


def _sockets_of(proc_dir: str) -> set[str]:
    """The inodes of the sockets a process (its /proc directory) has open."""
    found = set()
    fds = os.path.join(proc_dir, "fd")
    for fd in os.listdir(fds):
        with contextlib.suppress(OSError):
            target = os.readlink(os.path.join(fds, fd))
            if target.startswith("socket:["):
                found.add(target[len("socket:[") : -1])
    return found
