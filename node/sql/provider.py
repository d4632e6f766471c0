"""This node's tables (a :class:`~node.tables.LocalReader`) as DataFusion tables.

DataFusion takes a ``pyarrow.dataset.Dataset`` subclass: it hands the dataset the pushed-down
filter (a pyarrow Expression) and the projection, and treats the filter as exact. The engine
scan applies the filter in full (pruning SSTs and row groups with it first), so DataFusion's
answer stays right while the engine reads only what it must.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from gnomon.errors import GnomonError
from node.engine.scan import ScanRequest, ScanStats
from node.engine.schema import Schema
from node.sql import cancel
from node.tables import LocalReader


@dataclass
class ScanRecord:
    """What one table scan of a query did: shown by EXPLAIN ANALYZE, checked by tests."""

    table: str
    columns: list[str] | None
    #: The scan's filter, rendered only when asked for: rendering it costs about what a
    #: point query's whole read does.
    expression: Callable[[], pc.Expression | None]
    stats: ScanStats = field(default_factory=ScanStats)
    #: A table read from another node: that node (its gRPC endpoint), the scan's id there
    #: (for its ``scan_stats``) and the rows that came over.
    owner: str = ""
    scan_id: str = ""
    rows_received: int = 0
    #: A query answered over the union of several tables, named ``table`` in it: all of
    #: them (``table`` first); empty for ``table`` alone.
    union: tuple[str, ...] = ()

    @property
    def tables(self) -> tuple[str, ...]:
        """The tables read."""
        return self.union or (self.table,)

    @property
    def filter(self) -> str | None:
        expr = self.expression()
        return None if expr is None else str(expr)


class EngineFragment:
    def __init__(self, dataset: EngineDataset, table: str) -> None:
        self._dataset = dataset
        self._table = table

    def scanner(
        self,
        schema: pa.Schema | None = None,
        columns: list[str] | None = None,
        filter: pc.Expression | None = None,
        batch_size: int | None = None,
        **_: Any,
    ) -> ds.Scanner:
        d = self._dataset
        try:
            scan = d.source.scan(
                replace(
                    d.request,
                    table=self._table,
                    columns=columns,
                    predicate=filter,
                    batch_size=batch_size or d.request.batch_size,
                )
            )
        except GnomonError as e:
            # DataFusion would flatten the error into text; keep it for the executor.
            d.errors.append(e)
            raise
        record = ScanRecord(self._table, columns, lambda: filter, scan.stats)
        return recorded(iter(scan), record, d.arrow_schema, columns, d)


class ScanningDataset(Protocol):
    """What a dataset keeps for its query: the scans made, the errors met, the token."""

    scans: list[ScanRecord]
    errors: list[GnomonError]
    token: cancel.CancelToken | None


def recorded(
    batches: Iterator[pa.RecordBatch],
    record: ScanRecord,
    schema: pa.Schema,
    columns: list[str] | None,
    dataset: ScanningDataset,
) -> ds.Scanner:
    """A fragment's scanner: ``batches`` as the ``columns`` of ``schema`` (all of them for
    None), conformed, with ``record`` kept among the dataset's scans."""
    dataset.scans.append(record)
    out = schema if columns is None else pa.schema([schema.field(c) for c in columns])
    return ds.Scanner.from_batches(
        conformed(batches, out, dataset.errors, dataset.token), schema=out
    )


def conformed(
    batches: Iterator[pa.RecordBatch],
    schema: pa.Schema,
    errors: list[GnomonError],
    token: cancel.CancelToken | None,
) -> Iterator[pa.RecordBatch]:
    """``batches`` as ``schema``, stopping when the query is cancelled; a gnomon error is
    kept in ``errors`` for the executor (DataFusion would flatten it into text)."""
    try:
        if token is not None:
            token.check()
        # Each batch held in the server's memory budget until the next one is asked for.
        for b in batches if token is None else token.memory.held_batches(batches):
            yield pa.RecordBatch.from_arrays(b.columns, schema=schema) if b.num_columns else b
            if token is not None:
                # Before reading on: a query nobody waits for any more stops here.
                token.check()
    except GnomonError as e:
        errors.append(e)
        raise


class EngineDataset(ds.InMemoryDataset):  # type: ignore[misc]
    """One table of ``source`` as a DataFusion table: each scan DataFusion makes is
    ``request`` (its table, snapshot, the bounds every row the query needs meets, see
    :mod:`node.sql.prescan`, and whether string tags come dictionary encoded) with the
    projection and filter DataFusion pushes down. With ``union`` (tables of the request's
    schema), the rows of all of them, one fragment each."""

    def __init__(
        self,
        source: LocalReader,
        request: ScanRequest,
        *,
        scans: list[ScanRecord],
        errors: list[GnomonError],
        union: Sequence[str] = (),
    ) -> None:
        self.source = source
        self.request = request
        self.scans = scans
        self.errors = errors
        self.tables = list(union) or [request.table]
        #: The query's cancellation token, taken here, in the request's thread: DataFusion
        #: runs the scans on threads of its own.
        self.token = cancel.current()
        self.arrow_schema = source.schema(request.table).arrow(
            dictionary_tags=request.dictionary_tags
        )
        super().__init__(pa.Table.from_batches([], schema=self.arrow_schema))  # type: ignore[call-arg]

    def get_fragments(self, filter: pc.Expression | None = None) -> list[EngineFragment]:
        return [EngineFragment(self, t) for t in self.tables]


class RemoteTable(Protocol):
    """A table another node serves, readable here for one query."""

    @property
    def owner(self) -> str:
        """The node serving it (its gRPC endpoint)."""

    @property
    def schema(self) -> Schema:
        """Its schema, as its owner describes it."""

    def dataset(self, scans: list[ScanRecord], errors: list[GnomonError]) -> ds.Dataset:
        """The table as a DataFusion table, recording its scans in ``scans``."""


class RemoteTables(Protocol):
    """Where the SQL executor finds the tables a query names that this node does not
    serve."""

    def find(self, names: Sequence[str]) -> Mapping[str, RemoteTable]:
        """Those of ``names`` that are tables served by another node (other names, such as
        columns, are left out)."""


class NoRemoteTables:
    """A standalone server's: every table is served here."""

    def find(self, names: Sequence[str]) -> Mapping[str, RemoteTable]:
        return {}
