"""Partition tables as one logical table over their sub-tables.

:class:`Partitions` is what the servers hold: the definitions (a :class:`PartitionCatalog`)
and where each sub-table is served (a :class:`PartLocator`), both given by the placement, so
a standalone server has partition tables too, every sub-table local. :class:`PartitionTable`
splits writes by the key rule (:mod:`node.partition.rule`) and runs work on the sub-tables
where they live, in parallel; a sub-table found moved (its shard migrated or split) is looked
up again once. :class:`PartitionedCatalog` shows SQL a partition table as one table.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from concurrent import futures
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa

from gnomon.errors import AlreadyExists, InvalidArgument, NotOwner, Unavailable
from node.cluster.ingest_forward import SentPart, outcome
from node.cluster.router import where_served
from node.engine.bounds import Range
from node.engine.catalog import TableInfo
from node.engine.options import TableOptions
from node.engine.schema import Column, Schema
from node.partition.catalog import LocalPartitionCatalog, PartitionCatalog
from node.partition.parts import LocalParts, Part, PartLocator, RunSql, by_owner
from node.partition.rule import KeyRule
from node.partition.spec import PartitionSpec
from node.tables import LocalTables, SqlTables, TableCatalog

log = logging.getLogger("gnomon.partition")

T = TypeVar("T")


class PartMoved(Unavailable):
    """A sub-table was not served where its route said, even after looking again (its shard
    is moving); ``cause`` is the answer met. Never a NotOwner: the servers would send the
    whole request to that one node."""

    def __init__(self, message: str, cause: NotOwner) -> None:
        super().__init__(message)
        self.cause = cause


#: Work on sub-tables in flight at once, over all requests of this node.
MAX_PARALLEL = 16
_POOL = futures.ThreadPoolExecutor(MAX_PARALLEL, thread_name_prefix="gnomon-partition")


class PartitionTable:
    def __init__(self, spec: PartitionSpec, parts: PartLocator) -> None:
        self.spec = spec
        self._parts = parts

    @property
    def name(self) -> str:
        return self.spec.name

    def sub_tables(self, partitions: Sequence[int] | None = None) -> list[str]:
        """The sub-tables of ``partitions`` (None: all)."""
        indexes = range(self.spec.rule.partitions) if partitions is None else partitions
        return [self.spec.sub_table(i) for i in indexes]

    def parts(self, partitions: Sequence[int] | None = None) -> list[Part]:
        return self._parts.locate(self.sub_tables(partitions))

    def reading(self, bounds: Mapping[str, Range] | None) -> list[Part]:
        """The sub-tables a query whose rows lie within ``bounds`` reads: those the key's
        values leave, at least one (a query no row can match still has an answer, which a
        sub-table gives)."""
        keep = None if bounds is None else self.spec.rule.prune(bounds)
        return self.parts(None if keep is None else keep or [0])

    # -- running on sub-tables -------------------------------------------------------------------

    def _each(
        self,
        subs: Sequence[str],
        fn: Callable[[list[Part]], T],
        together: Callable[[Sequence[Part]], list[list[Part]]],
    ) -> dict[tuple[str, ...], futures.Future[T]]:
        """``fn`` on the groups ``together`` makes of ``subs`` where they are served, in
        parallel; the sub-tables of groups that met "not owner" grouped again where they are
        served now (:func:`~node.cluster.router.where_served`); a group still meeting it then
        fails as :class:`PartMoved`."""
        running = {
            tuple(p.table for p in g): f
            for g, f in where_served(
                subs,
                lambda names: together(self._parts.locate(names)),
                fn,
                item_of=lambda p: p.table,
                name_of=lambda p: p.table,
                moved=self._parts.moved,
                submit=_POOL.submit,
            )
        }
        for g, f in running.items():
            error = f.exception()
            if isinstance(error, NotOwner):  # still moving
                failed: futures.Future[T] = futures.Future()
                failed.set_exception(
                    PartMoved(
                        f"partition table {self.name!r}: sub-table {', '.join(g)!r} is moving "
                        f"({error.message}); try again",
                        error,
                    )
                )
                running[g] = failed
        return running

    def each(self, subs: Sequence[str], fn: Callable[[Part], T]) -> dict[str, futures.Future[T]]:
        """``fn`` on each of ``subs`` where it is served, in parallel; those that met "not
        owner" again where they are served now (:meth:`_each`)."""
        running = self._each(subs, lambda g: fn(g[0]), _alone)
        return {g[0]: f for g, f in running.items()}

    def gather(self, subs: Sequence[str], fn: Callable[[Part], T]) -> list[T]:
        """:meth:`each`'s results in the order of ``subs``; the first failure raised."""
        running = self.each(subs, fn)
        return [running[s].result() for s in subs]

    def gather_by_owner(
        self, subs: Sequence[str], fn: Callable[[list[Part]], T]
    ) -> list[tuple[tuple[str, ...], T]]:
        """``fn`` once per node serving some of ``subs``, on the sub-tables it serves
        (:func:`~node.partition.parts.by_owner`), in parallel, retried as :meth:`each` is:
        each group's sub-tables with its result; the first failure raised."""
        running = self._each(subs, fn, by_owner)
        return [(g, f.result()) for g, f in running.items()]

    # -- writes ----------------------------------------------------------------------------------

    def partition_of(self, keys: Mapping[str, Any], n: int) -> np.ndarray:
        """The partition of each of ``n`` rows written with the key columns ``keys``; a key
        column a write leaves out gets its DEFAULT, as the stored row will."""
        filled = dict(keys)
        for name in self.spec.rule.columns:
            default = self.spec.schema.column(name).default
            if name not in filled and default is not None:
                filled[name] = pa.array([default] * n, pa.string())
        return self.spec.rule.of(filled, n)

    def split(self, data: pa.Table) -> dict[str, pa.Table]:
        """``data`` (rows of this table) by sub-table."""
        keys = {n: data.column(n) for n in self.spec.rule.columns if n in data.column_names}
        partition = self.partition_of(keys, data.num_rows)
        return {
            self.spec.sub_table(p): data.take(pa.array(rows))
            for p, rows in self.spec.rule.groups(partition).items()
        }

    def write(self, data: pa.Table | pa.RecordBatch) -> int:
        """Write ``data`` to the sub-tables its rows belong to; acknowledged when every part
        was (PartlyWritten names the parts stored when others were not)."""
        table = data if isinstance(data, pa.Table) else pa.Table.from_batches([data])
        parts = self.split(table)
        running = self.each(list(parts), lambda p: p.write(parts[p.table]))
        return outcome([SentPart(sub, [sub], f) for sub, f in running.items()])


def _alone(parts: Sequence[Part]) -> list[list[Part]]:
    return [[p] for p in parts]


class Partitions:
    """The partition tables a node serves requests for."""

    def __init__(self, catalog: PartitionCatalog, parts: PartLocator) -> None:
        self.catalog = catalog
        self.parts = parts

    def find(self, name: str) -> PartitionTable | None:
        spec = self.catalog.get(name)
        return None if spec is None else PartitionTable(spec, self.parts)

    def names(self) -> list[str]:
        return self.catalog.names()

    def create(
        self,
        name: str,
        schema: Schema,
        options: TableOptions,
        key: Sequence[str],
        partitions: int,
        *,
        if_not_exists: bool = False,
    ) -> PartitionSpec:
        rule = KeyRule(tuple(key), partitions)
        rule.check(name, schema)
        spec = self.catalog.create(
            PartitionSpec(name, schema, options, rule), if_not_exists=if_not_exists
        )
        log.info(
            "partition table created",
            extra={"table": name, "key": list(rule.columns), "partitions": partitions},
        )
        return spec

    def drop(self, name: str) -> bool:
        return self.catalog.drop(name)

    def bind(self, run: RunSql) -> None:
        """Queries of sub-tables served here run with ``run`` (the SQL executor's)."""
        self.parts.bind(run)


def standalone_partitions(tables: SqlTables) -> Partitions:
    """The partition tables of a standalone engine's ``tables``: definitions beside its
    catalog, every sub-table local."""
    if not isinstance(tables, LocalTables):
        raise InvalidArgument("partition tables of these tables need a partition catalog")
    return Partitions(
        LocalPartitionCatalog(tables.engine.catalog.store, tables), LocalParts(tables, tables)
    )


class PartitionedCatalog:
    """``tables`` with the partition tables of ``partitions`` as tables of their own, and
    without their sub-tables: what SQL lists, describes, creates and drops."""

    def __init__(self, tables: TableCatalog, partitions: Partitions) -> None:
        self.tables = tables
        self.partitions = partitions

    def list_tables(self) -> list[str]:
        """Every table a statement may name: partition tables and their sub-tables too."""
        return sorted({*self.tables.list_tables(), *self.partitions.names()})

    def shown_tables(self) -> list[tuple[str, int]]:
        """The tables SHOW TABLES lists, by name and id: partition tables, not their
        sub-tables; in a cluster every node lists the database's, served here or not."""
        listed = self.partitions.catalog.database_tables()
        if listed is not None:
            return listed
        return [(n, self.describe(n).table_id) for n in self._served_tables()]

    def _served_tables(self) -> list[str]:
        names = self.partitions.names()
        hidden = {
            sub
            for n in names
            if (spec := self.partitions.catalog.get(n)) is not None
            for sub in spec.sub_tables
        }
        return sorted({*(t for t in self.tables.list_tables() if t not in hidden), *names})

    def describe(self, name: str) -> TableInfo:
        found = self.partitions.find(name)
        return self.tables.describe(name) if found is None else found.spec.info()

    def create_table(
        self,
        name: str,
        schema: Schema,
        options: TableOptions | None = None,
        *,
        if_not_exists: bool = False,
    ) -> TableInfo:
        found = self.partitions.find(name)
        if found is not None:
            if if_not_exists:
                return found.spec.info()
            raise AlreadyExists(f"table {name!r} already exists")
        return self.tables.create_table(name, schema, options, if_not_exists=if_not_exists)

    def drop_table(self, name: str, *, if_exists: bool = False) -> bool:
        if self.partitions.find(name) is not None:
            return self.partitions.drop(name)
        return self.tables.drop_table(name, if_exists=if_exists)

    def alter_table(
        self,
        name: str,
        *,
        add_columns: Sequence[Column] = (),
        options: Mapping[str, str] | None = None,
    ) -> TableInfo:
        if self.partitions.find(name) is not None:
            raise InvalidArgument(
                f"table {name!r} is a partition table: ALTER TABLE is not supported for "
                "partition tables yet"
            )
        return self.tables.alter_table(name, add_columns=add_columns, options=options)
