"""psycopg 3, pg8000 and asyncpg, unmodified, against gnomon; answers compared with the
same queries over HTTP /sql."""

from __future__ import annotations

import asyncio
import datetime as dt

import asyncpg  # type: ignore[import-untyped]
import pg8000.native  # type: ignore[import-untyped]
import psycopg
import pytest

from tests.pgwire.conftest import PgRunning

pytestmark = pytest.mark.integration

QUERY = "SELECT host, usage, cores, up, ts FROM cpu ORDER BY ts"


def _http(pg: PgRunning, query: str = QUERY) -> list[tuple[object, ...]]:
    return [
        (
            r["host"],
            r["usage"],
            r["cores"],
            r["up"],
            dt.datetime.fromtimestamp(r["ts"] / 1000, dt.UTC).replace(tzinfo=None),
        )
        for r in pg.http_rows(query)
    ]


def _dsn(pg: PgRunning) -> str:
    return f"host=127.0.0.1 port={pg.pg_port} user=gnomon dbname=gnomon connect_timeout=10"


def test_psycopg_answers_as_http(pg: PgRunning) -> None:
    with psycopg.connect(_dsn(pg), autocommit=True) as conn:
        assert conn.execute(QUERY).fetchall() == _http(pg)
        assert conn.info.parameter_status("server_version") == "15.0 (gnomon)"


def test_psycopg_parameters(pg: PgRunning) -> None:
    with psycopg.connect(_dsn(pg)) as conn:
        got = conn.execute(
            "SELECT host FROM cpu WHERE cores >= %s AND host <> %s ORDER BY host", (8, "b")
        ).fetchall()
        assert got == [("c",)]
        conn.commit()


def test_psycopg_prepared_statement_run_many_times(pg: PgRunning) -> None:
    with psycopg.connect(_dsn(pg), autocommit=True) as conn:
        for cores in (4, 8, 16, 4, 8, 16, 4, 8):
            got = conn.execute(
                "SELECT host FROM cpu WHERE cores = %s", (cores,), prepare=True
            ).fetchall()
            assert got == [({4: "a", 8: "b", 16: "c"}[cores],)]


def test_psycopg_server_side_cursor(pg: PgRunning) -> None:
    with psycopg.connect(_dsn(pg)) as conn, conn.cursor(name="hosts") as cur:
        cur.execute("SELECT host FROM cpu ORDER BY host")
        assert cur.fetchone() == ("a",)
        assert cur.fetchmany(1) == [("b",)]
        assert cur.fetchall() == [("c",)]


def test_psycopg_error_then_another_query(pg: PgRunning) -> None:
    with psycopg.connect(_dsn(pg), autocommit=True) as conn:
        with pytest.raises(psycopg.errors.UndefinedTable) as raised:
            conn.execute("SELECT * FROM nowhere")
        assert raised.value.sqlstate == "42P01"
        with pytest.raises(psycopg.Error):
            conn.execute("SELECT nope FROM cpu")
        assert conn.execute("SELECT count(*) FROM cpu").fetchone() == (3,)


def test_pg8000(pg: PgRunning) -> None:
    conn = pg8000.native.Connection(
        "gnomon", host="127.0.0.1", port=pg.pg_port, database="gnomon", timeout=10
    )
    try:
        rows = conn.run(QUERY)
        assert [tuple(r) for r in rows] == _http(pg)
        assert conn.run("SELECT cores FROM cpu WHERE host = :h", h="b") == [[8]]
    finally:
        conn.close()


def test_asyncpg_binary_formats_and_parameters(pg: PgRunning) -> None:
    async def run() -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
        conn = await asyncpg.connect(
            host="127.0.0.1", port=pg.pg_port, user="gnomon", database="gnomon", timeout=10
        )
        try:
            everything = [tuple(r) for r in await conn.fetch(QUERY)]
            some = [
                tuple(r)
                for r in await conn.fetch(
                    # Each parameter takes its column's type: a string, a bigint, a timestamp.
                    "SELECT host, cores FROM cpu WHERE (host = $1 OR cores = $2) AND ts >= $3 "
                    "ORDER BY host",
                    "a",
                    16,
                    dt.datetime(2023, 11, 14),
                )
            ]
            return everything, some
        finally:
            await conn.close()

    everything, some = asyncio.run(run())
    assert everything == _http(pg)
    assert some == [("a", 4), ("c", 16)]


def test_a_table_named_like_a_catalog_is_queried(pg: PgRunning) -> None:
    status, body = pg.running.sql(
        "CREATE TABLE pg_mine (ts TIMESTAMP NOT NULL, v DOUBLE, TIMESTAMP KEY(ts)) ENGINE=Analytic"
    )
    assert status == 200, body
    pg.running.sql("INSERT INTO pg_mine (ts, v) VALUES (1, 2.5)")
    with psycopg.connect(_dsn(pg), autocommit=True) as conn:
        assert conn.execute("SELECT v FROM pg_mine").fetchall() == [(2.5,)]
        assert conn.execute("SELECT current_database(), current_schema()").fetchone() == (
            "gnomon",
            "public",
        )


def test_a_cancel_request_finds_its_connection(pg: PgRunning) -> None:
    with psycopg.connect(_dsn(pg), autocommit=True) as conn:
        # Nothing runs: the request is taken and dropped, the connection serves on.
        conn.cancel_safe(timeout=10)
        assert conn.execute("SELECT 7").fetchone() == (7,)


def test_information_schema_answers_as_over_http(pg: PgRunning) -> None:
    query = "SELECT table_schema, table_name FROM information_schema.tables ORDER BY table_name"
    with psycopg.connect(_dsn(pg), autocommit=True) as conn:
        got = conn.execute(query).fetchall()
    assert got == [(r["table_schema"], r["table_name"]) for r in pg.http_rows(query)]
