"""Hostile Arrow Flight calls: fuzzed scan and query forms, other JSON and raw bytes as
``do_get`` tickets, and ``do_put`` streams of hostile schemas or malformed Arrow IPC (cut,
overwritten, huge lengths, bad dictionaries) get rows, a write, or a gnomon error a client can
read (no internal error, hang or crash).

pyarrow's client writes only well-formed IPC, so the puts go over gRPC as raw FlightData
messages (Flight.proto's fields, encoded here)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import grpc
import pyarrow as pa
import pyarrow.flight as flight
import pytest
from hypothesis import example, given

from gnomon.errors import Status
from tests.fuzz import strategies as fz
from tests.fuzz.conftest import FUZZ, FUZZER, assert_serving, basic
from tests.server.conftest import Running

pytestmark = pytest.mark.integration

OPTIONS = flight.FlightCallOptions(
    timeout=60,
    headers=[(b"authorization", basic(*FUZZER).encode())],  # type: ignore[list-item]
)


#: gRPC statuses of a clean refusal of a put: gnomon's errors and Arrow's own refusals of a
#: stream it cannot decode travel as UNKNOWN (Flight's generic status), a schema of a type Arrow
#: cannot read (a 3-bit integer) as UNIMPLEMENTED, the rest as Flight maps them; INTERNAL and
#: DEADLINE_EXCEEDED (a hang) are failures.
PUT_CODES = {
    grpc.StatusCode.UNKNOWN,
    grpc.StatusCode.UNIMPLEMENTED,
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.UNAUTHENTICATED,
    grpc.StatusCode.PERMISSION_DENIED,
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
}


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field."""
    return fz.varint(number << 3 | 2) + fz.varint(len(payload)) + payload


def flight_data(header: bytes, body: bytes, command: bytes | None = None) -> bytes:
    """A FlightData message: descriptor (1; type CMD = 2, cmd = 2), data_header (2), data_body
    (1000)."""
    descriptor = b"" if command is None else _field(1, b"\x08\x02" + _field(2, command))
    return descriptor + _field(2, header) + _field(1000, body)


@pytest.fixture(scope="module")
def client(target: tuple[Running, int]) -> Iterator[flight.FlightClient]:
    with flight.connect(f"grpc+tcp://127.0.0.1:{target[1]}") as c:
        yield c


def _named(name: bytes) -> tuple[bytes, list[fz.Message]]:
    """A put of one well-formed row whose one column's name is ``name`` (any bytes)."""
    batch = pa.record_batch([pa.array([1.0])], names=["zz"])
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as w:
        w.write_batch(batch)
    messages = [
        (m.metadata.to_pybytes().replace(b"zz", name), m.body.to_pybytes() if m.body else b"")
        for m in pa.ipc.MessageReader.open_stream(sink.getvalue())
    ]
    return json.dumps({"table": fz.PLAYGROUND}).encode(), messages


@FUZZ
@given(ticket=fz.tickets)
@example(ticket=json.dumps({"table": fz.SEED, "columns": ["host", "host"]}).encode())
def test_tickets(client: flight.FlightClient, ticket: bytes) -> None:
    try:
        client.do_get(flight.Ticket(ticket), OPTIONS).read_all()
    except (flight.FlightServerError, flight.FlightUnavailableError) as e:
        # The server's errors carry the gnomon error; an unexpected one says 500.
        info = json.loads(e.extra_info or b"{}")
        assert info.get("status") != int(Status.INTERNAL), str(e)
    except (flight.FlightUnauthenticatedError, flight.FlightUnauthorizedError):
        pass
    except pa.ArrowInvalid:
        pass  # the client's own refusal of what it was asked to send


@pytest.fixture(scope="module")
def do_put(target: tuple[Running, int]) -> Iterator[grpc.StreamStreamMultiCallable[bytes, bytes]]:
    with grpc.insecure_channel(f"127.0.0.1:{target[1]}") as channel:
        yield channel.stream_stream(
            "/arrow.flight.protocol.FlightService/DoPut",
            request_serializer=bytes,
            response_deserializer=bytes,
        )


@pytest.mark.long
@FUZZ
@given(put=fz.ipc_puts())
@example(put=_named(b"\x80s"))  # found by a long run: a column name that is no UTF-8
def test_puts(
    do_put: grpc.StreamStreamMultiCallable[bytes, bytes], put: tuple[bytes, list[fz.Message]]
) -> None:
    descriptor, messages = put
    frames = [
        flight_data(header, body, descriptor if i == 0 else None)
        for i, (header, body) in enumerate(messages or [(b"", b"")])
    ]
    try:
        list(do_put(iter(frames), timeout=60, metadata=(("authorization", basic(*FUZZER)),)))
    except grpc.RpcError as e:
        assert e.code() in PUT_CODES, (e.code(), e.details())
        assert not (e.details() or "").startswith("internal error"), e.details()


def test_still_serving(server: Running) -> None:
    assert_serving(server)
