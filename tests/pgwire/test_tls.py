"""The PostgreSQL protocol over TLS: SSLRequest is answered with gnomon's certificate, which
psycopg and psql verify against the CA; a server without TLS answers 'N'. A server with a
certificate takes SCRAM-SHA-256 with or without TLS, and a cleartext password (an account
made before SCRAM verifiers were kept) over TLS only."""

from __future__ import annotations

import socket
import struct
from pathlib import Path

import psycopg
import pytest

from gnomon.store.sqlite import SqliteStore
from node.security.ca import make_ca
from tests.pgwire.conftest import PgRunning, start
from tests.security.conftest import READER, ROOT, admin

pytestmark = pytest.mark.integration

SSL_REQUEST = struct.pack(">ii", 8, 80877103)


def _login(server: PgRunning, user: str, password: str) -> str:
    return (
        f"host=127.0.0.1 port={server.pg_port} user={user} password={password} dbname=gnomon "
        "connect_timeout=10"
    )


def test_tls_when_the_server_has_a_certificate(tmp_path: Path) -> None:
    issued = make_ca(tmp_path / "ca")
    data = tmp_path / "data"
    admin(data, "users", "create", READER[0], "--password", READER[1])
    # As a catalog of a gnomon that kept no SCRAM verifiers: READER has none.
    store = SqliteStore(str(data / "meta.db"))
    try:
        store.drop("auth_scram")
    finally:
        store.close()
    admin(data, "users", "create", ROOT[0], "--password", ROOT[1], "--superuser")
    server = start(
        tmp_path, "--tls-cert", str(issued.cert), "--tls-key", str(issued.key), "--auth", "true"
    )
    scram = _login(server, *ROOT) + " require_auth=scram-sha-256"
    cleartext = _login(server, *READER)
    try:
        # libpq binds no channel (none is offered) and says so with the gs2 header y,,.
        with psycopg.connect(scram, sslmode="verify-ca", sslrootcert=str(issued.ca)) as conn:
            assert conn.info.pgconn.ssl_in_use
            assert conn.execute("SELECT 1").fetchone() == (1,)
        # SCRAM sends no password: it needs no TLS.
        with psycopg.connect(scram, sslmode="disable") as conn:
            assert not conn.info.pgconn.ssl_in_use
            assert conn.execute("SELECT 1").fetchone() == (1,)
        with psycopg.connect(
            cleartext + " require_auth=password", sslmode="verify-ca", sslrootcert=str(issued.ca)
        ) as conn:
            assert conn.execute("SELECT current_user").fetchone() == (READER[0],)
        # A password is not sent in the clear to a server that has a certificate.
        with pytest.raises(psycopg.OperationalError, match="over TLS only"):
            psycopg.connect(cleartext, sslmode="disable")
    finally:
        server.running.server.stop()


def test_no_tls_answers_n(pg: PgRunning) -> None:
    with socket.create_connection(("127.0.0.1", pg.pg_port), timeout=30) as sock:
        sock.sendall(SSL_REQUEST)
        assert sock.recv(1) == b"N"
