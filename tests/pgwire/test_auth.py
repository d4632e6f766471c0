"""With authentication on: a user's password lets a client in (proven with SCRAM-SHA-256,
without TLS: psycopg, asyncpg, pg8000, psql), a wrong one is refused with SQLSTATE 28P01 as
an unknown user is, a malformed SASL message is a protocol violation (08P01), and statements
run as the user, under its grants."""

from __future__ import annotations

import asyncio
import base64
import shutil
import struct
from collections.abc import Callable, Iterator

import asyncpg  # type: ignore[import-untyped]
import pg8000.native  # type: ignore[import-untyped]
import psycopg
import pytest

from node.security import scram
from tests.pgwire.conftest import PgRunning, psql, start
from tests.pgwire.wire import (
    AUTH_SASL,
    WireClient,
    auth_code,
    client_final,
    client_first_bare,
    cstr,
    error_code,
    frame,
    sasl_initial,
    split,
)
from tests.security.conftest import READER, ROOT, admin

pytestmark = pytest.mark.integration

#: libpq refuses any other method than SCRAM (libpq 16 and later have require_auth).
SCRAM_ONLY = {"require_auth": "scram-sha-256"} if psycopg.pq.version() >= 160000 else {}


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PgRunning]:
    root = tmp_path_factory.mktemp("pg-secured")
    data = root / "data"
    admin(data, "users", "create", ROOT[0], "--password", ROOT[1], "--superuser")
    admin(data, "users", "create", READER[0], "--password", READER[1])
    server = start(root, "--auth", "true", "--auth-cache-s", "0")
    yield server
    server.running.server.stop()


def _connect(pg: PgRunning, user: str, password: str) -> psycopg.Connection[tuple[object, ...]]:
    return psycopg.connect(
        host="127.0.0.1",
        port=pg.pg_port,
        user=user,
        password=password,
        dbname="gnomon",
        connect_timeout=10,
        autocommit=True,
        sslmode="disable",
        **SCRAM_ONLY,
    )


def test_the_right_password_lets_in(secured: PgRunning) -> None:
    with _connect(secured, *ROOT) as conn:
        conn.execute(
            "CREATE TABLE secret (ts TIMESTAMP NOT NULL, v DOUBLE, TIMESTAMP KEY(ts)) "
            "ENGINE=Analytic"
        )
        assert conn.execute("SELECT count(*) FROM secret").fetchone() == (0,)


def test_a_wrong_password_is_refused_as_an_unknown_user_is(secured: PgRunning) -> None:
    refusals = []
    for user, password in ((ROOT[0], "wrong-password"), ("ghost", ROOT[1])):
        with pytest.raises(psycopg.OperationalError) as raised:
            _connect(secured, user, password)
        assert f'password authentication failed for user "{user}"' in str(raised.value)
        refusals.append(str(raised.value).replace(f'"{user}"', '"?"'))
    assert refusals[0] == refusals[1]


def test_the_server_offers_scram_sha_256(secured: PgRunning) -> None:
    client = WireClient(secured.pg_port, ROOT[0], login=False)
    try:
        kind, body = client.read()
        assert (kind, auth_code(body), body[4:]) == (b"R", AUTH_SASL, b"SCRAM-SHA-256\x00\x00")
        client.scram(ROOT[1])
        assert [(k, auth_code(b)) for k, b in client.until_ready() if k == b"R"] == [
            (b"R", 12),
            (b"R", 0),
        ]
    finally:
        client.close()


def test_the_gs2_header_y_is_taken(secured: PgRunning) -> None:
    client = WireClient(secured.pg_port, ROOT[0], login=False)
    try:
        client.read()
        client.scram(ROOT[1], gs2="y,,")
        assert client.until_ready()[-1][0] == b"Z"
    finally:
        client.close()


def _attempt(
    pg: PgRunning, user: str, password: str
) -> tuple[bytes, str | None, list[tuple[bytes, bytes]]]:
    """A SCRAM exchange, message by message: the server-first-message's salt and iteration
    count, the SQLSTATE it ends with, and the messages it ends with, the user name left out."""
    client = WireClient(pg.pg_port, user, login=False)
    try:
        kind, body = client.read()
        assert kind == b"R" and auth_code(body) == AUTH_SASL
        bare = client_first_bare()
        client.send(sasl_initial("n,," + bare))
        kind, body = client.read()
        assert kind == b"R" and auth_code(body) == 11
        server_first = body[4:]
        client.send(frame(b"p", client_final(password, bare, server_first).encode()))
        ending = client.rest()
    finally:
        client.close()
    salt_and_count = server_first.partition(b",")[2]
    messages = split(ending)
    return (
        salt_and_count,
        error_code(messages),
        [(k, b.replace(user.encode(), b"?")) for k, b in messages],
    )


def test_an_unknown_user_runs_the_exchange_and_fails_as_a_wrong_password(
    secured: PgRunning,
) -> None:
    ghost = _attempt(secured, "ghost", ROOT[1])
    wrong = _attempt(secured, ROOT[0], "wrong-password")
    assert ghost[1] == wrong[1] == "28P01"
    assert ghost[2] == wrong[2]
    # The same salt each time, as a real account has, and one of a real salt's size.
    assert _attempt(secured, "ghost", "other-password")[0] == ghost[0]
    assert _attempt(secured, ROOT[0], "other-password")[0] == wrong[0]
    salts = [dict(f.split(b"=", 1) for f in a[0].split(b",")) for a in (ghost, wrong)]
    assert [len(base64.b64decode(s[b"s"])) for s in salts] == [16, 16]
    assert salts[0][b"i"] == salts[1][b"i"] == b"4096"


def _final(client: WireClient, text: bytes) -> None:
    """A valid first step, then ``text`` as the client-final-message."""
    client.read()
    client.send(sasl_initial("n,," + client_first_bare()))
    kind, _ = client.read()
    assert kind == b"R"
    client.send(frame(b"p", text))


_MALFORMED: dict[str, Callable[[WireClient], None]] = {
    "another mechanism": lambda c: c.send(sasl_initial("n,,n=,r=abc", mechanism="SCRAM-SHA-1")),
    "no initial response": lambda c: c.send(
        frame(b"p", cstr(scram.MECHANISM) + struct.pack(">i", -1))
    ),
    "a cut initial response": lambda c: c.send(
        frame(b"p", cstr(scram.MECHANISM) + struct.pack(">i", 100) + b"n,,")
    ),
    "garbage first": lambda c: c.send(sasl_initial("garbage")),
    "channel binding asked": lambda c: c.send(sasl_initial("p=tls-unique,,n=,r=abc")),
    "a query instead": lambda c: c.send(frame(b"Q", cstr("SELECT 1"))),
    "a final with another nonce": lambda c: _final(c, b"c=biws,r=other,p=AAAA"),
    "a final without proof": lambda c: _final(c, b"c=biws"),
    "a final of bytes": lambda c: _final(c, b"\xff\x00\x01"),
}


@pytest.mark.parametrize("send", _MALFORMED.values(), ids=_MALFORMED.keys())
def test_a_malformed_sasl_message_is_a_protocol_violation(
    secured: PgRunning, send: Callable[[WireClient], None]
) -> None:
    client = WireClient(secured.pg_port, ROOT[0], login=False)
    try:
        send(client)
        ending = client.rest()
    finally:
        client.close()
    assert error_code(split(ending)) == "08P01", ending
    # The server is unharmed: the next client gets in.
    WireClient(secured.pg_port, *ROOT).close()


def test_asyncpg_and_pg8000_prove_their_passwords_with_scram(secured: PgRunning) -> None:
    async def by_asyncpg() -> object:
        conn = await asyncpg.connect(
            host="127.0.0.1",
            port=secured.pg_port,
            user=ROOT[0],
            password=ROOT[1],
            database="gnomon",
            ssl=False,
            timeout=10,
        )
        try:
            return await conn.fetchval("SELECT 40 + 2")
        finally:
            await conn.close()

    assert asyncio.run(by_asyncpg()) == 42
    conn = pg8000.native.Connection(
        ROOT[0],
        host="127.0.0.1",
        port=secured.pg_port,
        database="gnomon",
        password=ROOT[1],
        timeout=10,
    )
    try:
        assert conn.run("SELECT 40 + 2") == [[42]]
    finally:
        conn.close()
    with pytest.raises(pg8000.native.DatabaseError, match="28P01"):
        pg8000.native.Connection(
            "ghost",
            host="127.0.0.1",
            port=secured.pg_port,
            database="gnomon",
            password=ROOT[1],
            timeout=10,
        )
    with pytest.raises(asyncpg.InvalidPasswordError, match='for user "ghost"'):
        asyncio.run(
            asyncpg.connect(
                host="127.0.0.1",
                port=secured.pg_port,
                user="ghost",
                password=ROOT[1],
                database="gnomon",
                ssl=False,
                timeout=10,
            )
        )


def test_grants_apply(secured: PgRunning) -> None:
    with _connect(secured, *ROOT) as conn:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS hidden (ts TIMESTAMP NOT NULL, v DOUBLE, "
            "TIMESTAMP KEY(ts)) ENGINE=Analytic"
        )
    with _connect(secured, *READER) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute("SELECT * FROM hidden")


@pytest.mark.skipif(shutil.which("psql") is None, reason="psql is not installed")
def test_psql_with_a_password(secured: PgRunning) -> None:
    done = psql(secured, "SELECT 41 + 1", user=ROOT[0], password=ROOT[1])
    assert done.returncode == 0, done.stderr
    assert " 42" in done.stdout
    refused = psql(secured, "SELECT 1", user=ROOT[0], password="wrong")
    assert refused.returncode != 0
    assert 'password authentication failed for user "root"' in refused.stderr
    unknown = psql(secured, "SELECT 1", user="ghost", password=ROOT[1])
    assert unknown.returncode != 0
    assert unknown.stderr.replace("ghost", "root") == refused.stderr
