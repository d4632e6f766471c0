"""Where a table lives: the engine's one question to its surroundings about tables it does
not hold.

A standalone engine holds every table (:class:`LocalPlacer`). A cluster node's placer asks
the meta service, which allocates table ids and picks the shard of a new table, and knows the
shard and owner of every table; the engine then creates tables in the shards open here, and
answers "not owner, ask X" for the others, whatever interface the request came through.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from node.engine.options import TableOptions
from node.engine.schema import Schema
from node.engine.shard import STANDALONE_SHARD


@dataclass(frozen=True)
class Placed:
    shard_id: int
    #: Allocated by the meta service; None lets the catalog allocate one (standalone).
    table_id: int | None
    #: The endpoint of the node serving the shard ("" while none does, or when local).
    owner: str = ""


class TablePlacer(Protocol):
    def place(self, name: str, schema: Schema, options: TableOptions) -> Placed:
        """Register a new table; AlreadyExists if the name is taken."""

    def unplace(self, name: str) -> None:
        """Forget a dropped table (a no-op for one never placed)."""

    def locate(self, name: str, *, fresh: bool = False) -> Placed | None:
        """Where an existing table lives; None if no such table. ``fresh``: from the
        authority, not a cache, after bringing the shards open here up to date with it."""


class LocalPlacer:
    """Every table in the one standalone shard."""

    def place(self, name: str, schema: Schema, options: TableOptions) -> Placed:
        return Placed(STANDALONE_SHARD, None)

    def unplace(self, name: str) -> None:
        return None

    def locate(self, name: str, *, fresh: bool = False) -> Placed | None:
        return None
