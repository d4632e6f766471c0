"""The crash writer both WALs are tested with: a child process writes from four threads and
prints every acknowledged seq, until it is killed with SIGKILL at some moment of the test's
choosing."""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from gnomon.wal.api import Wal

REPO = Path(__file__).resolve().parents[2]

#: Region and tables the writer writes to.
CRASH_REGION = 1
CRASH_TABLES = range(1, 5)

# argv[1]: a pickled callable returning the Wal, in hex.
_WRITER = """
import pickle, sys, threading

wal = pickle.loads(bytes.fromhex(sys.argv[1]))()
wal.open_region(1)
out = threading.Lock()

def run(table_id):
    seq = wal.last_seq(1, table_id)
    while True:
        seq += 1
        got = wal.write(1, table_id, f"{table_id}:{seq}:".encode() * 8)
        assert got == seq, (got, seq)
        with out:
            sys.stdout.write(f"{table_id} {seq}\\n")
            sys.stdout.flush()

for table_id in range(1, 5):
    threading.Thread(target=run, args=(table_id,), daemon=True).start()
threading.Event().wait()
"""


def crash_payload(table_id: int, seq: int) -> bytes:
    """The payload the writer writes as ``seq`` of ``table_id``."""
    return f"{table_id}:{seq}:".encode() * 8


def child_env() -> dict[str, str]:
    """The environment of a child process that imports the project."""
    return dict(os.environ, PYTHONPATH=str(REPO))


def run_and_kill(
    open_wal: Callable[[], Wal],
    *,
    acked_before_kill: int,
    timeout_s: float,
    extra_delay_s: float = 0.0,
) -> dict[int, int]:
    """Run the crash writer on the WAL ``open_wal`` (picklable) opens until it acknowledged
    ``acked_before_kill`` writes or ``timeout_s`` passed, then ``extra_delay_s`` more, and
    SIGKILL it; the highest acknowledged seq per table."""
    child = subprocess.Popen(
        [sys.executable, "-c", _WRITER, pickle.dumps(open_wal).hex()],
        stdout=subprocess.PIPE,
        cwd=REPO,
        env=child_env(),
    )
    assert child.stdout is not None
    lines: list[bytes] = []
    drain = threading.Thread(target=lines.extend, args=(child.stdout,))
    drain.start()
    deadline = time.monotonic() + timeout_s
    while len(lines) < acked_before_kill and time.monotonic() < deadline and child.poll() is None:
        time.sleep(0.01)
    time.sleep(extra_delay_s)
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=10)
    drain.join(timeout=10)
    assert child.returncode == -signal.SIGKILL
    acked: dict[int, int] = {}
    for line in lines:
        if line.endswith(b"\n"):
            table_id, seq = map(int, line.split())
            acked[table_id] = max(acked.get(table_id, 0), seq)
    assert sum(acked.values()) >= 100, "the writer acknowledged too little before the kill"
    return acked
