"""The SQL planning benchmark at tiny scale: this tree measured twice under two names, every
TSBS query type timed in each round."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import sql_planning
from bench.tsbs.queries import QUERY_TYPES

REPO = Path(__file__).resolve().parents[2]


def test_two_trees_in_turn(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--tree", f"a={REPO}", "--tree", f"b={REPO}", "--rounds", "2", "--repeat", "2"]
    assert sql_planning.main(argv) == 0
    out = capsys.readouterr().out.strip().splitlines()
    rounds = json.loads(out[-1])
    assert len(rounds) == 2
    for found in rounds:
        assert set(found) == {"a", "b"}
        for figures in found.values():
            assert set(figures) == set(QUERY_TYPES)
            assert all(min(f.values()) > 0 for f in figures.values())
            assert all(
                set(f) == {"new_shape_us", "kept_us", "partition_us"} for f in figures.values()
            )
    assert len(out) == 1 + 2 * 2 * len(QUERY_TYPES)
