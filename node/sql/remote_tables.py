"""Tables served by other nodes as DataFusion tables, so one query can join or union tables
of several nodes. A remote table is a pyarrow dataset like
:class:`node.sql.provider.EngineDataset` over its owner's
:class:`~node.cluster.remote.FlightTableReader`: DataFusion pushes a filter down, the owner
applies it, and the dataset returns exactly those rows, as DataFusion, which treats a pushed
filter as exact, requires.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from gnomon.errors import GnomonError
from node.cluster.remote import FlightReaders, FlightTableReader
from node.engine.scan import ScanRequest
from node.engine.schema import Schema
from node.sql import cancel
from node.sql.provider import ScanRecord, recorded


class RemoteFragment:
    def __init__(self, dataset: RemoteDataset) -> None:
        self._dataset = dataset

    def scanner(
        self,
        schema: pa.Schema | None = None,
        columns: list[str] | None = None,
        filter: pc.Expression | None = None,
        **_: Any,
    ) -> ds.Scanner:
        d = self._dataset
        wanted = list(d.schema.names) if columns is None else list(columns)
        scan = d.reader.scan(ScanRequest(d.table, columns=wanted, predicate=filter))
        record = ScanRecord(
            d.table, columns, lambda: filter, owner=d.reader.owner, scan_id=scan.scan_id
        )
        return recorded(_counted(iter(scan), record), record, d.schema, wanted, d)


def _counted(batches: Iterator[pa.RecordBatch], record: ScanRecord) -> Iterator[pa.RecordBatch]:
    for b in batches:
        record.rows_received += b.num_rows
        yield b


class RemoteDataset(ds.InMemoryDataset):  # type: ignore[misc]
    """Table ``table`` read through ``reader`` (its owner's); string tags arrive plain."""

    def __init__(
        self,
        table: str,
        reader: FlightTableReader,
        *,
        scans: list[ScanRecord],
        errors: list[GnomonError],
    ) -> None:
        self.table = table
        self.reader = reader
        self.scans = scans
        self.errors = errors
        #: The query's cancellation token, taken in the request's thread (see EngineDataset).
        self.token = cancel.current()
        super().__init__(pa.Table.from_batches([], schema=reader.schema(table).arrow()))  # type: ignore[call-arg]

    def get_fragments(self, filter: pc.Expression | None = None) -> list[RemoteFragment]:
        return [RemoteFragment(self)]


@dataclass(frozen=True)
class FlightTable:
    """A table another node serves, as found for one query."""

    name: str
    reader: FlightTableReader

    @property
    def owner(self) -> str:
        """The owner's gRPC endpoint (what names a node)."""
        return self.reader.owner

    @property
    def schema(self) -> Schema:
        return self.reader.schema(self.name)

    def dataset(self, scans: list[ScanRecord], errors: list[GnomonError]) -> RemoteDataset:
        return RemoteDataset(self.name, self.reader, scans=scans, errors=errors)


class FlightRemoteTables:
    """A cluster node's remote tables, found for a query through ``readers``: a table the
    route cache places elsewhere, its schema asked of its owner as it is found."""

    def __init__(self, readers: FlightReaders) -> None:
        self._readers = readers

    def find(self, names: Sequence[str]) -> Mapping[str, FlightTable]:
        found: dict[str, FlightTable] = {}
        for name, route in self._readers.routes.lookup(names).items():
            if route.endpoint == self._readers.me:
                continue
            reader = self._readers.reader(name, route)
            if reader is None:
                continue
            reader.schema(name)  # a table the owner does not have fails here, not in a scan
            found[name] = FlightTable(name, reader)
        return found
