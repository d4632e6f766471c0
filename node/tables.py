"""The table-source seam: what SQL, ingest and Flight need of tables, as small protocols split
by capability, so they depend on these and not on the concrete :class:`~node.engine.engine.Engine`.

- :class:`TableCatalog`: list, describe, create, drop, alter (DDL and ingest).
- :class:`TableReader`: a table's schema and a scan of a :class:`ScanRequest` (projection,
  predicate, bounds, time range, snapshot; the engine's one request value). Implemented by
  :class:`LocalTables` (this node's engine) and by
  :class:`node.cluster.remote.FlightTableReader` (a table another node serves, read over its
  Arrow Flight endpoint with the request sent whole, in its wire form: the owner prunes by
  its bounds as a local scan does).
- :class:`TableWriter`: writes and deletions by key.
- :class:`Snapshots` and :class:`Staging`: the pinned, split scans and staged revisions the
  Flight endpoint serves.

:class:`LocalTables` is a thin adapter over an engine. Its scans are the engine's own
:class:`~node.engine.scan.Scan`: the hot paths (a small scan read up front, located reads
aggregated as read by :mod:`node.sql.direct`, the Flight ``do_get`` stream and its statistics)
keep using it through this seam, without a copy or a wrapper per batch.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol, TypeVar

import pyarrow as pa

from gnomon.metrics import Tally
from node.engine.catalog import TableInfo
from node.engine.engine import Engine
from node.engine.leases import SnapshotLeases
from node.engine.native import native_files
from node.engine.options import TableOptions
from node.engine.revisions import Revisions
from node.engine.scan import Scan, ScanRequest
from node.engine.schema import Column, Schema
from node.engine.sst.meta import SstMeta
from node.engine.table import Pinned, Table
from node.engine.tsid import KnownSeries

TimeRange = tuple[int | None, int | None]
T = TypeVar("T")

#: Work spent finding a query's tables, since start (``/metrics``): DataFusion plans made
#: (``plans``), and schemas asked of the nodes serving remote tables (``remote_describes``;
#: kept with the table's route, so once per route).
PLANNING = Tally(("plans", "remote_describes"))


class TableCatalog(Protocol):
    """The tables there are and their definitions."""

    def list_tables(self) -> list[str]: ...

    def describe(self, name: str) -> TableInfo: ...

    def create_table(
        self,
        name: str,
        schema: Schema,
        options: TableOptions | None = None,
        *,
        if_not_exists: bool = False,
    ) -> TableInfo: ...

    def drop_table(self, name: str, *, if_exists: bool = False) -> bool: ...

    def alter_table(
        self,
        name: str,
        *,
        add_columns: Sequence[Column] = (),
        options: Mapping[str, str] | None = None,
    ) -> TableInfo: ...


class TableReader(Protocol):
    """Reads tables: their schema and scans of them, as record batches."""

    def schema(self, table: str) -> Schema: ...

    def scan(self, request: ScanRequest) -> Iterable[pa.RecordBatch]: ...


class TableWriter(Protocol):
    """Writes rows, and deletes them by key; durable once a call returns."""

    def write(
        self, table: str, data: pa.RecordBatch | pa.Table, *, series: KnownSeries | None = None
    ) -> int:
        """Write rows durably; ``series``: their writer numbered the rows' series (see
        :class:`KnownSeries`)."""

    def delete_rows(self, table: str, keys: pa.Table) -> int: ...

    @property
    def max_write_bytes(self) -> int:
        """The most one write may hold."""
        ...


class LocalReader(TableReader, Protocol):
    """A reader whose scans are the engine's :class:`Scan` (statistics, estimates, located
    reads): what the hot paths need."""

    def scan(self, request: ScanRequest) -> Scan: ...


class Snapshots(Protocol):
    """Pinned snapshots of a table, cut into time splits scanned apart (Flight), held under
    leases for readers outside the node, and which of their SSTs need no merge."""

    @property
    def leases(self) -> SnapshotLeases: ...

    def native_files(self, table: str, pinned: Pinned, time_range: TimeRange) -> list[SstMeta]:
        """The SSTs of ``pinned`` a reader may read as plain Parquet (``engine/native.py``)."""

    def object_uri(self, key: str) -> str | None:
        """Where a reader with its own client finds an SST (None: nowhere it can)."""

    def flush(self, table: str) -> None: ...

    def pin(
        self, table: str, *, version: int | None = None, timestamp_ms: int | None = None
    ) -> Pinned: ...

    def split(
        self,
        table: str,
        pinned: Pinned,
        time_range: TimeRange = (None, None),
        *,
        max_splits: int,
        min_split_rows: int,
    ) -> list[TimeRange]: ...


class Staging(Protocol):
    """Writes staged under a reserved revision, invisible until committed."""

    @property
    def revisions(self) -> Revisions: ...


class OpenTables(Protocol):
    """The open tables themselves (ingest's logged, pipelined small writes)."""

    def table(self, name: str) -> Table: ...


class SqlTables(TableCatalog, LocalReader, TableWriter, Protocol):
    """What the SQL executor needs of this node's tables."""


class IngestTables(TableCatalog, TableWriter, OpenTables, Protocol):
    """What ingest needs: tables made and widened on the way, and written."""


class FlightTables(TableCatalog, LocalReader, TableWriter, Snapshots, Staging, Protocol):
    """What the Flight endpoint serves."""


class LocalTables:
    """This node's engine behind the seam: every protocol above, each call one engine call."""

    def __init__(self, engine: Engine, *, follower_reads: bool = False) -> None:
        """``follower_reads``: reads use the copies of shards followed here where there are
        some (a moment behind their leaders), and list and describe them too."""
        self.engine = engine
        self.follower_reads = follower_reads

    # -- catalog ---------------------------------------------------------------------------------

    def list_tables(self) -> list[str]:
        return self.engine.list_tables(follower=self.follower_reads)

    def describe(self, name: str) -> TableInfo:
        return self.engine.describe(name, follower=self.follower_reads)

    def create_table(
        self,
        name: str,
        schema: Schema,
        options: TableOptions | None = None,
        *,
        if_not_exists: bool = False,
    ) -> TableInfo:
        return self.engine.create_table(name, schema, options, if_not_exists=if_not_exists)

    def drop_table(self, name: str, *, if_exists: bool = False) -> bool:
        return self.engine.drop_table(name, if_exists=if_exists)

    def alter_table(
        self,
        name: str,
        *,
        add_columns: Sequence[Column] = (),
        options: Mapping[str, str] | None = None,
    ) -> TableInfo:
        return self.engine.alter_table(name, add_columns=add_columns, options=options)

    # -- reads -----------------------------------------------------------------------------------

    def schema(self, table: str) -> Schema:
        return self.describe(table).schema

    def scan(self, request: ScanRequest) -> Scan:
        return self.engine.scan_for(request, follower=self.follower_reads)

    def flush(self, table: str) -> None:
        self.engine.table(table).flush()

    @property
    def leases(self) -> SnapshotLeases:
        return self.engine.leases

    def native_files(self, table: str, pinned: Pinned, time_range: TimeRange) -> list[SstMeta]:
        info = self.describe(table)
        return native_files(info.schema, info.options, pinned, time_range, self.engine.sst_columns)

    def object_uri(self, key: str) -> str | None:
        return self.engine.object_uri(key)

    def pin(
        self, table: str, *, version: int | None = None, timestamp_ms: int | None = None
    ) -> Pinned:
        return self.engine.pin(
            table, version=version, timestamp_ms=timestamp_ms, follower=self.follower_reads
        )

    def split(
        self,
        table: str,
        pinned: Pinned,
        time_range: TimeRange = (None, None),
        *,
        max_splits: int,
        min_split_rows: int,
    ) -> list[TimeRange]:
        return self.engine.split(
            table, pinned, time_range, max_splits=max_splits, min_split_rows=min_split_rows
        )

    # -- writes ----------------------------------------------------------------------------------

    def write(
        self, table: str, data: pa.RecordBatch | pa.Table, *, series: KnownSeries | None = None
    ) -> int:
        return self.engine.write(table, data, series=series)

    def delete_rows(self, table: str, keys: pa.Table) -> int:
        return self.engine.delete_rows(table, keys)

    @property
    def max_write_bytes(self) -> int:
        return self.engine.config.max_write_bytes

    @property
    def revisions(self) -> Revisions:
        return self.engine.revisions

    def table(self, name: str) -> Table:
        return self.engine.table(name)


def local(tables: T | Engine) -> T | LocalTables:
    """``tables``, or the adapter over it if it is an engine: callers that hold an engine
    (tests, tools) pass it as it is; composition roots pass the implementation they built."""
    return LocalTables(tables) if isinstance(tables, Engine) else tables
