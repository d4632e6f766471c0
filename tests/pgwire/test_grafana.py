"""What Grafana's PostgreSQL data source sends, word for word, as its Go driver (pgx) sends
it: the extended protocol with binary results (asyncpg speaks it the same way). Grafana
itself is not run: it is licensed under the AGPL, which this project does not take in, so
its queries are taken from its source (the data source's meta
queries in `postgresMetaQuery.ts`, the health check's ping, the macros of `macros.go`) and
the answers compared with the same data over HTTP /sql."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Sequence
from typing import Any

import asyncpg  # type: ignore[import-untyped]
import pytest

from tests.pgwire.conftest import PgRunning
from tests.pgwire.wire import WireClient, frame, kinds

pytestmark = pytest.mark.integration

TIMESCALEDB = "SELECT extversion FROM pg_extension WHERE extname = 'timescaledb'"
#: TimescaleDB's schemas, which Grafana's lists leave out.
TIMESCALEDB_SCHEMAS = """'_timescaledb_cache',
                              '_timescaledb_catalog',
                              '_timescaledb_internal',
                              '_timescaledb_config',
                              'timescaledb_information',
                              'timescaledb_experimental'"""
SCHEMAS = f"""SELECT schema_name AS "name"
    FROM information_schema.schemata
    WHERE schema_name NOT IN ('information_schema',
                              'pg_catalog',
                              'pg_toast',
                              {TIMESCALEDB_SCHEMAS})
    ORDER BY schema_name"""
#: A time-series panel: `$__timeGroupAlias(ts, '1s')`, `$__timeFilter(ts)` expanded as
#: Grafana's macro engine expands them (RFC 3339 bounds, a group by epoch seconds).
SERIES = """SELECT
  floor(extract(epoch from ts)/1)*1 AS "time",
  avg(usage) AS "usage"
FROM cpu
WHERE ts BETWEEN '2023-11-14T22:13:20Z' AND '2023-11-14T22:13:21.5Z'
GROUP BY 1
ORDER BY 1"""

VERSION = "SELECT current_setting('server_version_num')::int/100 as version"
#: Which schemas are on the search path, as Grafana asks it (`buildSchemaConstraint`).
SEARCH_PATH = """
          quote_ident(table_schema) IN (
          SELECT
            CASE WHEN trim(s[i]) = '"$user"' THEN user ELSE trim(s[i]) END
          FROM
            generate_series(
              array_lower(string_to_array(current_setting('search_path'),','),1),
              array_upper(string_to_array(current_setting('search_path'),','),1)
            ) as i,
            string_to_array(current_setting('search_path'),',') s
          )"""
TABLES = f"""SELECT
    CASE WHEN {SEARCH_PATH}
      THEN quote_ident(table_name)
      ELSE quote_ident(table_schema) || '.' || quote_ident(table_name)
    END AS "table"
    FROM information_schema.tables
    WHERE quote_ident(table_schema) NOT IN ('information_schema',
                             'pg_catalog',
                             {TIMESCALEDB_SCHEMAS})
    ORDER BY CASE WHEN {SEARCH_PATH} THEN 0 ELSE 1 END, 1"""
TABLES_IN = """SELECT quote_ident(table_name) AS "table"
      FROM information_schema.tables
      WHERE quote_ident(table_schema) = 'public'
      ORDER BY 1"""


def columns(table: str) -> str:
    """Grafana's column list of ``table`` (as its picker names it: quoted where needed,
    qualified or not)."""
    literal = "'" + table.replace("'", "''") + "'"
    return f"""SELECT quote_ident(column_name) AS "column", data_type AS "type"
    FROM information_schema.columns
    WHERE
      CASE WHEN array_length(parse_ident({literal}),1) = 2
        THEN quote_ident(table_schema) = (parse_ident({literal}))[1]
          AND quote_ident(table_name) = (parse_ident({literal}))[2]
        ELSE quote_ident(table_name) = {literal}
          AND {SEARCH_PATH}
      END"""


def _grafana(pg: PgRunning, *queries: str) -> list[list[tuple[Any, ...]]]:
    """Each of ``queries`` run as Grafana's driver runs it, on one connection."""

    async def run() -> list[list[tuple[Any, ...]]]:
        conn = await asyncpg.connect(
            host="127.0.0.1", port=pg.pg_port, user="gnomon", database="gnomon", timeout=10
        )
        try:
            return [[tuple(r) for r in await conn.fetch(q)] for q in queries]
        finally:
            await conn.close()

    return asyncio.run(run())


def _rows(rows: Sequence[dict[str, Any]], *names: str) -> list[tuple[Any, ...]]:
    return [tuple(r[n] for n in names) for r in rows]


def test_the_health_check_pings_with_a_comment(pg: PgRunning) -> None:
    """pgx's ping is a simple query of a comment alone: PostgreSQL answers it as an empty
    query (EmptyQueryResponse, then ready), which "Database Connection OK" waits for."""
    client = WireClient(pg.pg_port)
    try:
        client.send(frame(b"Q", b"-- ping\x00"))
        assert kinds(client.until_ready()) == b"IZ"
    finally:
        client.close()


def test_the_extension_probe_and_the_schema_list(pg: PgRunning) -> None:
    timescaledb, schemas = _grafana(pg, TIMESCALEDB, SCHEMAS)
    # Grafana offers TimescaleDB's macros only where the extension is found.
    assert timescaledb == []
    over_http = pg.http_rows(
        "SELECT schema_name FROM information_schema.schemata "
        "WHERE schema_name NOT IN ('information_schema', 'pg_catalog') ORDER BY schema_name"
    )
    assert schemas == _rows(over_http, "schema_name") == [("public",)]


def test_a_time_series_panel_answers_as_over_http(pg: PgRunning) -> None:
    (series,) = _grafana(pg, SERIES)
    # Rows at 1700000000 s (1.5) and 1700000001 s (2.25); the third is outside the range.
    assert series == [(1700000000.0, 1.5), (1700000001.0, 2.25)]
    over_http = pg.http_rows(SERIES)
    assert series == _rows(over_http, "time", "usage")
    assert dt.datetime.fromtimestamp(series[0][0], dt.UTC).isoformat().startswith("2023-11-14")


def test_the_version_probe(pg: PgRunning) -> None:
    """Grafana picks the PostgreSQL version its editor offers features for from this."""
    (version,) = _grafana(pg, VERSION)
    assert version == [(1500,)]


def test_the_table_lists_are_the_tables_shown(pg: PgRunning) -> None:
    """A name that needs quoting is listed quoted, as Grafana puts it into SQL."""
    status, body = pg.running.sql(
        "CREATE TABLE `cpu-2` (ts TIMESTAMP NOT NULL, v DOUBLE, TIMESTAMP KEY(ts)) ENGINE=Analytic"
    )
    assert status == 200, body
    try:
        on_path, in_public = _grafana(pg, TABLES, TABLES_IN)
        shown = sorted(r["Tables"] for r in pg.http_rows("SHOW TABLES"))
        assert shown == ["cpu", "cpu-2"]
        assert on_path == in_public == [('"cpu-2"',), ("cpu",)]
    finally:
        pg.running.sql("DROP TABLE `cpu-2`")


def test_the_column_lists_are_the_columns_described(pg: PgRunning) -> None:
    plain, qualified, unknown = _grafana(pg, columns("cpu"), columns("public.cpu"), columns("nope"))
    described = pg.http_rows("DESCRIBE cpu")
    assert [c for c, _ in plain] == [r["name"] for r in described]
    assert dict(plain) == {
        "tsid": "numeric",
        "ts": "timestamp without time zone",
        "host": "text",
        "usage": "double precision",
        "cores": "bigint",
        "up": "boolean",
    }
    assert qualified == plain
    assert unknown == []


def test_an_error_leaves_the_connection_usable(pg: PgRunning) -> None:
    """asyncpg prepares with Flush, not Sync: the error must reach it before its Sync."""

    async def run() -> tuple[str, list[tuple[Any, ...]]]:
        conn = await asyncpg.connect(
            host="127.0.0.1", port=pg.pg_port, user="gnomon", database="gnomon", timeout=10
        )
        try:
            with pytest.raises(asyncpg.PostgresError) as failed:
                await asyncio.wait_for(conn.fetch("SELECT nope FROM cpu"), 10)
            return str(failed.value), [tuple(r) for r in await conn.fetch("SELECT 2")]
        finally:
            await conn.close()

    message, after = asyncio.run(run())
    assert "nope" in message
    assert after == [(2,)]
