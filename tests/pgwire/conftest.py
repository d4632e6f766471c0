"""A real standalone gnomon serving the PostgreSQL protocol on a free port, with one table
of every type the protocol maps, to query with unmodified clients."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from testkit.procs import free_port
from tests.server.conftest import Running, start_standalone

DDL = (
    "CREATE TABLE cpu (ts TIMESTAMP NOT NULL, host STRING TAG, usage DOUBLE, cores BIGINT, "
    "up BOOLEAN, TIMESTAMP KEY(ts)) ENGINE=Analytic"
)
INSERT = (
    "INSERT INTO cpu (ts, host, usage, cores, up) VALUES "
    "(1700000000000, 'a', 1.5, 4, true), (1700000001000, 'b', 2.25, 8, false), "
    "(1700000002000, 'c', NULL, 16, true)"
)


@dataclass
class PgRunning:
    running: Running
    pg_port: int

    def http_rows(self, query: str) -> list[dict[str, Any]]:
        status, body = self.running.sql(query)
        assert status == 200, body
        return body["rows"]  # type: ignore[no-any-return]


def start(root: Path, *extra: str) -> PgRunning:
    """A standalone server on ``root`` with its PostgreSQL port on a free one."""
    running = start_standalone(
        root / "data", root / "server.log", "--pg-port", str(free_port()), *extra
    )
    return PgRunning(running, _ports(root))


def psql(
    pg: PgRunning, *commands: str, user: str = "gnomon", password: str = ""
) -> subprocess.CompletedProcess[str]:
    """Run psql, unmodified, with ``commands`` (each a -c) against ``pg``."""
    argv = ["psql", "-X", "-h", "127.0.0.1", "-p", str(pg.pg_port), "-U", user, "-d", "gnomon"]
    for c in commands:
        argv += ["-c", c]
    env = {**os.environ, "PGPASSWORD": password, "PGCONNECT_TIMEOUT": "10"}
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env)


def _ports(root: Path) -> int:
    return int(json.loads((root / "server.log.ports.json").read_text())["pg"])


@pytest.fixture(scope="module")
def pg(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PgRunning]:
    server = start(tmp_path_factory.mktemp("pgwire"))
    for statement in (DDL, INSERT):
        status, body = server.running.sql(statement)
        assert status == 200, body
    yield server
    server.running.server.stop()
