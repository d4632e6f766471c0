"""`gnomon dev-cluster` on a terminal, as a person runs it: a process of the cluster killed
from another terminal is told at once (which one, how it ended, its log) and reaped, not left
a zombie; Ctrl-C then stops the rest."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pexpect

from tests.docs.readme import BIN, ROOT


def _child(parent: int, flag: str) -> int:
    """The pid of the one child of ``parent`` whose command line holds ``flag``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            # The parent's pid is the fourth field, after the command name in parentheses.
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
        if ppid == parent and flag.encode() in argv:
            found.append(int(entry.name))
    (pid,) = found
    return pid


def test_a_killed_node_is_told_and_reaped(tmp_path: Path) -> None:
    root = tmp_path / "dc"
    term: pexpect.spawn[str] = pexpect.spawn(
        str(BIN / "gnomon"),
        ["dev-cluster", "--nodes", "2", "--port-base", "0", "--data-dir", str(root)],
        cwd=str(ROOT),
        encoding="utf-8",
        timeout=180,
    )
    try:
        term.expect_exact("stop: Ctrl-C")
        assert term.pid is not None
        node = _child(term.pid, f"--data-dir={root / 'node-1'}")
        os.kill(node, signal.SIGKILL)  # kill -9 from another terminal
        term.expect_exact(f"node-1 (pid {node}) was killed by SIGKILL; its log: ", timeout=30)
        term.expect_exact("node-1.log")
        assert not os.path.exists(f"/proc/{node}"), "left a zombie"
        term.sendintr()
        term.expect(pexpect.EOF, timeout=120)
    finally:
        term.close(force=True)
    assert term.exitstatus == 0, (term.exitstatus, term.signalstatus, term.before)
