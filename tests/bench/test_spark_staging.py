"""The staging benchmark at tiny scale: this tree measured twice under two names, every
stage timed in each round (and the staged rows read back whole, or the child fails)."""

from __future__ import annotations

import pytest

from bench import spark_staging

from .two_trees import measured_twice

pytestmark = pytest.mark.integration


def test_two_trees_in_turn(capsys: pytest.CaptureFixture[str]) -> None:
    rounds, out = measured_twice(spark_staging.main, ["--rows", "30000", "--pause", "0"], capsys)
    for found in rounds:
        for figures in found.values():
            assert set(figures) == {label for _, label in spark_staging.STAGES}
            assert figures["stage"][0] > 0
    assert len(out) == 1 + 2 * 2
