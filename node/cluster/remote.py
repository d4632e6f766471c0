"""Tables served by other nodes as DataFusion tables, read over their owners' Arrow Flight
endpoints, so one query can join or union tables of several nodes.

:class:`FlightTableReader` is the remote implementation of the table-source seam's reader
(:class:`node.tables.TableReader`). A remote table is a pyarrow dataset like
:class:`node.sql.provider.EngineDataset` over it; its scan is one ``do_get`` at the table's
owner asking for only the columns DataFusion needs and carrying the filter DataFusion pushed
down. The owner applies that filter to what its engine scan reads, so only matching rows
cross the network, and the dataset returns exactly those rows, as DataFusion, which treats a
pushed filter as exact, requires.

The request travels in its one wire form (:mod:`node.engine.scan.wire`): the filter as a
Substrait expression the owner applies to what its engine scan reads, bounds as filters the
owner prunes by.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.flight as flight

from gnomon.errors import GnomonError
from gnomon.flight.client import FlightClient
from gnomon.peer import Peer
from node.cluster.routes import Route, RouteCache
from node.engine.scan import ScanRequest, wire
from node.engine.schema import Schema
from node.security.context import on_behalf_of
from node.sql import cancel
from node.sql.provider import PLANNING, ScanRecord, conformed

log = logging.getLogger("gnomon.remote")


# -- the remote table source ---------------------------------------------------------------------


@dataclass(frozen=True)
class RemoteScan:
    """One scan at a table's owner: its batches, once, and the id its ``scan_stats`` are
    kept under there."""

    scan_id: str
    batches: Iterator[pa.RecordBatch]

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        return self.batches


class FlightTableReader:
    """The tables another node (``owner``, its gRPC endpoint) serves, read through ``client``
    (its Flight endpoint): a :class:`~node.tables.TableReader`. A scan is one ``do_get``
    whose ticket is the request in its wire form (:mod:`node.engine.scan.wire`): the
    projection, time range, bounds (by which the owner prunes, as for a local scan), snapshot
    and predicate (when it can travel, else applied here on the columns it needs as well);
    string tags arrive plain. A table's schema is asked once, and again after
    :meth:`forget`."""

    def __init__(self, owner: str, client: FlightClient) -> None:
        self.owner = owner
        self.client = client
        self._schemas: dict[str, Schema] = {}

    def schema(self, table: str) -> Schema:
        known = self._schemas.get(table)
        if known is None:
            PLANNING.count("remote_describes")
            known = self._schemas[table] = Schema.from_json(self.client.describe(table)["schema"])
        return known

    def forget(self, table: str) -> None:
        self._schemas.pop(table, None)

    def scan(self, request: ScanRequest) -> RemoteScan:
        scan_id = uuid.uuid4().hex
        sent = wire.encode(request, self.schema(request.table), scan_id=scan_id)
        batches = self.client.read(flight.FlightEndpoint(sent.spec.to_json(), []))
        return RemoteScan(scan_id, sent.answer(batches))


# -- remote tables as datasets -------------------------------------------------------------------


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
        d.scans.append(record)
        out_schema = pa.schema([d.schema.field(c) for c in wanted])
        return ds.Scanner.from_batches(
            conformed(_counted(iter(scan), record), out_schema, d.errors, d.token),
            schema=out_schema,
        )


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

    def dataset(self, scans: list[ScanRecord], errors: list[GnomonError]) -> RemoteDataset:
        return RemoteDataset(self.name, self.reader, scans=scans, errors=errors)


class FlightRemoteTables:
    """A cluster node's remote tables: owners from the route cache, schemas and rows from
    the owners' Flight endpoints (one client and one reader per owner, kept). A table's
    schema is kept with its route: asked again once the route cache fetched the route anew
    (a shard event, a refused request or its age dropped the old one). Calls carry the
    cluster secret (``peer``) and the user the request runs for, where its thread knows
    it: scans the query's executor already authorised run in DataFusion's threads, as the
    cluster."""

    def __init__(self, routes: RouteCache, me: str, peer: Peer | None = None) -> None:
        self._routes = routes
        self._me = me
        self._peer = peer or Peer()
        self._clients: dict[str, FlightClient] = {}
        self._readers: dict[str, FlightTableReader] = {}
        #: The route each table's kept schema came with.
        self._described: dict[str, Route] = {}
        self._lock = threading.Lock()

    def find(self, names: Sequence[str]) -> Mapping[str, FlightTable]:
        found: dict[str, FlightTable] = {}
        for name, route in self._routes.lookup(names).items():
            if route.endpoint == self._me:
                continue
            reader = self.reader(name, route)
            if reader is None:
                continue
            reader.schema(name)  # a table the owner does not have fails here, not in a scan
            found[name] = FlightTable(name, reader)
        return found

    def reader(self, table: str, route: Route) -> FlightTableReader | None:
        """The kept reader of the node ``route`` names for ``table`` (None while it names
        none), its schema of ``table`` forgotten when ``route`` is not the one it came
        with."""
        flight_at = route.endpoints.get("flight", "")
        if not route.endpoint or not flight_at:
            return None
        client = self.client(flight_at)
        with self._lock:
            reader = self._readers.get(route.endpoint)
            if reader is None or reader.client is not client:
                reader = self._readers[route.endpoint] = FlightTableReader(route.endpoint, client)
            if self._described.get(table) is not route:
                self._described[table] = route
                for kept in self._readers.values():
                    kept.forget(table)
        return reader

    def client(self, endpoint: str) -> FlightClient:
        """The kept client of the Flight ``endpoint``."""
        with self._lock:
            client = self._clients.get(endpoint)
            if client is None:
                peer = self._peer
                client = self._clients[endpoint] = FlightClient(
                    peer.flight_location(endpoint),
                    headers=lambda: peer.flight_headers(on_behalf_of()),
                    connect=peer.flight_options(),
                )
            return client

    def close(self) -> None:
        with self._lock:
            clients, self._clients = list(self._clients.values()), {}
        for c in clients:
            c.close()
