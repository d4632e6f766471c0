"""Hostile Arrow Flight tickets: fuzzed scan and query forms, other JSON and raw bytes in
``do_get`` get rows or a gnomon error a client can read (no internal error, hang or crash)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.flight as flight
import pytest
from hypothesis import given

from gnomon.errors import Status
from tests.fuzz import strategies as fz
from tests.fuzz.conftest import FUZZ, FUZZER, assert_serving, basic
from tests.server.conftest import Running

OPTIONS = flight.FlightCallOptions(
    timeout=60,
    headers=[(b"authorization", basic(*FUZZER).encode())],  # type: ignore[list-item]
)


@pytest.fixture(scope="module")
def client(target: tuple[Running, int]) -> Iterator[flight.FlightClient]:
    with flight.connect(f"grpc+tcp://127.0.0.1:{target[1]}") as c:
        yield c


@FUZZ
@given(ticket=fz.tickets)
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


def test_still_serving(server: Running) -> None:
    assert_serving(server)
