"""Tables served by other nodes as DataFusion tables, read over their owners' Arrow Flight
endpoints, so one query can join or union tables of several nodes.

:class:`FlightTableReader` is the remote implementation of the table-source seam's reader
(:class:`node.tables.TableReader`). A remote table is a pyarrow dataset like
:class:`node.sql.provider.EngineDataset` over it; its scan is one ``do_get`` at the table's
owner asking for only the columns DataFusion needs and carrying the filter DataFusion pushed
down. The owner applies that filter to what its engine scan reads, so only matching rows
cross the network, and the dataset returns exactly those rows, as DataFusion, which treats a
pushed filter as exact, requires.

The filter travels as a Substrait ExtendedExpression (``pyarrow.substrait``): a standard,
protobuf-checked form that survives malformed input (Arrow's own expression serialization,
the pickle form, aborts the process on some). Substrait binds column references to positions
in a schema sent along (only the columns the filter names), so the owner evaluates it on
batches whose first columns are those, and cannot hand it to its engine for pruning, which
finds columns by name: SSTs are pruned by time range and bounds only, not by this predicate.
"""

from __future__ import annotations

import base64
import logging
import re
import threading
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.flight as flight
import pyarrow.substrait as substrait

from gnomon.errors import GnomonError, InvalidArgument
from gnomon.flight.client import FlightClient
from gnomon.flight.ticket import MAX_PREDICATE_CHARS, ScanSpec
from gnomon.peer import Peer
from node.cluster.routes import RouteCache
from node.engine.scan import referenced_columns
from node.engine.schema import Schema
from node.security.context import on_behalf_of
from node.sql import cancel
from node.sql.provider import ScanRecord, conformed
from node.tables import ScanRequest

log = logging.getLogger("gnomon.remote")

#: The name the predicate has inside its Substrait message.
_PREDICATE = "predicate"
_FIELD_PATH = re.compile(r"FieldPath\((\d+)\)")


# -- the predicate on the wire -------------------------------------------------------------------


def encode_predicate(expr: pc.Expression, schema: Schema) -> str | None:
    """``expr`` (over columns of ``schema``) as a scan request's ``predicate``, or None when
    it cannot travel (a function Substrait has no mapping for, or too long): the reader then
    applies it itself."""
    names = referenced_columns(expr, schema)
    if not names:
        return None
    bound = pa.schema([schema.arrow().field(n) for n in names])
    try:
        raw = substrait.serialize_expressions([expr], [_PREDICATE], bound)
    except (pa.ArrowException, TypeError, ValueError):
        return None
    text = base64.b64encode(bytes(raw)).decode("ascii")
    return text if len(text) <= MAX_PREDICATE_CHARS else None


@dataclass(frozen=True)
class RowPredicate:
    """A decoded predicate: ``expression`` refers to the columns of ``schema`` by position."""

    expression: pc.Expression
    schema: pa.Schema

    def read_columns(self, wanted: Sequence[str]) -> list[str]:
        """The columns a scan reads to return ``wanted`` filtered: the predicate's first, in
        its order, so its positions hold."""
        return list(dict.fromkeys([*self.schema.names, *wanted]))

    def apply(self, batch: pa.RecordBatch, wanted: Sequence[str]) -> pa.RecordBatch:
        """The rows of ``batch`` (of :meth:`read_columns`) that match, as ``wanted``."""
        return batch.filter(self.expression).select(list(wanted))


def decode_predicate(text: str, table: str, schema: Schema) -> RowPredicate:
    """The predicate a scan request of ``table`` (of ``schema``) carries; InvalidArgument
    when it is no Substrait expression over columns the table has, of their types."""
    try:
        bound = substrait.deserialize_expressions(base64.b64decode(text, validate=True))
    except (ValueError, pa.ArrowException) as e:
        raise InvalidArgument(f"scan request: predicate is no Substrait expression: {e}") from None
    exprs = list(bound.expressions.values())
    if len(exprs) != 1:
        raise InvalidArgument(
            f"scan request: predicate holds {len(exprs)} expressions, expected one"
        )
    arrow = schema.arrow()
    for f in bound.schema:
        if f.name not in arrow.names or arrow.field(f.name).type != f.type:
            raise InvalidArgument(
                f"scan request: predicate column {f.name!r} ({f.type}) is not a column of "
                f"table {table!r} of that type"
            )
    expr = exprs[0]
    if any(int(i) >= len(bound.schema) for i in _FIELD_PATH.findall(str(expr))):
        raise InvalidArgument("scan request: predicate refers to a column it does not declare")
    try:
        pa.Table.from_batches([], bound.schema).filter(expr)
    except (pa.ArrowException, TypeError) as e:
        raise InvalidArgument(f"scan request: invalid predicate {expr}: {e}") from None
    return RowPredicate(expr, bound.schema)


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
    carrying the projection, the time range, the snapshot and the predicate (when it can
    travel, else applied here on the columns it needs as well). Bounds do not travel (they
    only prune; the owner prunes by time range) and string tags arrive plain. Schemas are
    asked once per reader: make one per query."""

    def __init__(self, owner: str, client: FlightClient) -> None:
        self.owner = owner
        self.client = client
        self._schemas: dict[str, Schema] = {}

    def schema(self, table: str) -> Schema:
        known = self._schemas.get(table)
        if known is None:
            known = self._schemas[table] = Schema.from_json(self.client.describe(table)["schema"])
        return known

    def scan(self, request: ScanRequest) -> RemoteScan:
        schema = self.schema(request.table)
        wanted = list(schema.names) if request.columns is None else list(request.columns)
        filter = request.predicate
        encoded = None if filter is None else encode_predicate(filter, schema)
        local = filter if encoded is None else None
        read = (
            wanted
            if local is None
            else list(dict.fromkeys([*wanted, *referenced_columns(local, schema)]))
        )
        scan_id = uuid.uuid4().hex
        spec = ScanSpec(
            request.table,
            columns=read,
            predicate=encoded,
            time_range=request.time_range or (None, None),
            version=request.version,
            timestamp_ms=request.timestamp_ms,
            scan_id=scan_id,
        )
        batches = self.client.read(flight.FlightEndpoint(spec.to_json(), []))
        if local is not None:
            batches = (b.filter(local).select(wanted) for b in batches)
        return RemoteScan(scan_id, batches)


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
    the owners' Flight endpoints (one client per owner, kept). Calls carry the cluster
    secret (``peer``) and the user the request runs for, where its thread knows it: scans
    the query's executor already authorised run in DataFusion's threads, as the cluster."""

    def __init__(self, routes: RouteCache, me: str, peer: Peer | None = None) -> None:
        self._routes = routes
        self._me = me
        self._peer = peer or Peer()
        self._clients: dict[str, FlightClient] = {}
        self._lock = threading.Lock()

    def find(self, names: Sequence[str]) -> Mapping[str, FlightTable]:
        found: dict[str, FlightTable] = {}
        readers: dict[str, FlightTableReader] = {}
        for name, route in self._routes.lookup(names).items():
            flight_at = route.endpoints.get("flight", "")
            if not route.endpoint or route.endpoint == self._me or not flight_at:
                continue
            reader = readers.get(route.endpoint)
            if reader is None:
                reader = readers[route.endpoint] = FlightTableReader(
                    route.endpoint, self.client(flight_at)
                )
            reader.schema(name)  # a table the owner does not have fails here, not in a scan
            found[name] = FlightTable(name, reader)
        return found

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
