"""A query naming a table this node let go of a moment ago (a migrate closed its shard here,
and this node's route still names itself): "not owner", which servers answer by asking again
where the table is now, never "does not exist", which they pass to the client."""

from __future__ import annotations

from typing import Any

import pytest

from gnomon.errors import NotOwner
from node.sql.executor import SqlExecutor
from node.tables import LocalTables

pytestmark = pytest.mark.unit

ELSEWHERE = "127.0.0.1:9"


class LetGoOf:
    """A node's tables with ``t`` no longer open here: not listed, and NotOwner when named,
    as an engine answers for a table of a shard it closed."""

    def __init__(self, tables: LocalTables) -> None:
        self._tables = tables

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tables, name)

    def _moved(self, table: str) -> None:
        if table == "t":
            raise NotOwner(f"table 't' is in shard 0, served by {ELSEWHERE}", shard_id=0)

    def list_tables(self) -> list[str]:
        return [t for t in self._tables.list_tables() if t != "t"]

    def schema(self, table: str) -> Any:
        self._moved(table)
        return self._tables.schema(table)

    def scan(self, request: Any) -> Any:
        self._moved(request.table)
        return self._tables.scan(request)


@pytest.fixture
def moved(executor: SqlExecutor) -> SqlExecutor:
    assert isinstance(executor.tables, LocalTables)
    return SqlExecutor(LetGoOf(executor.tables), partitions=executor.partitions)


@pytest.mark.parametrize(
    "query",
    [
        "SELECT count(*) AS n FROM t",
        "SELECT host, v FROM t WHERE v > 0",
        "SELECT a.v FROM t a JOIN t b ON a.ts = b.ts",
    ],
)
def test_a_table_let_go_of_here_answers_not_owner(moved: SqlExecutor, query: str) -> None:
    with pytest.raises(NotOwner, match=f"served by {ELSEWHERE}"):
        moved.execute(query)
