"""Parts of one request run where their tables are served: a part meeting "not owner" (nothing
done there) runs again where it is served now, alone; the parts that succeeded are never run
twice, since a stored part written again would be stored twice."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from concurrent import futures

import pytest

from gnomon.errors import MovedPartway, NotOwner
from node.cluster import router
from node.cluster.router import LocalRouter, through_moves, where_served

pytestmark = pytest.mark.unit


class Moving:
    """Tables served at ``node-a`` or ``node-b``; ``moving`` tables are found at their old
    node (which answers "not owner") for the first ``away`` placements."""

    def __init__(self, moving: set[str], away: int, *, together: bool = False) -> None:
        """``together``: the first placement finds every table at the old node (the whole
        request went there)."""
        self.moving, self.away, self.together = moving, away, together
        self.placements: Counter[str] = Counter()
        self.runs: Counter[tuple[str, ...]] = Counter()
        self.moves: list[NotOwner] = []

    def place(self, tables: Sequence[str]) -> list[list[tuple[str, str]]]:
        groups: dict[str, list[tuple[str, str]]] = {}
        for t in tables:
            self.placements[t] += 1
            first = self.placements[t] <= self.away
            stale = first and (t in self.moving or self.together)
            node = "old" if stale else ("node-a" if t < "m" else "node-b")
            groups.setdefault(node, []).append((node, t))
        return list(groups.values())

    def run(self, group: list[tuple[str, str]]) -> int:
        self.runs[tuple(t for _, t in group)] += 1
        if group[0][0] == "old":
            raise NotOwner("moved", owner="")
        return len(group)

    def run_partway(self, group: list[tuple[str, str]]) -> int:
        """As :meth:`run`, except that an old node stores the tables before the first moving
        one of its group (MovedPartway, as the ingestor says)."""
        self.runs[tuple(t for _, t in group)] += 1
        if group[0][0] != "old":
            return len(group)
        names = [t for _, t in group]
        first = next(i for i, t in enumerate(names) if t in self.moving)
        if first == 0:
            raise NotOwner("moved", owner="")
        raise MovedPartway(NotOwner("moved"), written=names[:first], rows=first)


def _served(
    moving: Moving, tables: list[str], *, partway: bool = False
) -> list[tuple[list[tuple[str, str]], int | str]]:
    with futures.ThreadPoolExecutor(4) as pool:
        running = where_served(
            tables,
            moving.place,
            moving.run_partway if partway else moving.run,
            item_of=lambda p: p[1],
            name_of=lambda p: p[1],
            moved=moving.moves.append,
            submit=pool.submit,
            partway=(lambda e: e.rows) if partway else None,
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
        ["a"],
        moving.place,
        moving.run,
        item_of=lambda p: p[1],
        name_of=lambda p: p[1],
        moved=print,
        submit=refuse,
    )
    assert [f.result() for _, f in running] == [1]


def test_a_group_stored_partway_runs_only_its_tables_not_stored() -> None:
    # The old node stores "a" and "b" of the group a, b, c, d and meets the move at "c";
    # "c" and "d" alone run again where they are served now (both at node-a).
    moving = Moving({"c"}, away=1, together=True)
    done = _served(moving, ["a", "b", "c", "d"], partway=True)
    assert moving.runs == {("a", "b", "c", "d"): 1, ("c", "d"): 1}
    assert sum(n for _, n in done if isinstance(n, int)) == 4
    assert len(moving.moves) == 1


def test_without_partway_a_group_stored_partway_fails_with_it() -> None:
    moving = Moving({"b"}, away=1, together=True)
    with futures.ThreadPoolExecutor(2) as pool:
        running = where_served(
            ["a", "b"],
            moving.place,
            moving.run_partway,
            item_of=lambda p: p[1],
            name_of=lambda p: p[1],
            moved=moving.moves.append,
            submit=pool.submit,
        )
    ((_, failed),) = running
    assert isinstance(failed.exception(), MovedPartway)
    assert moving.runs == {("a", "b"): 1}


def test_through_moves_never_sends_a_request_stored_partway_again() -> None:
    calls = []

    class Routes(LocalRouter):
        def owner_moved(self, error: NotOwner) -> None:
            calls.append("moved")

    def write() -> int:
        calls.append("write")
        raise MovedPartway(NotOwner("moved"), written=["a"], rows=1)

    with pytest.raises(MovedPartway):
        through_moves(write, Routes())
    assert calls == ["write"]
