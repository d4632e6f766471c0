"""Running a writer process of the crash tests until a SIGKILL lands mid-write."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_until_killed(module: str, data_dir: str, start: int, delay_s: float) -> list[int]:
    """Run ``python -m module data_dir start`` and SIGKILL it ``delay_s`` after its first
    acknowledgement (so the kill lands mid-write, not mid-import); the numbers it printed,
    one per acknowledged write."""
    proc = subprocess.Popen(
        [sys.executable, "-m", module, data_dir, str(start)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    first = proc.stdout.readline() if proc.stdout else b""
    if not first:
        proc.kill()
        _, err = proc.communicate(timeout=30)
        raise AssertionError(f"writer died before writing: {err!r}")
    time.sleep(delay_s)
    os.kill(proc.pid, signal.SIGKILL)
    out, _ = proc.communicate(timeout=30)
    return [int(first)] + [int(x) for x in out.split()]
