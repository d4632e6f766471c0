"""Running a writer process of the crash tests until a SIGKILL lands mid-write, again and
again, and checking what a reopened engine holds after each kill."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
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


def kill_repeatedly(
    module: str,
    data_dir: str,
    kills: int,
    rng: random.Random,
    max_delay_s: float,
    ids_of: Callable[[int], Iterable[int]],
) -> Iterator[tuple[int, set[int]]]:
    """Run the writer ``kills`` times, each killed at a random moment up to ``max_delay_s``
    after its first acknowledgement; after each kill, its number and the ids acknowledged
    so far (``ids_of`` a write's number)."""
    acked: set[int] = set()
    start = 0
    for kill in range(kills):
        writes = run_until_killed(module, data_dir, start, rng.uniform(0.0, max_delay_s))
        for write in writes:
            acked.update(ids_of(write))
        # The write in flight when the kill landed may be durable without its
        # acknowledgement; the next writer starts past it so that it can only appear once.
        start = max(writes) + 2
        yield kill, acked


def assert_each_once(kill: int, ids: Iterable[object], acked: set[int]) -> None:
    """Every acknowledged id is among ``ids`` (read after kill number ``kill``), and no id is
    there twice."""
    counts = Counter(ids)
    dupes = [i for i, n in counts.items() if n > 1]
    assert not dupes, f"kill {kill}: rows read twice: {dupes[:10]}"
    missing = acked - counts.keys()
    assert not missing, f"kill {kill}: acknowledged rows lost: {sorted(missing)[:10]}"
