"""The Arrow Flight endpoint of a node: bulk reads and writes of tables as Arrow.

- ``get_flight_info(descriptor = ScanSpec JSON)``: pins the table's manifest version (flushing
  its memtables first unless the request names a version or timestamp) and describes its time
  splits: one endpoint per split, located at the table's owner (the address route answers
  name), whose ticket is a ``ScanSpec`` carrying the pinned version, the split's time range
  and a scan id ``<scan_id>/<split>`` (the request's ``scan_id``, or a fresh one).
- ``get_flight_info`` with ``lease_ms``: holds the live snapshot instead (manifest version and
  memtable views, nothing flushed; ``node/engine/leases.py``) and the tickets scan it by its
  ``pin``; with ``native``, the SSTs needing no merge (``node/engine/native.py``) that the
  reader can open are left out of the tickets and listed, with their URIs, in the plan's
  ``app_metadata`` (the hybrid read of gnomon_app.spark).
- Calls with the ``gnomon-read: follower`` header (``node/server/reads.py``) plan and scan the
  copies of shards followed here (a follower read; the leader's tables where none is).
- ``do_get(ticket = ScanSpec JSON)``: streams the engine scan of the request the ticket is the
  wire form of (``node/engine/scan/wire.py``: its filters pruning as bounds), only the rows
  matching the ticket's ``predicate`` (a Substrait expression) when it carries one; when the
  stream ends its statistics are kept under the scan id for
  ``scan_stats`` (``rows_returned``: after the predicate).
- ``do_get(ticket = QuerySpec JSON)``: the answer of a SQL query over tables the node serves
  (the share of the sub-tables it serves in a partition table's query, read as one table,
  node/sql/pushdown.py), never sent on.
- ``do_put(descriptor = PutSpec JSON)``: rows written like any other write, or staged under a
  reserved revision (invisible until it is committed), by a task attempt when it names one;
  or, with ``ingest``, one table's part
  of a line-protocol write (``node/cluster/rows_wire.py``) written whole through the node's
  ingestor, which creates the table and adds columns as needed and sends it to the table's
  owner if that is another node, unless the put was itself forwarded (``forwarded_from``).
- ``do_action``: ``describe``, ``reserve``, ``commit``, ``abort``, ``heartbeat`` (the revision
  protocol, node/engine/revisions.py), ``scan_stats`` (of one ticket, or summed over a
  planned scan's tickets: SSTs and row groups read out of the total, rows returned), so
  pushdown is observable; ``renew`` and ``release`` of a held snapshot; ``route`` (the
  table, or each sub-table of a partition table, with the Flight endpoint of the node serving
  it, "" for this one, and a partition table's key); bodies and results are JSON.

Errors are gnomon errors as Flight errors: the message is the gnomon message and
``extra_info`` is JSON ``{"error": class name, "status": code, "retryable": bool}``, from which
clients rebuild the gnomon error. Unavailable and Conflict travel as FlightUnavailableError,
the rest as FlightServerError.
"""

from __future__ import annotations

import contextvars
import json
import logging
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent import futures
from dataclasses import asdict, replace
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.flight as flight

from gnomon.error_codes import message_of
from gnomon.errors import GnomonError, InvalidArgument, NotFound, Status, TooLarge, Unavailable
from gnomon.flight.ticket import (
    CommitArgs,
    PinArgs,
    PutSpec,
    QuerySpec,
    ReserveArgs,
    ScanSpec,
    ScanStatsArgs,
    TableArgs,
    parse_action,
    read_ticket,
)
from gnomon.metrics import Registry
from gnomon.tls import ServerTls
from node.cluster import rows_wire
from node.cluster.ingest_forward import RowsWriter
from node.engine.engine import Engine
from node.engine.scan import Scan, wire
from node.engine.table import Pinned
from node.ingest.line_protocol import PRECISIONS
from node.security.connections import PeerConnections
from node.security.context import acting_as, authorize
from node.security.principal import Privilege
from node.server.auth import FLIGHT_MIDDLEWARE, FlightAuth, MiddlewareHandshake, flight_caller
from node.server.listen import bind_failed, check_free
from node.server.reads import READ_HEADER, wants_follower
from node.tables import FlightTables, local

log = logging.getLogger("gnomon.flight")

T = TypeVar("T")

#: Rows buffered from a ``do_put`` stream before they are written: larger writes are cheaper
#: per row, and a staged revision gets fewer, larger SSTs.
PUT_CHUNK_BYTES = 64 * 1024**2
#: A chunk is also written as soon as the stream moves past the last segment window it
#: holds, once it holds this much: SSTs are cut at windows anyway, so a stream in time order
#: (a Spark task's, a backfill's) gets no more files, and a put smaller than
#: ``PUT_CHUNK_BYTES`` (each task's share of a sub-table) is written while it is received
#: instead of all at its end.
PUT_WINDOW_CUT_BYTES = 8 * 1024**2
#: Scan statistics kept for ``scan_stats`` (the newest ones).
STATS_KEPT = 4096


def flight_error(e: BaseException) -> flight.FlightError:
    info = json.dumps(
        {
            "error": type(e).__name__ if isinstance(e, GnomonError) else "GnomonError",
            "status": int(e.status) if isinstance(e, GnomonError) else int(Status.INTERNAL),
            "retryable": bool(isinstance(e, GnomonError) and e.retryable),
        }
    ).encode()
    if isinstance(e, GnomonError) and e.retryable:
        return flight.FlightUnavailableError(message_of(e), info)
    return flight.FlightServerError(message_of(e), info)


def _answer(what: str, e: Exception) -> flight.FlightError:
    """The Flight error a failed request answers with: the gnomon message, never a Python
    traceback (pyarrow sends one with any exception that is not a FlightError)."""
    if not isinstance(e, GnomonError):
        log.exception("flight request failed", extra={"rpc": what})
    return flight_error(e)


class _FollowerRead(flight.ServerMiddleware):  # type: ignore[misc]
    """Marks a call asking for a follower read."""


class ReadPreference(flight.ServerMiddlewareFactory):  # type: ignore[misc]
    """Notes the calls whose ``gnomon-read`` header asks for a follower read."""

    def start_call(self, info: flight.CallInfo, headers: dict[str, list[Any]]) -> Any:
        value = (headers.get(READ_HEADER) or [None])[0]
        try:
            follower = wants_follower(value.decode() if isinstance(value, bytes) else value)
        except InvalidArgument as e:
            raise flight_error(e) from None
        return _FollowerRead() if follower else None


#: The key of :class:`ReadPreference` among the server's middleware.
READ_MIDDLEWARE = "read"


#: What an action on a table needs (those not named change the table's revisions: write).
_ACTION_NEEDS = {"describe": Privilege.READ, "route": Privilege.READ}


def _received(table: str, reader: flight.MetadataRecordBatchReader) -> Iterator[pa.RecordBatch]:
    """The record batches of a ``do_put`` stream, each validated whole before anything reads
    it: Arrow decodes a batch's framing (truncated bodies, lengths past the body, corrupt
    compressed buffers) but not its contents (offsets past their data, dictionary indexes out
    of range, column names that are no UTF-8), and either kind of malformed stream is the
    client's error, not the server's."""
    chunks = iter(reader)
    while True:
        try:
            chunk = next(chunks)
            if chunk.data is not None:
                chunk.data.validate(full=True)
                chunk.data.schema.names  # noqa: B018 (names that are no UTF-8 raise here)
        except StopIteration:
            return
        except (pa.ArrowException, OSError, UnicodeDecodeError) as e:  # IO errors are OSError
            raise InvalidArgument(
                f"do_put to table {table!r}: not a valid Arrow IPC stream: {e}"
            ) from None
        if chunk.data is not None:
            yield chunk.data


def _windows(batch: pa.RecordBatch, ts: str, seg: int) -> tuple[int, int] | None:
    """The first and last segment windows (``seg`` ms long) of ``batch``'s rows, or None
    when its timestamp column ``ts`` is missing, holds no timestamps or only nulls (the write
    converts or rejects it)."""
    i = batch.schema.get_field_index(ts)
    if i < 0 or not pa.types.is_timestamp(batch.schema.field(i).type):
        return None
    lo, hi = (s.as_py() for s in pc.min_max(batch.column(i).cast(pa.int64())).values())
    if lo is None:
        return None
    per, div = PRECISIONS[batch.schema.field(i).type.unit]
    return lo * per // div // seg, hi * per // div // seg


def _split(batch: pa.RecordBatch, ts: str, end_ms: int) -> tuple[pa.RecordBatch, pa.RecordBatch]:
    """``batch``'s rows before ``end_ms``, and the others (with those of no timestamp, which
    the write rejects)."""
    column = batch.column(ts)
    per, div = PRECISIONS[column.type.unit]
    end = pa.scalar(-(-end_ms * div // per), pa.int64())
    less: pa.BooleanArray = pc.less(column.cast(pa.int64()), end)
    before: pa.BooleanArray = less.fill_null(False)  # type: ignore[assignment]
    return batch.filter(before), batch.filter(pc.invert(before))


# -- the server ----------------------------------------------------------------------------------


class FlightService(flight.FlightServerBase):  # type: ignore[misc]
    """Serves this node's ``tables`` (an engine is taken as :class:`~node.tables.LocalTables`);
    serving starts on construction (``port`` 0 picks a free one, see
    :attr:`port`). ``advertise_host`` is the host the route answers name for this node's
    tables: endpoints are located there; without it (like route answers without an advertised
    address) they carry no location, which tells clients to redeem tickets where they asked."""

    def __init__(
        self,
        tables: FlightTables | Engine,
        *,
        bind: str = "127.0.0.1",
        port: int = 0,
        advertise_host: str | None = None,
        metrics: Registry | None = None,
        port_setting: str = "flight_port",
        ingestor: RowsWriter | None = None,
        query: Callable[[str, Mapping[str, Sequence[str]]], pa.Table] | None = None,
        route: Callable[[str], dict[str, Any]] | None = None,
        auth: FlightAuth | None = None,
        tls: ServerTls | None = None,
        follower_tables: FlightTables | None = None,
        connections: PeerConnections | None = None,
    ) -> None:
        check_free("Arrow Flight", bind, port, port_setting)
        scheme = "grpc+tcp" if tls is None else "grpc+tls"
        try:
            super().__init__(
                f"{scheme}://{bind}:{port}",
                middleware={
                    READ_MIDDLEWARE: ReadPreference(),
                    **({} if auth is None else {FLIGHT_MIDDLEWARE: auth}),
                },
                auth_handler=None if auth is None else MiddlewareHandshake(),
                **({} if tls is None else tls.flight_options()),
            )
        except pa.ArrowException as e:  # "Server did not start properly", no reason given
            raise bind_failed("Arrow Flight", bind, port, port_setting, str(e)) from None
        self.tables: FlightTables = local(tables)
        #: What follower reads plan and scan (None: the leaders' tables, as any read).
        self.follower_tables = follower_tables
        self.owners: list[str | flight.Location] = (
            []
            if advertise_host is None
            else [
                (flight.Location.for_grpc_tcp if tls is None else flight.Location.for_grpc_tls)(
                    advertise_host, self.port
                )
            ]
        )
        self.metrics = metrics
        #: Writes ingest puts; None: they are refused.
        self.ingestor = ingestor
        #: Answers query tickets over tables served here; None: they are refused.
        self.query = query
        #: Where a table (or each sub-table of a partition table) is served; None: here.
        self.route = route
        #: New connections admitted at a rate per address (None: any number).
        self.connections = connections
        self._stats: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._stats_lock = threading.Lock()

    def _guarded(self, what: str, fn: Callable[[], T], context: flight.ServerCallContext) -> T:
        """``fn`` run as the call's caller (see node/server/auth.py), its errors as Flight's;
        refused (Unavailable) first if its connection is over its address's rate."""
        try:
            refusal = None if self.connections is None else self.connections.refusal(context.peer())
            if refusal is not None:
                raise Unavailable(refusal)
            with acting_as(flight_caller(context)):
                return fn()
        except flight.FlightError:
            raise
        except Exception as e:
            raise _answer(what, e) from None

    # -- reads -----------------------------------------------------------------------------------

    def get_schema(  # type: ignore[override]  # the stubs name pa.Schema; pyarrow wants this
        self, context: flight.ServerCallContext, descriptor: flight.FlightDescriptor
    ) -> flight.SchemaResult:
        # pyarrow sends any error of get_schema with a Python traceback (its callback, unlike
        # the others, does not take FlightErrors apart); clients plan with get_flight_info.
        def run() -> flight.SchemaResult:
            spec = ScanSpec.from_json(descriptor.command or b"")
            authorize(Privilege.READ, [spec.table])
            wire.decode(spec, self.tables.describe(spec.table).schema)  # checks the request
            return flight.SchemaResult(self._schema(spec))

        return self._guarded("get_schema", run, context)

    def _schema(self, spec: ScanSpec, tables: FlightTables | None = None) -> pa.Schema:
        schema = (tables or self.tables).describe(spec.table).schema.arrow()
        if spec.columns is None:
            return schema
        for c in spec.columns:
            if c not in schema.names:
                raise InvalidArgument(f"table {spec.table!r} has no column {c!r}")
        return pa.schema([schema.field(c) for c in spec.columns])

    def _reading(self, context: flight.ServerCallContext) -> FlightTables:
        """The tables a read call uses: the followed copies for a follower read."""
        if self.follower_tables is not None and context.get_middleware(READ_MIDDLEWARE):
            return self.follower_tables
        return self.tables

    def get_flight_info(
        self, context: flight.ServerCallContext, descriptor: flight.FlightDescriptor
    ) -> flight.FlightInfo:
        return self._guarded(
            "get_flight_info",
            lambda: self._flight_info(descriptor, self._reading(context)),
            context,
        )

    def _flight_info(
        self, descriptor: flight.FlightDescriptor, tables: FlightTables
    ) -> flight.FlightInfo:
        spec = ScanSpec.from_json(descriptor.command or b"")
        authorize(Privilege.READ, [spec.table])
        info = tables.describe(spec.table)
        schema = self._schema(spec, tables)
        lo, hi = wire.decode(spec, info.schema).request.time_range or (None, None)
        held = spec.lease_ms is not None
        if spec.version is None and spec.timestamp_ms is None and not held:
            # A pinned version holds flushed data only: flush so it holds every write so far.
            tables.flush(spec.table)
        pinned = tables.pin(spec.table, version=spec.version, timestamp_ms=spec.timestamp_ms)
        version = pinned.version
        if not held:
            pinned = replace(pinned, views=())
        meta: dict[str, Any] = {"version": version.version}
        if spec.lease_ms is not None:
            native = self._native(spec, pinned, (lo, hi), tables)
            meta.update(native)
            native_paths = {f["path"] for f in native["native"]}
            pinned = replace(
                pinned,
                version=replace(
                    version, files=tuple(f for f in version.files if f.path not in native_paths)
                ),
            )
            meta["pin"] = tables.leases.hold(info.table_id, pinned, spec.lease_ms)
            meta["lease_ms"] = spec.lease_ms
        data = [f for f in pinned.version.files if f.is_data]
        endpoints = []
        splits = tables.split(
            spec.table,
            pinned,
            (lo, hi),
            max_splits=max(1, spec.max_splits),
            min_split_rows=spec.min_split_rows,
        )
        if held and not data and not any(v.batches for v in pinned.views):
            splits = []  # every row is read natively: a task over nothing is not worth one
        scan_id = spec.scan_id or uuid.uuid4().hex
        for i, split in enumerate(splits):
            ticket = replace(
                spec,
                time_range=split,
                version=None if held else version.version,
                timestamp_ms=None,
                scan_id=f"{scan_id}/{i}",
                lease_ms=None,
                native=[],
                pin=meta.get("pin"),
            )
            endpoints.append(flight.FlightEndpoint(ticket.to_json(), self.owners))
        rows = sum(f.rows for f in data)
        size = sum(f.size for f in data)
        return flight.FlightInfo(
            schema, descriptor, endpoints, rows, size, app_metadata=json.dumps(meta).encode()
        )

    def _native(
        self,
        spec: ScanSpec,
        pinned: Pinned,
        time_range: tuple[int | None, int | None],
        tables: FlightTables,
    ) -> dict[str, Any]:
        """The plan's native part: the SSTs needing no merge whose URI scheme the reader
        takes, the scheme of the store (what the reader would need to take them all) and
        the TTL floor the reader applies to them."""
        info = tables.describe(spec.table)
        files = tables.native_files(spec.table, pinned, time_range) if spec.native else []
        native = []
        store = ""
        for f in files:
            uri = tables.object_uri(f.path)
            if uri is None:
                break
            store = uri.split(":", 1)[0]
            if store in spec.native:
                native.append({"path": f.path, "uri": uri, "rows": f.rows, "size": f.size})
        floor = None
        if info.options.enable_ttl:
            floor = int(time.time() * 1000) - info.options.ttl_ms
        return {"native": native, "store": store, "ttl_floor_ms": floor}

    def do_get(
        self, context: flight.ServerCallContext, ticket: flight.Ticket
    ) -> flight.FlightDataStream:
        def run() -> flight.FlightDataStream:
            spec = read_ticket(ticket.ticket)
            if isinstance(spec, QuerySpec):
                if self.query is None:
                    raise InvalidArgument("this Flight endpoint answers no queries")
                return flight.RecordBatchStream(self.query(spec.query, spec.unions))
            authorize(Privilege.READ, [spec.table])
            tables = self._reading(context)
            info = tables.describe(spec.table)
            schema = self._schema(spec, tables)
            pinned = None if spec.pin is None else tables.leases.get(spec.pin, info.table_id)
            received = wire.decode(spec, info.schema, pinned=pinned)
            # The engine's own scan (a local reader's): its statistics answer scan_stats.
            scan = tables.scan(received.request)
            batches = received.answer(scan)
            return flight.GeneratorStream(schema, self._stream(spec, scan, batches, schema))

        return self._guarded("do_get", run, context)

    def _stream(
        self,
        spec: ScanSpec,
        scan: Scan,
        batches: Iterator[pa.RecordBatch],
        schema: pa.Schema,
    ) -> Iterator[pa.RecordBatch]:
        """``batches`` (of ``scan``, filtered by the request's predicate) as ``schema``."""
        rows = 0
        try:
            for batch in batches:
                rows += batch.num_rows
                yield batch.cast(schema) if batch.schema != schema else batch
        except Exception as e:
            raise _answer("do_get", e) from None
        if spec.scan_id:
            with self._stats_lock:
                self._stats[spec.scan_id] = {**asdict(scan.stats), "rows_returned": rows}
                while len(self._stats) > STATS_KEPT:
                    self._stats.popitem(last=False)

    # -- writes ----------------------------------------------------------------------------------

    def do_put(
        self,
        context: flight.ServerCallContext,
        descriptor: flight.FlightDescriptor,
        reader: flight.MetadataRecordBatchReader,
        writer: flight.FlightMetadataWriter,
    ) -> None:
        def run() -> None:
            spec = PutSpec.from_json(descriptor.command or b"")
            put = self._ingest if spec.ingest else self._put_chunks
            written = put(spec, reader)
            if self.metrics is not None:
                self.metrics.rows_written.inc("flight", amount=written)
            writer.write(pa.py_buffer(json.dumps({"rows": written}).encode()))

        self._guarded("do_put", run, context)

    def _put_chunks(self, spec: PutSpec, reader: flight.MetadataRecordBatchReader) -> int:
        authorize(Privilege.WRITE, [spec.table])
        info = self.tables.describe(spec.table)  # NotFound before reading anything
        ts, seg = info.schema.timestamp_key, info.options.segment_duration_ms
        written = 0
        pending: list[pa.RecordBatch] = []
        size = 0
        pending_window: int | None = None  # the last segment window of the pending rows
        # Each chunk is written (sorted, encoded and stored, when staged) while the next one is
        # received, one at a time and in order: the sender streams on instead of stalling for
        # every chunk's write, and waits at the end for the last one's only.
        with futures.ThreadPoolExecutor(max_workers=1) as writer:
            last: futures.Future[int] | None = None

            def write_pending() -> None:
                nonlocal written, last, pending, size, pending_window
                written += 0 if last is None else last.result()
                last = writer.submit(contextvars.copy_context().run, self._put, spec, pending)
                pending, size, pending_window = [], 0, None

            for batch in _received(spec.table, reader):
                if batch.num_rows == 0:
                    continue
                span = _windows(batch, ts, seg)
                if (
                    size >= PUT_WINDOW_CUT_BYTES
                    and span is not None
                    and pending_window is not None
                    and span[0] >= pending_window
                    and span[1] > pending_window
                ):
                    if span[0] == pending_window:
                        # The batch straddling two windows of a stream in time order: its
                        # rows of the last pending window complete the chunk.
                        head, batch = _split(batch, ts, (pending_window + 1) * seg)
                        pending.append(head)
                        span = (pending_window + 1, span[1])
                    write_pending()
                pending.append(batch)
                size += batch.nbytes
                if span is not None:
                    pending_window = (
                        span[1] if pending_window is None else max(span[1], pending_window)
                    )
                if size >= PUT_CHUNK_BYTES:
                    write_pending()
            written += 0 if last is None else last.result()
        if pending:
            written += self._put(spec, pending)
        return written

    def _ingest(self, spec: PutSpec, reader: flight.MetadataRecordBatchReader) -> int:
        """An ingest put, written as one write (all or nothing, like the request it is part
        of), so it is read whole: at most what one write of the engine may hold."""
        if self.ingestor is None:
            raise InvalidArgument("this Flight endpoint takes no ingest puts")
        limit = self.tables.max_write_bytes
        batches: list[pa.RecordBatch] = []
        size = 0
        for batch in _received(spec.table, reader):
            size += batch.nbytes
            if size > limit:
                raise TooLarge(
                    f"ingest put to table {spec.table!r} holds more than the {limit} bytes one "
                    "write may hold"
                )
            batches.append(batch)
        rows = rows_wire.decode(spec.table, pa.Table.from_batches(batches, schema=reader.schema))
        return self.ingestor.write_all([rows], forwarded=spec.forwarded_from is not None)

    def _put(self, spec: PutSpec, batches: list[pa.RecordBatch]) -> int:
        data = pa.Table.from_batches(batches)
        if spec.revision is None:
            return self.tables.write(spec.table, data)
        return self.tables.revisions.stage(spec.table, spec.revision, data, attempt=spec.attempt)

    # -- actions ---------------------------------------------------------------------------------

    def list_actions(  # type: ignore[override]
        self, context: flight.ServerCallContext
    ) -> list[flight.ActionType]:
        return [
            flight.ActionType(name, text)
            for name, text in (
                ("describe", "{table} -> the table's columns and keys"),
                ("reserve", "{table, mode?, time_range?, lease_ms?, owner?} -> a new revision"),
                (
                    "commit",
                    "{table, revision, wait_s?, attempts?} -> the revision, pending or latest "
                    "(publishing only what the attempts named staged)",
                ),
                ("abort", "{table, revision} -> cancel it and delete what it staged"),
                ("heartbeat", "{table, revision} -> extend its lease"),
                ("scan_stats", "{scan_id} -> what the finished do_get of that ticket touched"),
                ("renew", "{pin} -> extend the lease of a held snapshot"),
                ("release", "{pin} -> let go of a held snapshot"),
                ("route", "{table} -> {table, parts: [{table, flight}], key}: where it is served"),
            )
        ]

    def do_action(self, context: flight.ServerCallContext, action: flight.Action) -> list[bytes]:
        def run() -> list[bytes]:
            body = action.body.to_pybytes() if action.body is not None else b""
            args = parse_action(action.type, body)
            table = getattr(args, "table", None)
            if table is not None:
                authorize(_ACTION_NEEDS.get(action.type, Privilege.WRITE), [table])
            result = self._action(action.type, args)
            return [json.dumps(result).encode()]

        return self._guarded(action.type, run, context)

    def _scan_stats(self, scan_id: str) -> dict[str, Any]:
        """The statistics of the finished ticket ``scan_id``, or summed over the finished
        tickets of the planned scan ``scan_id`` (tickets ``<scan_id>/<split>``)."""
        with self._stats_lock:
            found = [
                st
                for key, st in self._stats.items()
                if key == scan_id or key.startswith(f"{scan_id}/")
            ]
        if not found:
            raise NotFound(f"no finished scan with id {scan_id!r}")
        total = {k: sum(st[k] for st in found) for k in found[0]}
        return {**total, "tickets": len(found)}

    def _action(self, kind: str, args: Any) -> Any:
        """Run action ``kind`` with its checked body (``ticket.parse_action``)."""
        revisions = self.tables.revisions
        if isinstance(args, ScanStatsArgs):
            return self._scan_stats(args.scan_id)
        if isinstance(args, PinArgs):
            if kind == "renew":
                return {"pin": args.pin, "version": self.tables.leases.renew(args.pin)}
            return {"pin": args.pin, "released": self.tables.leases.release(args.pin)}
        if kind == "route":
            if self.route is None:
                self.tables.describe(args.table)
                return {"table": args.table, "parts": [{"table": args.table, "flight": ""}]}
            return self.route(args.table)
        if isinstance(args, TableArgs):
            info = self.tables.describe(args.table)
            return {"table": args.table, "table_id": info.table_id, "schema": info.schema.to_json()}
        if isinstance(args, ReserveArgs):
            return revisions.reserve(
                args.table,
                owner=args.owner,
                mode=args.mode,
                time_range=args.time_range,
                lease_ms=args.lease_ms,
            ).to_json()
        if isinstance(args, CommitArgs):
            return revisions.commit(
                args.table, args.revision, attempts=args.attempts, wait_s=args.wait_s
            ).to_json()
        if kind == "abort":
            revisions.abort(args.table, args.revision)
            return {"table": args.table, "revision": args.revision, "state": "cancelled"}
        return revisions.heartbeat(args.table, args.revision).to_json()
