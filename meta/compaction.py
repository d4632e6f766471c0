"""Choosing a compaction node for a data node that offloads a compaction (DESIGN §7)."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Mapping, Sequence


def least_loaded(candidates: Sequence[str], loads: Mapping[str, float], turn: int) -> str | None:
    """The live compaction node with the lowest reported load (unreported counts as 0); among
    equally loaded ones, the ``turn``-th in name order, so successive picks take turns. None
    when there is no candidate: the caller compacts locally, which is not an error."""
    if not candidates:
        return None
    lowest = min(loads.get(c, 0.0) for c in candidates)
    tied = sorted(c for c in candidates if loads.get(c, 0.0) == lowest)
    return tied[turn % len(tied)]


class CompactionPicker:
    """:func:`least_loaded` with the turn counter kept across calls."""

    def __init__(self) -> None:
        self._turns = itertools.count()
        self._lock = threading.Lock()

    def pick(self, candidates: Sequence[str], loads: Mapping[str, float]) -> str | None:
        with self._lock:
            turn = next(self._turns)
        return least_loaded(candidates, loads, turn)
