"""A clock tests move by hand, in place of ``time.monotonic`` for what takes a clock."""

from __future__ import annotations


class Clock:
    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now
