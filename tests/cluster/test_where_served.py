"""Parts of one request run where their tables are served: a part meeting "not owner" (nothing
done there) runs again where it is served now, alone; the parts that succeeded are never run
twice, since a stored part written again would be stored twice."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from concurrent import futures

import pytest

from gnomon.errors import NotOwner
from node.cluster import router
from node.cluster.router import where_served

pytestmark = pytest.mark.unit


class Moving:
    """Tables served at ``node-a`` or ``node-b``; ``moving`` tables are found at their old
    node (which answers "not owner") for the first ``away`` placements."""

    def __init__(self, moving: set[str], away: int) -> None:
        self.moving, self.away = moving, away
        self.placements: Counter[str] = Counter()
        self.runs: Counter[tuple[str, ...]] = Counter()
        self.moves: list[NotOwner] = []

    def place(self, tables: Sequence[str]) -> list[list[tuple[str, str]]]:
        groups: dict[str, list[tuple[str, str]]] = {}
        for t in tables:
            self.placements[t] += 1
            stale = t in self.moving and self.placements[t] <= self.away
            node = "old" if stale else ("node-a" if t < "m" else "node-b")
            groups.setdefault(node, []).append((node, t))
        return list(groups.values())

    def run(self, group: list[tuple[str, str]]) -> int:
        self.runs[tuple(t for _, t in group)] += 1
        if group[0][0] == "old":
            raise NotOwner("moved", owner="")
        return len(group)


def _served(moving: Moving, tables: list[str]) -> list[tuple[list[tuple[str, str]], int | str]]:
    with futures.ThreadPoolExecutor(4) as pool:
        running = where_served(
            tables,
            moving.place,
            moving.run,
            item_of=lambda p: p[1],
            moved=moving.moves.append,
            submit=pool.submit,
        )
        return [(g, f.result() if f.exception() is None else "not owner") for g, f in running]


def test_only_the_part_that_met_a_move_runs_again() -> None:
    moving = Moving({"x"}, away=1)
    done = _served(moving, ["a", "b", "x", "y"])
    # "a" and "b" at node-a, "y" at node-b, each run once; "x" first at its old node, then
    # alone where it is served now.
    assert moving.runs == {("a", "b"): 1, ("x",): 2, ("y",): 1}
    assert sorted(n for _, n in done) == [1, 1, 2]
    assert len(moving.moves) == 1


def test_a_part_still_away_at_the_end_fails_with_not_owner(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(router, "move_pauses", lambda wait_s: iter([0.0, 0.0]))
    moving = Moving({"x"}, away=1_000)
    done = _served(moving, ["a", "x"])
    assert moving.runs == {("a",): 1, ("x",): 3}
    assert sorted(map(str, (n for _, n in done))) == ["1", "not owner"]


def test_a_single_part_runs_in_the_callers_thread() -> None:
    moving = Moving(set(), away=0)

    def refuse(fn: object) -> futures.Future[int]:
        raise AssertionError("a single part needs no pool")

    running = where_served(
        ["a"], moving.place, moving.run, item_of=lambda p: p[1], moved=print, submit=refuse
    )
    assert [f.result() for _, f in running] == [1]
