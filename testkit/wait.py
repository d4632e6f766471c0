"""Waiting in tests: for a condition, polled, never for a guessed time; and how long.

A deadline is what the awaited thing takes on an idle machine by the settings the test runs
with (a lease to expire, heartbeat and scheduling intervals, retries, a process to start),
times :data:`~gnomon_app.devcluster.procs.SLOWDOWN`: tests run beside other jobs, and a machine
busy with them runs every process that much slower. So a deadline is only ever reached when
something is broken, and each says where it comes from.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from gnomon_app.devcluster.procs import SLOWDOWN, START_S

__all__ = ["SLOWDOWN", "START_S", "bound", "wait_until"]

#: How often a condition is asked.
POLL_S = 0.05


def bound(idle_s: float) -> float:
    """The deadline of a wait for what takes ``idle_s`` seconds on an idle machine."""
    return SLOWDOWN * idle_s


def wait_until(
    what: str, check: Callable[[], bool], *, timeout_s: float, poll_s: float = POLL_S
) -> None:
    """Poll ``check`` every ``poll_s`` until it holds; fail naming ``what`` if it does not
    within ``timeout_s`` (asked once more at the deadline, so a slow last poll still
    counts)."""
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            if check():
                return
            pytest.fail(f"timed out after {timeout_s:.0f}s waiting for {what}")
        time.sleep(poll_s)
