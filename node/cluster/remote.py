"""Tables served by other nodes as DataFusion tables, read over their owners' Arrow Flight
endpoints, so one query can join or union tables of several nodes.

A remote table is a pyarrow dataset like :class:`node.sql.provider.EngineDataset`; its scan
is one ``do_get`` at the table's owner asking for only the columns DataFusion needs and
carrying the filter DataFusion pushed down. The owner applies that filter to what its engine
scan reads, so only matching rows cross the network, and the dataset returns exactly those
rows, as DataFusion, which treats a pushed filter as exact, requires.

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
from gnomon.spark.client import FlightClient
from gnomon.spark.ticket import MAX_PREDICATE_CHARS, ScanSpec
from node.cluster.routes import RouteCache
from node.engine.scan import referenced_columns
from node.engine.schema import Schema
from node.sql import cancel
from node.sql.provider import ScanRecord, conformed

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
        encoded = None if filter is None else encode_predicate(filter, d.table_schema)
        # A filter that cannot travel is applied here, on the columns it needs as well.
        local = filter is not None and encoded is None
        read = (
            list(dict.fromkeys([*wanted, *referenced_columns(filter, d.table_schema)]))
            if local and filter is not None
            else wanted
        )
        scan_id = uuid.uuid4().hex
        spec = ScanSpec(d.table, columns=read, predicate=encoded, scan_id=scan_id)
        record = ScanRecord(d.table, columns, lambda: filter, owner=d.owner, scan_id=scan_id)
        d.scans.append(record)
        out_schema = pa.schema([d.schema.field(c) for c in wanted])
        batches = d.client.read(flight.FlightEndpoint(spec.to_json(), []))
        if local:
            batches = (_filtered(b, filter, wanted) for b in batches)
        counted = _counted(batches, record)
        return ds.Scanner.from_batches(
            conformed(counted, out_schema, d.errors, d.token), schema=out_schema
        )


def _filtered(
    batch: pa.RecordBatch, filter: pc.Expression | None, wanted: list[str]
) -> pa.RecordBatch:
    return (batch if filter is None else batch.filter(filter)).select(wanted)


def _counted(batches: Iterator[pa.RecordBatch], record: ScanRecord) -> Iterator[pa.RecordBatch]:
    for b in batches:
        record.rows_received += b.num_rows
        yield b


class RemoteDataset(ds.InMemoryDataset):  # type: ignore[misc]
    """Table ``table`` of ``table_schema`` served by ``owner`` (its gRPC endpoint), read
    through ``client`` (its Flight endpoint); string tags arrive plain."""

    def __init__(
        self,
        table: str,
        table_schema: Schema,
        *,
        owner: str,
        client: FlightClient,
        scans: list[ScanRecord],
        errors: list[GnomonError],
    ) -> None:
        self.table = table
        self.table_schema = table_schema
        self.owner = owner
        self.client = client
        self.scans = scans
        self.errors = errors
        #: The query's cancellation token, taken in the request's thread (see EngineDataset).
        self.token = cancel.current()
        super().__init__(pa.Table.from_batches([], schema=table_schema.arrow()))  # type: ignore[call-arg]

    def get_fragments(self, filter: pc.Expression | None = None) -> list[RemoteFragment]:
        return [RemoteFragment(self)]


@dataclass(frozen=True)
class FlightTable:
    """A table another node serves, as found for one query."""

    name: str
    schema: Schema
    #: The owner's gRPC endpoint (what names a node) and its Flight client.
    owner: str
    client: FlightClient

    def dataset(self, scans: list[ScanRecord], errors: list[GnomonError]) -> RemoteDataset:
        return RemoteDataset(
            self.name, self.schema, owner=self.owner, client=self.client, scans=scans, errors=errors
        )


class FlightRemoteTables:
    """A cluster node's remote tables: owners from the route cache, schemas and rows from
    the owners' Flight endpoints (one client per owner, kept)."""

    def __init__(self, routes: RouteCache, me: str) -> None:
        self._routes = routes
        self._me = me
        self._clients: dict[str, FlightClient] = {}
        self._lock = threading.Lock()

    def find(self, names: Sequence[str]) -> Mapping[str, FlightTable]:
        found: dict[str, FlightTable] = {}
        for name, route in self._routes.lookup(names).items():
            flight_at = route.endpoints.get("flight", "")
            if not route.endpoint or route.endpoint == self._me or not flight_at:
                continue
            client = self._client(flight_at)
            schema = Schema.from_json(client.describe(name)["schema"])
            found[name] = FlightTable(name, schema, route.endpoint, client)
        return found

    def _client(self, endpoint: str) -> FlightClient:
        with self._lock:
            client = self._clients.get(endpoint)
            if client is None:
                client = self._clients[endpoint] = FlightClient(endpoint)
            return client

    def close(self) -> None:
        with self._lock:
            clients, self._clients = list(self._clients.values()), {}
        for c in clients:
            c.close()
