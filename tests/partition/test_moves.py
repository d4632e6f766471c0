"""Work on sub-tables that meet "not owner" (a sub-table on its way to another shard or
node): looked up again and retried, nothing done twice; one that stays away fails as
PartMoved, an Unavailable the client may retry, never a NotOwner (the servers would send the
whole request to that one node)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pytest

from gnomon.errors import NotOwner, Unavailable
from node.backends import open_standalone
from node.cluster import router
from node.engine.engine import Engine
from node.partition.parts import LocalParts, Part, RunSql
from node.partition.tables import PartitionTable, PartMoved
from node.sql.executor import SqlExecutor
from node.tables import LocalTables

pytestmark = pytest.mark.unit

DDL = (
    "CREATE TABLE cpu (host string TAG, v double, ts timestamp NOT NULL, TIMESTAMP KEY(ts)) "
    "PARTITION BY KEY(host) PARTITIONS 2"
)


class MovingParts:
    """Sub-tables served here, except that the first ``away`` lookups of each find it
    elsewhere: writes there answer "not owner" (as a deposed owner's engine does, before
    logging anything)."""

    def __init__(self, local: LocalParts, away: int) -> None:
        self._local = local
        self._away = away
        self.lookups: dict[str, int] = {}
        self.moves: list[NotOwner] = []

    def bind(self, run: RunSql) -> None:
        self._local.bind(run)

    def locate(self, names: Sequence[str]) -> list[Part]:
        parts: list[Part] = []
        for name in names:
            self.lookups[name] = self.lookups.get(name, 0) + 1
            here = self._local.local(name)
            parts.append(here if self.lookups[name] > self._away else _Gone(here))
        return parts

    def moved(self, error: NotOwner) -> None:
        self.moves.append(error)


class _Gone:
    def __init__(self, part: Part) -> None:
        self._part = part

    @property
    def table(self) -> str:
        return self._part.table

    @property
    def owner(self) -> str:
        return "old-owner:1"

    def reader(self) -> LocalTables:
        raise NotOwner(f"{self.table} moved", shard_id=7)

    def query(self, sql: str, union: Sequence[str] = ()) -> pa.Table:
        raise NotOwner(f"{self.table} moved", shard_id=7)

    def write(self, data: pa.Table) -> int:
        raise NotOwner(f"{self.table} moved", shard_id=7)


@pytest.fixture
def engine(tmp_path: Path) -> Engine:
    e = open_standalone(str(tmp_path / "db"), wal_sync="never")
    SqlExecutor(e).execute(DDL)
    return e


def _table(engine: Engine, parts: MovingParts) -> PartitionTable:
    spec = SqlExecutor(engine).partitions.catalog.get("cpu")
    assert spec is not None
    return PartitionTable(spec, parts)


ROWS = pa.table(
    {
        "host": ["a", "b", "c", "d"],
        "v": [1.0, 2.0, 3.0, 4.0],
        "ts": pa.array([1, 2, 3, 4], pa.timestamp("ms")),
    }
)


def test_a_write_meeting_a_move_lands_once(engine: Engine) -> None:
    local = LocalTables(engine)
    parts = MovingParts(LocalParts(local, local), away=2)
    assert _table(engine, parts).write(ROWS) == 4
    assert len(parts.moves) >= 2 and all(m.shard_id == 7 for m in parts.moves)
    stored = sum(engine.read_all(f"__cpu_{i}").num_rows for i in range(2))
    assert stored == 4


def test_one_that_stays_away_fails_as_unavailable(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(router, "move_pauses", lambda wait_s: iter([0.0, 0.0]))
    local = LocalTables(engine)
    parts = MovingParts(LocalParts(local, local), away=1_000)
    with pytest.raises(Unavailable, match="is moving") as failed:
        _table(engine, parts).write(ROWS)
    assert not isinstance(failed.value, NotOwner)
    with pytest.raises(PartMoved):
        _table(engine, parts).gather(["__cpu_0"], lambda p: p.query("SELECT 1"))
    assert sum(engine.read_all(f"__cpu_{i}").num_rows for i in range(2)) == 0


def test_a_group_meeting_a_move_is_grouped_again_where_it_is_served(engine: Engine) -> None:
    local = LocalTables(engine)
    parts = MovingParts(LocalParts(local, local), away=1)
    parts.bind(lambda sql, unions: SqlExecutor(engine).execute(sql, unions).table())
    asked: list[tuple[str, list[str]]] = []

    def ask(group: list[Part]) -> int:
        asked.append((group[0].owner, [p.table for p in group]))
        return len(group[0].query('SELECT ts FROM "__cpu_0"', [p.table for p in group]))

    (answer,) = _table(engine, parts).gather_by_owner(["__cpu_0", "__cpu_1"], ask)
    # Both first found at the old owner (one request, not owner), then both here.
    assert asked == [("old-owner:1", ["__cpu_0", "__cpu_1"]), ("", ["__cpu_0", "__cpu_1"])]
    assert answer == (("__cpu_0", "__cpu_1"), 0)
    assert len(parts.moves) == 1
