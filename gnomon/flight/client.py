"""A small client of a node's Arrow Flight endpoint (``node/server/flight.py``): plan and read
scans, write rows, and run the revision protocol. Flight errors carrying a gnomon error
(``extra_info``) are raised as that gnomon error again."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.flight as flight

from gnomon import errors
from gnomon.flight.ticket import PutSpec, QuerySpec, ScanSpec


def _location(endpoint: str) -> str:
    return endpoint if "://" in endpoint else f"grpc+tcp://{endpoint}"


def gnomon_error(e: flight.FlightError) -> errors.GnomonError:
    """The gnomon error a Flight error carries (Unavailable if it carries none)."""
    try:
        info = json.loads(e.extra_info or b"{}")
    except ValueError:
        info = {}
    cls = getattr(errors, str(info.get("error")), None)
    # Flight appends ". Detail: <grpc status>" to the server's message.
    message = str(e).split(". Detail: ")[0]
    if isinstance(cls, type) and issubclass(cls, errors.GnomonError):
        err = cls(message)
        err.retryable = bool(info.get("retryable", err.retryable))
        return err
    return errors.Unavailable(f"flight: {message}")


Headers = Callable[[], list[tuple[bytes, bytes]]]


def call_options(
    timeout_s: float, headers: list[tuple[bytes, bytes]] | None = None
) -> flight.FlightCallOptions:
    # pyarrow takes the headers as bytes (its stubs say str).
    return flight.FlightCallOptions(timeout=timeout_s, headers=headers)  # type: ignore[arg-type]


class FlightClient:
    """Connected to the endpoint (``host:port`` or a Flight URI) it was given; tickets whose
    endpoint names other locations are redeemed there. ``headers``: what each call sends
    (asked per call, so they may name the caller of the moment); ``connect``: keyword
    arguments of ``pyarrow.flight.connect`` (TLS roots)."""

    def __init__(
        self,
        endpoint: str,
        *,
        timeout_s: float = 600.0,
        headers: Headers | None = None,
        connect: dict[str, Any] | None = None,
    ) -> None:
        self.location = _location(endpoint)
        self._connect = connect or {}
        self._client = flight.connect(self.location, **self._connect)
        self._timeout_s = timeout_s
        self._headers = headers
        self._others: dict[str, flight.FlightClient] = {}

    @property
    def _options(self) -> flight.FlightCallOptions:
        return call_options(self._timeout_s, None if self._headers is None else self._headers())

    def close(self) -> None:
        for c in (self._client, *self._others.values()):
            c.close()

    def __enter__(self) -> FlightClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _at(self, locations: Iterable[flight.Location]) -> flight.FlightClient:
        uris = [
            loc.uri.decode() if isinstance(loc.uri, bytes) else str(loc.uri) for loc in locations
        ]
        if not uris or self.location in uris:
            return self._client
        uri = uris[0]
        if uri not in self._others:
            self._others[uri] = flight.connect(uri, **self._connect)
        return self._others[uri]

    # -- actions ---------------------------------------------------------------------------------

    def action(self, kind: str, **args: Any) -> Any:
        body = json.dumps(args).encode()
        try:
            results = list(self._client.do_action(flight.Action(kind, body), self._options))
        except flight.FlightError as e:
            raise gnomon_error(e) from None
        return json.loads(results[0].body.to_pybytes()) if results else None

    def describe(self, table: str) -> dict[str, Any]:
        """``{"table", "schema"}``: the table's schema in the catalog's JSON form."""
        result: dict[str, Any] = self.action("describe", table=table)
        return result

    def scan_stats(self, scan_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self.action("scan_stats", scan_id=scan_id)
        return result

    # -- reads -----------------------------------------------------------------------------------

    def plan(self, spec: ScanSpec) -> flight.FlightInfo:
        """The splits of a scan, all at one pinned manifest version."""
        try:
            return self._client.get_flight_info(
                flight.FlightDescriptor.for_command(spec.to_json()), self._options
            )
        except flight.FlightError as e:
            raise gnomon_error(e) from None

    def read(self, endpoint: flight.FlightEndpoint) -> Iterator[pa.RecordBatch]:
        """The batches of one split."""
        client = self._at(endpoint.locations)
        try:
            reader = client.do_get(endpoint.ticket, self._options)
            for chunk in reader:
                if chunk.data is not None:
                    yield chunk.data
        except flight.FlightError as e:
            raise gnomon_error(e) from None

    def query(self, sql: str, unions: Mapping[str, Sequence[str]] | None = None) -> pa.Table:
        """The answer of ``sql``, a query over tables the node serves; a name of
        ``unions`` reads the rows of the tables it maps to."""
        spec = QuerySpec(sql, {k: list(v) for k, v in (unions or {}).items()})
        ticket = flight.Ticket(spec.to_json())
        try:
            return self._client.do_get(ticket, self._options).read_all()
        except flight.FlightError as e:
            raise gnomon_error(e) from None

    def read_all(self, spec: ScanSpec) -> pa.Table:
        """Every split of a scan as one table (for small results and tests)."""
        info = self.plan(spec)
        batches = [b for ep in info.endpoints for b in self.read(ep)]
        return pa.Table.from_batches(batches, schema=info.schema)

    # -- writes ----------------------------------------------------------------------------------

    def put(
        self,
        table: str,
        batches: Iterable[pa.RecordBatch],
        schema: pa.Schema,
        *,
        revision: int | None = None,
        attempt: str | None = None,
    ) -> int:
        """Send ``batches`` (of ``schema``) to ``table``: written at once, or staged under a
        reserved ``revision`` (by task attempt ``attempt``, see :meth:`commit`). Returns the
        rows the node took."""
        with self.open_put(table, schema, revision=revision, attempt=attempt) as stream:
            for b in batches:
                stream.write(b)
            return stream.finish()

    def open_put(
        self,
        table: str,
        schema: pa.Schema,
        *,
        revision: int | None = None,
        attempt: str | None = None,
    ) -> PutStream:
        """A put whose batches are handed over one at a time (see :meth:`put`), so several
        can be fed at once from one thread."""
        descriptor = flight.FlightDescriptor.for_command(
            PutSpec(table=table, revision=revision, attempt=attempt).to_json()
        )
        try:
            writer, reader = self._client.do_put(descriptor, schema, self._options)
        except flight.FlightError as e:
            raise gnomon_error(e) from None
        return PutStream(writer, reader)

    def reserve(
        self,
        table: str,
        *,
        mode: str = "append",
        time_range: tuple[int | None, int | None] | None = None,
        owner: str = "",
        lease_ms: int = 600_000,
    ) -> int:
        result = self.action(
            "reserve",
            table=table,
            mode=mode,
            time_range=list(time_range) if time_range else None,
            owner=owner,
            lease_ms=lease_ms,
        )
        return int(result["revision"])

    def commit(
        self,
        table: str,
        revision: int,
        *,
        wait_s: float = 0.0,
        attempts: Iterable[str] | None = None,
    ) -> str:
        """Commit a revision; its state after waiting up to ``wait_s`` to be published. With
        ``attempts``, only the rows staged by those attempts are published."""
        # Left out when not given, so the body is what a node without attempts knows.
        chosen = {} if attempts is None else {"attempts": sorted(attempts)}
        result = self.action("commit", table=table, revision=revision, wait_s=wait_s, **chosen)
        return str(result["state"])

    def abort(self, table: str, revision: int) -> None:
        self.action("abort", table=table, revision=revision)


class PutStream:
    """An open ``do_put``: :meth:`write` batches, then :meth:`finish` for the rows the node
    took. Closing it unfinished ends the stream (the node keeps what it received)."""

    def __init__(self, writer: flight.FlightStreamWriter, reader: Any) -> None:
        self._writer = writer
        # A FlightMetadataReader (the stubs name the wrong class).
        self._reader = reader
        self._ended = False

    def write(self, batch: pa.RecordBatch) -> None:
        try:
            self._writer.write_batch(batch)
        except flight.FlightError as e:
            raise gnomon_error(e) from None

    def end(self) -> None:
        """Tell the node the stream is complete (it then writes what it holds), without
        waiting for its answer: ending several first lets their nodes finish at once."""
        if self._ended:
            return
        self._ended = True
        try:
            self._writer.done_writing()
        except flight.FlightError as e:
            raise gnomon_error(e) from None

    def finish(self) -> int:
        """End the stream and wait for the node's answer: the rows it took."""
        self.end()
        try:
            ack = self._reader.read()
        except flight.FlightError as e:
            raise gnomon_error(e) from None
        return int(json.loads(ack.to_pybytes())["rows"]) if ack is not None else 0

    def close(self) -> None:
        try:
            self._writer.close()
        except flight.FlightError as e:
            raise gnomon_error(e) from None

    def __enter__(self) -> PutStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
