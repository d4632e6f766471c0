"""The SQL planning benchmark at tiny scale: this tree measured twice under two names, every
TSBS query type timed in each round."""

from __future__ import annotations

import pytest

from bench import sql_planning
from bench.tsbs.queries import QUERY_TYPES

from .two_trees import measured_twice

pytestmark = pytest.mark.integration


def test_two_trees_in_turn(capsys: pytest.CaptureFixture[str]) -> None:
    rounds, out = measured_twice(sql_planning.main, ["--rounds", "2", "--repeat", "2"], capsys)
    for found in rounds:
        for figures in found.values():
            assert set(figures) == set(QUERY_TYPES)
            assert all(min(f.values()) > 0 for f in figures.values())
            assert all(
                set(f) == {"new_shape_us", "kept_us", "partition_us"} for f in figures.values()
            )
    assert len(out) == 1 + 2 * 2 * len(QUERY_TYPES)
