"""Writes of decoded rows (line protocol over HTTP, ingest puts over Flight) that reach the
owners of their tables, whichever node took them.

:class:`ForwardingIngestor` has the ingestor's ``write_all``. It writes here first; only
when the ingestor answers "not owner" (nothing was written: a table is served elsewhere,
or one it just created was placed on another node) is the request split by owner. Tables
served here or unknown stay here; each other table's rows go to its owner's Arrow Flight
endpoint as an ingest ``do_put`` (``node/cluster/rows_wire.py``), in parallel, and the
owner's own ingestor creates the table or adds columns as they need; a part meeting "not
owner" (a table moving) is sent again alone where the table is now, and a part stored is
never sent again (``node.cluster.router.where_served``). A put is marked
``forwarded_from`` this node, and a forwarded put is written by its receiver or refused,
never sent on: a route stale on two nodes costs an error naming the owner, not a loop. With
a cluster secret a put carries it and the user whose write it is (``gnomon/peer.py``): the
owner authorises the rows as that user's own write.

A request is acknowledged only when every part was. One refused as a whole by the checks
(InvalidArgument) wrote nothing anywhere; when some parts were stored and others not, the
error (:class:`PartlyWritten`) names them and is no InvalidArgument, so a caller that
retries refused writes one at a time does not write the stored parts twice. Within one
owner each table is its own put: a table the owner refuses does not hold back the others.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from concurrent import futures
from dataclasses import dataclass
from typing import Protocol

import pyarrow as pa
import pyarrow.flight as flight

from gnomon.error_codes import message_of
from gnomon.errors import (
    GnomonError,
    InvalidArgument,
    MovedPartway,
    NotOwner,
    Status,
    Unavailable,
)
from gnomon.flight.client import call_options, gnomon_error
from gnomon.flight.ticket import PutSpec
from gnomon.peer import Peer
from node.cluster import rows_wire
from node.cluster.router import Router, resolved, where_served
from node.cluster.routes import Route
from node.ingest.rows import TableRows
from node.ingest.writer import Ingestor
from node.security.context import on_behalf_of

#: Longest one put to an owner may take.
PUT_TIMEOUT_S = 30.0
#: Puts to owners in flight at once, over all requests.
MAX_PUTS = 16
_HERE = "this node"


class RowsWriter(Protocol):
    def write_all(self, tables: Sequence[TableRows], *, forwarded: bool = False) -> int:
        """Write every table's rows; the rows written. ``forwarded``: another node sent
        them, so they are written here or refused, never sent on."""


class PartlyWritten(GnomonError):
    """Some parts of a write were stored and others not. Its status is the failures': 400
    when every one was a refusal of the rows themselves, else 503."""

    def __init__(self, message: str, *, refused: bool) -> None:
        super().__init__(message, retryable=not refused)
        self.status = Status.INVALID_ARGUMENT if refused else Status.UNAVAILABLE


class Owners:
    """Ingest puts to other nodes' Flight endpoints: one connection per endpoint, kept, and
    one pool of threads sending them."""

    def __init__(
        self, me: str, *, peer: Peer | None = None, timeout_s: float = PUT_TIMEOUT_S
    ) -> None:
        self.me = me
        self.peer = peer or Peer()
        self._timeout_s = timeout_s
        self._clients: dict[str, flight.FlightClient] = {}
        self._lock = threading.Lock()
        self._pool = futures.ThreadPoolExecutor(MAX_PUTS, thread_name_prefix="gnomon-ingest-put")

    def submit(self, fn: Callable[[], int]) -> futures.Future[int]:
        return self._pool.submit(fn)

    def put(self, endpoint: str, table: str, data: pa.Table, user: str | None = None) -> int:
        """Send ``data`` (:func:`rows_wire.encode`) to ``table`` at the Flight ``endpoint``
        of its owner, as ``user``'s write; the rows the owner wrote."""
        spec = PutSpec(table=table, ingest=True, forwarded_from=self.me)
        descriptor = flight.FlightDescriptor.for_command(spec.to_json())
        client = self._client(endpoint)
        options = call_options(self._timeout_s, self.peer.flight_headers(user))
        try:
            writer, reader = client.do_put(descriptor, data.schema, options)
            with writer:
                writer.write_table(data)
                writer.done_writing()
                # A FlightMetadataReader (the stubs name the wrong class).
                ack = reader.read()  # type: ignore[attr-defined]
        except flight.FlightError as e:
            error = gnomon_error(e)
            if isinstance(error, Unavailable) and not isinstance(error, NotOwner):
                self._drop(endpoint, client)
            raise error from None
        except (pa.ArrowException, OSError) as e:
            self._drop(endpoint, client)
            raise Unavailable(f"flight: {e}") from None
        if ack is None:
            raise Unavailable("the put ended without an answer: its rows may or may not be stored")
        return int(json.loads(ack.to_pybytes())["rows"])

    def _client(self, endpoint: str) -> flight.FlightClient:
        with self._lock:
            client = self._clients.get(endpoint)
            if client is None:
                client = self._clients[endpoint] = flight.connect(
                    self.peer.flight_location(endpoint), **self.peer.flight_options()
                )
            return client

    def _drop(self, endpoint: str, client: flight.FlightClient) -> None:
        # A broken connection is made again on the next put rather than reused.
        with self._lock:
            if self._clients.get(endpoint) is client:
                del self._clients[endpoint]
        client.close()

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        with self._lock:
            clients, self._clients = list(self._clients.values()), {}
        for c in clients:
            c.close()


@dataclass
class SentPart:
    """One part of a split request: where it goes and the tables it holds."""

    where: str
    tables: list[str]
    future: futures.Future[int]


class ForwardingIngestor:
    """``ingestor``, with the rows of tables served elsewhere sent to their owners through
    ``owners`` (None: nowhere to send them, as on a standalone server; "not owner" is then
    the answer)."""

    def __init__(self, ingestor: Ingestor, router: Router, owners: Owners | None) -> None:
        self.ingestor = ingestor
        self.router = router
        self.owners = owners

    def write_all(self, tables: Sequence[TableRows], *, forwarded: bool = False) -> int:
        owners = self.owners
        if forwarded or owners is None:
            return self.ingestor.write_all(tables)
        try:
            return self.ingestor.write_all(tables)
        # No route sent the request here, so none is forgotten: split by the routes known.
        except MovedPartway as e:
            rest = [t for t in tables if t.table not in e.written]
            stored = [SentPart(_HERE, sorted(e.written), resolved(e.rows))]
        except NotOwner:
            rest, stored = list(tables), []
        return self._split(owners, rest, stored)

    def _split(self, owners: Owners, tables: list[TableRows], stored: list[SentPart]) -> int:
        """Write the tables served here, send each other one to its owner, at once; a part
        meeting "not owner" is placed and sent again alone (``where_served``). ``stored``:
        the parts written already."""
        # Every remote part is converted before anything is written: rows that do not fit
        # their types refuse the whole request.
        first = [self.router.remote_routes([t.table for t in tables])]
        encoded = {id(t): rows_wire.encode(t) for t in tables if t.table in first[0]}

        def place(part: Sequence[TableRows]) -> list[list[_Placed]]:
            routes = first.pop() if first else self.router.remote_routes([t.table for t in part])
            local = [_Placed(None, t) for t in part if t.table not in routes]
            remote = [[_Placed(routes[t.table], t)] for t in part if t.table in routes]
            return ([local] if local else []) + remote

        def run(group: list[_Placed]) -> int:
            route = group[0].route
            if route is None:
                return self.ingestor.write_all([p.rows for p in group])
            rows = group[0].rows
            # Converted up front when first placed remotely, else now (it moved here since).
            data = encoded.get(id(rows))
            if data is None:
                data = rows_wire.encode(rows)
            return self._sender(owners, route, rows.table, data)()

        running = where_served(
            tables,
            place,
            run,
            item_of=lambda p: p.rows,
            name_of=lambda p: p.rows.table,
            moved=self.router.owner_moved,
            submit=owners.submit,
            partway=lambda e: e.rows,
        )
        return outcome(
            stored + [SentPart(g[0].where, [p.rows.table for p in g], f) for g, f in running]
        )

    def _sender(
        self, owners: Owners, route: Route, table: str, data: pa.Table
    ) -> Callable[[], int]:
        # Sent from a pool thread, which does not see the request's caller.
        user = on_behalf_of()

        def send() -> int:
            endpoint = route.endpoints.get("flight", "")
            try:
                if not endpoint:
                    raise Unavailable(f"the owner of table {table!r} has no Arrow Flight endpoint")
                return owners.put(endpoint, table, data, user)
            except GnomonError as e:
                e.message = f"{e.message} (at {route.endpoint})"
                e.args = (e.message,)
                raise

        return send


@dataclass(frozen=True)
class _Placed:
    """One table's rows of a write and the route to its owner (None: served here)."""

    route: Route | None
    rows: TableRows

    @property
    def where(self) -> str:
        return _HERE if self.route is None else self.route.endpoint


def outcome(parts: list[SentPart]) -> int:
    """The rows the parts wrote, or an error naming every part that failed, and whether
    others were stored."""
    written = 0
    stored: list[str] = []
    failed: list[tuple[str, Exception]] = []
    for part in parts:
        try:
            written += part.future.result()
            stored.extend(part.tables)
        except Exception as e:
            failed.append((part.where, e))
    if not failed:
        return written
    refused = all(isinstance(e, InvalidArgument) for _, e in failed)
    if stored:
        raise PartlyWritten(
            f"the write was stored in part: the rows of {', '.join(map(repr, stored))} were "
            f"written, the others not: {_failures(failed)}",
            refused=refused,
        )
    if len(failed) == 1:
        raise failed[0][1]
    if refused:
        raise InvalidArgument(_failures(failed))
    statuses = {e.status if isinstance(e, GnomonError) else Status.INTERNAL for _, e in failed}
    if len(statuses) == 1 and (status := statuses.pop()) != Status.UNAVAILABLE:
        raise PartsFailed(status, _failures(failed))
    raise Unavailable(_failures(failed))


class PartsFailed(GnomonError):
    """Several parts of a request failed alike (all refused the caller, say) and none was
    stored: reported with the status they share."""

    def __init__(self, status: Status, message: str) -> None:
        super().__init__(message)
        self.status = status


def _failures(failed: list[tuple[str, Exception]]) -> str:
    return "; ".join(f"{where}: {message_of(e)}" for where, e in failed)
