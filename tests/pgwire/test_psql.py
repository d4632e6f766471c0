"""psql, unmodified, against gnomon: a query, and the meta-commands that read the catalog."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.pgwire.conftest import PgRunning, psql

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("psql") is None, reason="psql is not installed"),
]


def test_a_query_answers_as_over_http(pg: PgRunning) -> None:
    done = psql(pg, "SELECT host, cores FROM cpu ORDER BY host", "SELECT 1")
    assert done.returncode == 0, done.stderr
    lines = [line.split("|") for line in done.stdout.splitlines() if "|" in line][1:]
    got = [(h.strip(), int(c)) for h, c in lines]
    want = [
        (r["host"], r["cores"]) for r in pg.http_rows("SELECT host, cores FROM cpu ORDER BY host")
    ]
    assert got == want
    assert "(1 row)" in done.stdout


def test_list_tables_and_describe_one(pg: PgRunning) -> None:
    done = psql(pg, "\\dt", "\\d cpu", "\\l")
    assert done.returncode == 0, done.stderr
    assert "List of relations" in done.stdout
    assert " public | cpu  | table |" in done.stdout
    assert 'Table "public.cpu"' in done.stdout
    for column in ("ts", "host", "usage", "cores", "up"):
        assert f" {column} " in done.stdout
    assert "List of databases" in done.stdout


def test_verbose_and_other_listings(pg: PgRunning) -> None:
    done = psql(pg, "\\d+ cpu", "\\dn", "\\dv")
    assert done.returncode == 0, done.stderr
    assert "Storage" in done.stdout and " usage " in done.stdout
    assert " public | gnomon" in done.stdout
    assert "Did not find any relations." in done.stdout + done.stderr


def test_conninfo(pg: PgRunning) -> None:
    done = psql(pg, "\\conninfo")
    assert done.returncode == 0, done.stderr
    assert f'port "{pg.pg_port}"' in done.stdout


def test_an_error_names_its_state_and_position(pg: PgRunning) -> None:
    done = subprocess.run(
        [
            "psql",
            "-X",
            "-h",
            "127.0.0.1",
            "-p",
            str(pg.pg_port),
            "-U",
            "gnomon",
            "-d",
            "gnomon",
            "-v",
            "VERBOSITY=verbose",
            "-c",
            "SELEC 1",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "42601" in done.stderr
    assert "LINE 1: SELEC 1" in done.stderr  # psql shows the position it was sent
