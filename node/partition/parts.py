"""The sub-tables of partition tables where they are served: this node's (:class:`LocalPart`)
or another node's (``node.partition.cluster.RemotePart``, over its Arrow Flight endpoint).
One interface for both, so reads, partial queries and writes of a partition table do not
care where each sub-table lives; the placement decides that (a standalone server serves them
all, :class:`LocalParts`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

import pyarrow as pa

from gnomon.errors import InvalidArgument, NotOwner
from node.tables import TableReader, TableWriter

#: Runs a query on this node over tables it serves (the SQL executor's own answer), each
#: name of the mapping reading the rows of the tables it maps to.
RunSql = Callable[[str, Mapping[str, Sequence[str]]], pa.Table]


class Part(Protocol):
    """One sub-table, where it is served."""

    @property
    def table(self) -> str: ...

    @property
    def owner(self) -> str:
        """The node serving it (its gRPC endpoint); "" for this node."""

    def reader(self) -> TableReader:
        """Reads it (projection and predicate applied where it is served)."""

    def query(self, sql: str, union: Sequence[str] = ()) -> pa.Table:
        """The answer of ``sql``, a query over this sub-table alone, run where it is served;
        with ``union`` (sub-tables served by the same node, this one among them), the
        query's name of this sub-table reads the rows of all of them."""

    def write(self, data: pa.Table) -> int:
        """Write ``data`` to it; the rows written."""


class PartLocator(Protocol):
    def locate(self, tables: Sequence[str]) -> list[Part]:
        """Where each of ``tables`` (sub-tables) is served now, in their order."""

    def moved(self, error: NotOwner) -> None:
        """A sub-table was not where it was looked for: forget what pointed there."""

    def bind(self, run: RunSql) -> None:
        """Queries of sub-tables served here run with ``run``."""


class LocalPart:
    def __init__(self, table: str, tables: TableReader, writer: TableWriter, run: RunSql) -> None:
        self._table = table
        self._tables = tables
        self._writer = writer
        self._run = run

    @property
    def table(self) -> str:
        return self._table

    @property
    def owner(self) -> str:
        return ""

    def reader(self) -> TableReader:
        return self._tables

    def query(self, sql: str, union: Sequence[str] = ()) -> pa.Table:
        return self._run(sql, {self._table: list(union)} if union else {})

    def write(self, data: pa.Table) -> int:
        return self._writer.write(self._table, data)


def by_owner(parts: Sequence[Part]) -> list[list[Part]]:
    """``parts`` by the node serving them, in the order each node first appears: the
    sub-tables one node answers one query for."""
    groups: dict[str, list[Part]] = {}
    for p in parts:
        groups.setdefault(p.owner, []).append(p)
    return list(groups.values())


def _unbound(sql: str, unions: Mapping[str, Sequence[str]]) -> pa.Table:
    raise InvalidArgument("no SQL executor serves the sub-tables of this node")


class LocalParts:
    """Every sub-table served here (a standalone server)."""

    def __init__(self, tables: TableReader, writer: TableWriter) -> None:
        self._tables = tables
        self._writer = writer
        self._run: RunSql = _unbound

    def bind(self, run: RunSql) -> None:
        self._run = run

    def local(self, table: str) -> LocalPart:
        return LocalPart(table, self._tables, self._writer, self._answer)

    def _answer(self, sql: str, unions: Mapping[str, Sequence[str]]) -> pa.Table:
        # Through the attribute: parts located before bind() run with the bound executor.
        return self._run(sql, unions)

    def locate(self, tables: Sequence[str]) -> list[Part]:
        return [self.local(t) for t in tables]

    def moved(self, error: NotOwner) -> None:
        return None
