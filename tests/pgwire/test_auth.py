"""With authentication on: a user's password lets a client in, a wrong one is refused with
SQLSTATE 28P01, and statements run as the user, under its grants."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import psycopg
import pytest

from tests.pgwire.conftest import PgRunning, psql, start
from tests.security.conftest import READER, ROOT, admin


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
    )


def test_the_right_password_lets_in(secured: PgRunning) -> None:
    with _connect(secured, *ROOT) as conn:
        conn.execute(
            "CREATE TABLE secret (ts TIMESTAMP NOT NULL, v DOUBLE, TIMESTAMP KEY(ts)) "
            "ENGINE=Analytic"
        )
        assert conn.execute("SELECT count(*) FROM secret").fetchone() == (0,)


def test_a_wrong_password_is_refused(secured: PgRunning) -> None:
    with pytest.raises(psycopg.OperationalError) as raised:
        _connect(secured, ROOT[0], "wrong")
    assert "28P01" in str(raised.value) or "password authentication failed" in str(raised.value)


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
