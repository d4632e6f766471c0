"""The PostgreSQL protocol over TLS: SSLRequest is answered with gnomon's certificate, which
psycopg and psql verify against the CA; a server without TLS answers 'N'."""

from __future__ import annotations

import socket
import struct
from pathlib import Path

import psycopg
import pytest

from node.security.ca import make_ca
from tests.pgwire.conftest import PgRunning, start
from tests.security.conftest import ROOT, admin

SSL_REQUEST = struct.pack(">ii", 8, 80877103)


def test_tls_when_the_server_has_a_certificate(tmp_path: Path) -> None:
    issued = make_ca(tmp_path / "ca")
    admin(tmp_path / "data", "users", "create", ROOT[0], "--password", ROOT[1], "--superuser")
    server = start(
        tmp_path, "--tls-cert", str(issued.cert), "--tls-key", str(issued.key), "--auth", "true"
    )
    login = (
        f"host=127.0.0.1 port={server.pg_port} user={ROOT[0]} password={ROOT[1]} dbname=gnomon "
        "connect_timeout=10"
    )
    try:
        with psycopg.connect(login, sslmode="verify-ca", sslrootcert=str(issued.ca)) as conn:
            assert conn.info.pgconn.ssl_in_use
            assert conn.execute("SELECT 1").fetchone() == (1,)
        # A password is not sent in the clear to a server that has a certificate.
        with pytest.raises(psycopg.OperationalError, match="over TLS only"):
            psycopg.connect(login, sslmode="disable")
    finally:
        server.running.server.stop()


def test_no_tls_answers_n(pg: PgRunning) -> None:
    with socket.create_connection(("127.0.0.1", pg.pg_port), timeout=30) as sock:
        sock.sendall(SSL_REQUEST)
        assert sock.recv(1) == b"N"
