"""The extended protocol as drivers rarely drive it: row limits on portals, errors skipping
to Sync, named statements and portals, messages out of order; the connection stays usable."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.pgwire.conftest import PgRunning
from tests.pgwire.wire import (
    SYNC,
    WireClient,
    bind,
    error_code,
    execute,
    frame,
    kinds,
    parse,
)

pytestmark = pytest.mark.integration


@pytest.fixture
def client(pg: PgRunning) -> Iterator[WireClient]:
    c = WireClient(pg.pg_port)
    yield c
    c.close()


def test_a_row_limit_suspends_the_portal(client: WireClient) -> None:
    client.send(parse("SELECT host FROM cpu ORDER BY host"), bind(), execute(most=2), SYNC)
    got = client.until_ready()
    assert kinds(got) == b"12DDsZ"
    client.send(parse("SELECT host FROM cpu ORDER BY host", "s"), bind("p", "s"))
    client.send(execute("p", 2), execute("p", 2), SYNC)
    got = client.until_ready()
    assert kinds(got) == b"12DDsDCZ"
    assert got[-2][1] == b"SELECT 3\x00"


def test_an_error_skips_to_sync(client: WireClient) -> None:
    client.send(bind("", "missing"), execute(), parse("SELECT 1"), SYNC)
    got = client.until_ready()
    assert kinds(got) == b"EZ"
    assert error_code(got) == "26000"
    client.send(parse("SELECT cores FROM cpu WHERE host = $1"), bind(params=(b"b",)))
    client.send(execute(), SYNC)
    got = client.until_ready()
    assert kinds(got) == b"12DCZ"
    assert got[2][1].endswith(b"8")


def test_a_statement_error_has_its_state_and_position(client: WireClient) -> None:
    client.send(frame(b"Q", b"SELECT 1; SELEC 2\x00"))
    got = client.until_ready()
    assert kinds(got) == b"TDCEZ"
    assert error_code(got) == "42601"
    assert b"P1\x00" in got[3][1]
    client.send(frame(b"Q", b"SELECT 5\x00"))
    assert kinds(client.until_ready()) == b"TDCZ"


def test_an_unknown_message_is_refused_and_the_connection_kept(client: WireClient) -> None:
    client.send(frame(b"?", b"junk"), SYNC)
    got = client.until_ready()
    assert kinds(got) == b"EZ"
    assert error_code(got) == "08P01"
    client.send(frame(b"Q", b"\x00"))
    assert kinds(client.until_ready()) == b"IZ"


def test_a_statement_that_fails_to_plan_is_described_by_its_error_alone(
    client: WireClient,
) -> None:
    # No ParameterDescription before the error: a driver waiting for a row description or
    # an error (asyncpg) would otherwise wait on.
    describe = frame(b"D", b"S\x00")
    client.send(parse("SELECT no_such_function(1) AS x"), describe, SYNC)
    got = client.until_ready()
    assert kinds(got) == b"1EZ"
    assert error_code(got) == "42601"
    client.send(parse("SELECT host FROM cpu WHERE cores = $1"), describe, SYNC)
    assert kinds(client.until_ready()) == b"1tTZ"
