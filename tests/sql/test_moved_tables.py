"""A query naming a table this node let go of a moment ago (a migrate closed its shard here,
and this node's route still names itself): "not owner", which servers answer by asking again
where the table is now, never "does not exist", which they pass to the client."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gnomon.errors import NotOwner
from node.backends import open_standalone
from node.sql.executor import SqlExecutor
from node.tables import LocalTables

pytestmark = pytest.mark.unit

ELSEWHERE = "127.0.0.1:9"


class LetGoOf:
    """A node's tables with ``m`` no longer open here: not listed, and NotOwner when named,
    as an engine answers for a table of a shard it closed."""

    def __init__(self, tables: LocalTables) -> None:
        self._tables = tables

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tables, name)

    def _moved(self, table: str) -> None:
        if table == "m":
            raise NotOwner(f"table 'm' is in shard 0, served by {ELSEWHERE}", shard_id=0)

    def list_tables(self) -> list[str]:
        return [t for t in self._tables.list_tables() if t != "m"]

    def schema(self, table: str) -> Any:
        self._moved(table)
        return self._tables.schema(table)

    def scan(self, request: Any) -> Any:
        self._moved(request.table)
        return self._tables.scan(request)


@pytest.fixture
def moved(tmp_path: Path) -> Iterator[SqlExecutor]:
    engine = open_standalone(str(tmp_path / "db"))
    here = SqlExecutor(engine)
    here.execute(
        "CREATE TABLE m (host string TAG, v double, ts timestamp NOT NULL, TIMESTAMP KEY(ts))"
    )
    here.execute("INSERT INTO m (host, v, ts) VALUES ('a', 1.0, 1000)")
    assert isinstance(here.tables, LocalTables)
    yield SqlExecutor(LetGoOf(here.tables), partitions=here.partitions)
    engine.close()


@pytest.mark.parametrize(
    "query",
    [
        "SELECT count(*) AS n FROM m",
        "SELECT host, v FROM m WHERE v > 0",
        "SELECT a.v FROM m a JOIN m b ON a.ts = b.ts",
    ],
)
def test_a_table_let_go_of_here_answers_not_owner(moved: SqlExecutor, query: str) -> None:
    with pytest.raises(NotOwner, match=f"served by {ELSEWHERE}"):
        moved.execute(query)
