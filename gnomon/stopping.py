"""How a server process is told to stop: SIGTERM or SIGINT set an event instead of ending it.

The handlers go in before a server opens its ports (``gnomon standalone``, ``node`` and
``compaction-node`` enter :func:`stop_signals` first): a signal arriving while the server is
still starting, its ports already open, then stops it gracefully once it has started, where
Python's default action would have killed it mid-start, unflushed.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


@contextmanager
def stop_signals(log: logging.Logger) -> Iterator[threading.Event]:
    """An event SIGTERM and SIGINT set (logged on ``log``) while the block runs; the previous
    handlers come back after it. Only the main thread may enter it (Python's signal rule)."""
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        log.info("stopping on signal", extra={"signal": signal.Signals(signum).name})
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in STOP_SIGNALS}
    try:
        yield stop
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
