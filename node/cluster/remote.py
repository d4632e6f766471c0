"""Tables served by other nodes, read over their owners' Arrow Flight endpoints.

:class:`FlightTableReader` is the remote implementation of the table-source seam's reader
(:class:`node.tables.TableReader`); :class:`FlightReaders` keeps one per owner. A scan is one
``do_get`` at the table's owner asking for only the columns wanted and carrying the filter
pushed down. The owner applies that filter to what its engine scan reads, so only matching
rows cross the network.

The request travels in its one wire form (:mod:`node.engine.scan.wire`): the filter as a
Substrait expression the owner applies to what its engine scan reads, bounds as filters the
owner prunes by. The query path makes DataFusion tables of these readers
(:mod:`node.sql.remote_tables`).
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.flight as flight

from gnomon.flight.client import FlightClient
from gnomon.peer import Peer
from node.cluster.routes import Route, RouteCache
from node.engine.scan import ScanRequest, wire
from node.engine.schema import Schema
from node.security.context import on_behalf_of
from node.tables import PLANNING

log = logging.getLogger("gnomon.remote")


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


class FlightReaders:
    """The readers of other nodes' tables: owners from the route cache, schemas and rows
    from the owners' Flight endpoints (one client and one reader per owner, kept). A
    table's schema is kept with its route: asked again once the route cache fetched the
    route anew (a shard event, a refused request or its age dropped the old one). Calls
    carry the cluster secret (``peer``) and the user the request runs for, where its thread
    knows it: scans the query's executor already authorised run in DataFusion's threads, as
    the cluster."""

    def __init__(self, routes: RouteCache, me: str, peer: Peer | None = None) -> None:
        self.routes = routes
        self.me = me
        self._peer = peer or Peer()
        self._clients: dict[str, FlightClient] = {}
        self._readers: dict[str, FlightTableReader] = {}
        #: The route each table's kept schema came with.
        self._described: dict[str, Route] = {}
        self._lock = threading.Lock()

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
