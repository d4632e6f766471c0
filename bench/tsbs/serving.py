"""What every served system of the benchmark needs: a server subprocess and its peak memory
(the peak RSS of its process tree), its size on disk, and bounded waits."""

from __future__ import annotations

import http.client
import os
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path

import psutil

from testkit.procs import Server

#: Processes count as idle while they use less than this share of one core.
QUIET_CPU = 0.1


class Process(Server):
    """A server subprocess whose peak memory is the kernel's record of it: the peak RSS
    (``VmHWM``) of it and its children, read when it stops. A sampling thread would run in
    the process timing the queries and, each time it ran, hold the interpreter lock a few
    milliseconds (psutil lists every process to find children), delaying whichever query's
    answer arrived meanwhile."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        log: Path,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
    ):
        super().__init__(argv, log=log, env=env, cwd=cwd)
        self.peak_rss = 0

    def _peak_rss(self) -> int:
        """The peaks of the process and of the children it has now, summed (at least the
        peak of their sum)."""
        try:
            proc = psutil.Process(self.pid)
            return sum(_vm_hwm(p.pid) for p in [proc, *proc.children(recursive=True)])
        except psutil.Error:
            return 0

    def stop(self, timeout_s: float = 30.0) -> None:
        if self.proc.poll() is None:
            self.peak_rss = max(self.peak_rss, self._peak_rss())
        super().stop(timeout_s)


def _vm_hwm(pid: int) -> int:
    """A process's peak resident set size in bytes, 0 if it is gone."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class HttpClient:
    """POSTs to one loopback server over keep-alive connections, one per calling thread, as
    a long-running client would hold them (a new TCP connection per request would add its
    setup to every latency)."""

    def __init__(self, port: int, *, timeout_s: float = 300.0) -> None:
        self.port = port
        self.timeout_s = timeout_s
        self._local = threading.local()

    def post(self, target: str, body: bytes = b"") -> bytes:
        return self.post_typed(target, body)[0]

    def post_typed(self, target: str, body: bytes = b"") -> tuple[bytes, str]:
        """The answer's body and Content-Type."""
        conn: http.client.HTTPConnection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout_s)
            self._local.conn = conn
        try:
            conn.request("POST", target, body=body)
            resp = conn.getresponse()
            data = resp.read()
        except (http.client.HTTPException, OSError):
            conn.close()
            self._local.conn = None
            raise
        if resp.status >= 300:
            raise RuntimeError(f"POST {target[:200]} -> {resp.status}: {data[:2000]!r}")
        return data, resp.getheader("Content-Type", "")


def disk_bytes(path: Path) -> int:
    """Bytes allocated on disk under ``path`` (as ``du -B1``: preallocated sparse files count
    for what they use, not their length)."""
    total = 0
    for dirpath, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(dirpath, f)).st_blocks * 512
            except FileNotFoundError:
                continue  # removed by a compaction while we walk
    return total


def http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return bool(200 <= resp.status < 300)
    except (urllib.error.URLError, OSError):
        return False


def wait_until(check: Callable[[], bool], *, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    raise TimeoutError(f"{what}: not ready after {timeout_s:.0f} s")


def _cpu_seconds(pids: Sequence[int]) -> float:
    total = 0.0
    for pid in pids:
        try:
            proc = psutil.Process(pid)
            for p in (proc, *proc.children(recursive=True)):
                t = p.cpu_times()
                total += t.user + t.system
        except psutil.Error:
            continue
    return total


def wait_quiet(pids: Sequence[int], *, window_s: float = 0.05, timeout_s: float = 3.0) -> float:
    """Wait until the processes ``pids`` and their children use together less than
    :data:`QUIET_CPU` of a core over ``window_s`` (a system's after-work, such as a garbage
    collector or a compaction, would otherwise land in the next system's time); at most
    ``timeout_s``. Returns the seconds waited."""
    start = time.monotonic()
    before = _cpu_seconds(pids)
    while time.monotonic() - start < timeout_s:
        time.sleep(window_s)
        after = _cpu_seconds(pids)
        if after - before < QUIET_CPU * window_s:
            break
        before = after
    return time.monotonic() - start
