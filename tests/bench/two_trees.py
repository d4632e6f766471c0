"""Running a side-by-side benchmark on this tree measured twice under two names."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]


def measured_twice(
    main: Callable[[Sequence[str]], int],
    extra: Sequence[str],
    capsys: pytest.CaptureFixture[str],
) -> tuple[list[dict[str, Any]], list[str]]:
    """Run ``main`` with this tree as trees ``a`` and ``b`` for two rounds; the rounds of
    its closing JSON line (each with both trees' figures) and every line it printed."""
    assert main(["--tree", f"a={REPO}", "--tree", f"b={REPO}", *extra]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    rounds = json.loads(out[-1])
    assert len(rounds) == 2
    assert all(set(found) == {"a", "b"} for found in rounds)
    return rounds, out
