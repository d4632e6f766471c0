"""A real standalone gnomon with authentication on, its accounts made with the admin CLI."""

from __future__ import annotations

import base64
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from gnomon.store.api import StructuredStore
from gnomon.store.sqlite import SqliteStore
from tests.server.conftest import REPO, Running, start_standalone

ROOT = ("root", "root-password")
READER = ("reader", "reader-password")


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def admin(data_dir: Path, *args: str) -> str:
    """Run ``gnomon admin ARGS --data-dir DATA_DIR``; its stdout."""
    done = subprocess.run(
        [sys.executable, "-m", "gnomon_app.cli", "admin", *args, "--data-dir", str(data_dir)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        check=True,
    )
    return done.stdout


@dataclass
class Secured:
    running: Running
    #: A token of READER, issued before the start.
    token: str


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    root = tmp_path_factory.mktemp("secured")
    data = root / "data"
    admin(data, "users", "create", ROOT[0], "--password", ROOT[1], "--superuser")
    admin(data, "users", "create", READER[0], "--password", READER[1])
    admin(data, "grants", "add", READER[0], "read", "--table", "readable")
    token = admin(data, "tokens", "create", READER[0]).strip()
    running = start_standalone(data, root / "server.log", "--auth", "true", "--auth-cache-s", "0")
    yield Secured(running, token)
    running.server.stop()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[StructuredStore]:
    """A catalog store of the accounts, on SQLite."""
    opened = SqliteStore(str(tmp_path / "meta.db"))
    yield opened
    opened.close()
