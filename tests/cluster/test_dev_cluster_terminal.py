"""`gnomon dev-cluster` on a terminal, as a person runs it: that its broker lacks DeleteRecords
is said once, as it starts, not warned by every node; a process of the cluster killed from
another terminal is told at once (which one, how it ended, its log) and reaped, not left a
zombie; Ctrl-C then stops the rest."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pexpect
import pytest

from tests.docs.readme import BIN, ROOT

pytestmark = pytest.mark.unit


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
        assert str(term.before).count("DeleteRecords") == 1, term.before
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
    # Each node knows it from the start, and says so in its log only, as information.
    for node_log in ("node-0.log", "node-1.log"):
        said = [
            line
            for line in (root / "logs" / node_log).read_text().splitlines()
            if "DeleteRecords" in line
        ]
        assert len(said) == 1 and '"level": "INFO"' in said[0], said
