"""A real standalone gnomon with authentication on, seeded with rows before the campaign, for
the fuzz tests; after them the rows are checked intact and the server up and serving.

The fuzzing user may read the seeded table and change only its playground, so a statement
the strategies happen to build (DROP TABLE, DELETE) cannot touch the seed: every input still
reaches the parser, the planner and the authorisation check.

Examples per test: ``GNOMON_FUZZ_EXAMPLES`` (default :data:`DEFAULT_EXAMPLES`, seeded, so a
run is repeatable); the long run sets it to 100000.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from testkit.procs import free_port
from tests.fuzz.strategies import PLAYGROUND, SEED
from tests.security.conftest import admin
from tests.server.conftest import Running, start_standalone

#: What the suite asks per interface (the campaigns share the suite's ten minutes on two cores;
#: GNOMON_FUZZ_EXAMPLES=100000 is a long run).
DEFAULT_EXAMPLES = 1000
EXAMPLES = int(os.environ.get("GNOMON_FUZZ_EXAMPLES", DEFAULT_EXAMPLES))
FUZZER = ("fuzzer", "fuzzer-password")
ROOT = ("root", "root-password")
SEED_ROWS = [{"host": f"h{i % 7}", "v": i * 0.5, "ts": 1_700_000_000_000 + i} for i in range(200)]
CREATE = (
    "CREATE TABLE {} (host string TAG, v double, ts timestamp NOT NULL, TIMESTAMP KEY(ts)) "
    "ENGINE=Analytic"
)

#: Seeded examples, no deadline (a query may take a while), no example database.
FUZZ = settings(
    max_examples=EXAMPLES,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def sql_as(running: Running, auth: str, query: str) -> tuple[int, dict[str, Any]]:
    status, _, body = running.request(
        "POST",
        "/sql",
        json.dumps({"query": query}).encode(),
        {"Content-Type": "application/json", "Authorization": auth},
    )
    return status, json.loads(body)


@pytest.fixture(scope="session")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Running, int]]:
    """The server and its Flight port; the seed is checked intact when the session ends."""
    root = tmp_path_factory.mktemp("fuzz")
    data = root / "data"
    admin(data, "users", "create", ROOT[0], "--password", ROOT[1], "--superuser")
    admin(data, "users", "create", FUZZER[0], "--password", FUZZER[1])
    admin(data, "grants", "add", FUZZER[0], "read", "--table", SEED)
    admin(data, "grants", "add", FUZZER[0], "admin", "--table", PLAYGROUND)
    running = start_standalone(
        data,
        root / "server.log",
        *("--auth", "true", "--query-timeout-s", "20", "--pg-port", str(free_port())),
    )
    try:
        for table in (SEED, PLAYGROUND):
            status, body = sql_as(running, basic(*ROOT), CREATE.format(table))
            assert status == 200, body
        values = ", ".join(f"('{r['host']}', {r['v']}, {r['ts']})" for r in SEED_ROWS)
        status, body = sql_as(
            running, basic(*ROOT), f"INSERT INTO {SEED} (host, v, ts) VALUES {values}"
        )
        assert status == 200, body
        yield running, running.flight_port
        # The campaign is over: the server still serves, logged no failure of its own (an
        # internal error on any interface is logged at ERROR), and the seed is as it was.
        assert running.server.proc.poll() is None, "the server died during the fuzz campaign"
        failures = [x for x in running.server.log.read_text().splitlines() if '"ERROR"' in x]
        assert not failures, failures[:5]
        assert running.request("GET", "/health")[0] == 200
        status, body = sql_as(running, basic(*ROOT), f"SELECT host, v, ts FROM {SEED} ORDER BY ts")
        assert status == 200, body
        assert [{"host": r["host"], "v": r["v"], "ts": r["ts"]} for r in body["rows"]] == SEED_ROWS
    finally:
        running.server.stop()


@pytest.fixture(scope="session")
def server(target: tuple[Running, int]) -> Running:
    return target[0]


@pytest.fixture(scope="session")
def pg_port(server: Running) -> int:
    """The server's PostgreSQL protocol port, as its ports file says."""
    log = server.server.log
    return int(json.loads(log.with_name(f"{log.name}.ports.json").read_text())["pg"])


def assert_serving(running: Running) -> None:
    """The server is alive and answers a query after an input."""
    assert running.server.proc.poll() is None, "the server died"
    status, body = sql_as(running, basic(*FUZZER), f"SELECT count(*) AS n FROM {SEED}")
    assert (status, body["rows"]) == (200, [{"n": len(SEED_ROWS)}]), body
