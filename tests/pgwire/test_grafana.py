"""What Grafana's PostgreSQL data source sends, word for word, as its Go driver (pgx) sends
it: the extended protocol with binary results (asyncpg speaks it the same way). Grafana
itself is not run: it is licensed under the AGPL, which this project does not take in, so
its queries are taken from its source (the data source's meta
queries in `postgresMetaQuery.ts`, the health check's ping, the macros of `macros.go`) and
the answers compared with the same data over HTTP /sql. Its version probe and its table and
column lists (`current_setting` inside an expression, the search-path constraint over
`string_to_array` and `generate_series`) are not answered yet."""

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
SCHEMAS = """SELECT schema_name AS "name"
    FROM information_schema.schemata
    WHERE schema_name NOT IN ('information_schema',
                              'pg_catalog',
                              'pg_toast',
                              '_timescaledb_cache',
                              '_timescaledb_catalog',
                              '_timescaledb_internal',
                              '_timescaledb_config',
                              'timescaledb_information',
                              'timescaledb_experimental')
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
