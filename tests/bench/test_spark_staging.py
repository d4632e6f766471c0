"""The staging benchmark at tiny scale: this tree measured twice under two names, every
stage timed in each round (and the staged rows read back whole, or the child fails)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import spark_staging

REPO = Path(__file__).resolve().parents[2]


def test_two_trees_in_turn(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--tree", f"a={REPO}", "--tree", f"b={REPO}", "--rows", "30000", "--pause", "0"]
    assert spark_staging.main(argv) == 0
    out = capsys.readouterr().out.strip().splitlines()
    rounds = json.loads(out[-1])
    assert len(rounds) == 2
    for found in rounds:
        assert set(found) == {"a", "b"}
        for figures in found.values():
            assert set(figures) == {label for _, label in spark_staging.STAGES}
            assert figures["stage"][0] > 0
    assert len(out) == 1 + 2 * 2
