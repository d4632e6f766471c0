"""Fixtures shared by several test packages, and how the test process ends."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest

from testkit.etcd import EtcdServer

_exit_status: list[int] = []

#: What a test module's tests run against, one per module (its ``pytestmark``; the markers
#: are described in pyproject.toml): ``pytest -m unit`` is the quick tier, ``make test`` runs
#: every tier.
TIERS = ("unit", "integration", "cluster")

# The servers tests start leave the PostgreSQL protocol off unless a test turns it on
# (--pg-port): several of them at once would contend for its one default port.
os.environ.setdefault("GNOMON_PG_PORT", "0")


@pytest.fixture(scope="module")
def etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdServer]:
    """A real single-member etcd on loopback, shared by the tests of one module."""
    server = EtcdServer(tmp_path_factory.mktemp("etcd"))
    server.start()
    yield server
    server.stop()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Refuse a test that names no tier or several: the tiers select what a run covers."""
    wrong = sorted(
        {
            item.nodeid.split("::")[0]
            for item in items
            if len({m.name for m in item.iter_markers() if m.name in TIERS}) != 1
        }
    )
    if wrong:
        message = (
            f"test modules must name exactly one tier of {', '.join(TIERS)} "
            f"(pytestmark = pytest.mark.<tier>): {', '.join(wrong)}"
        )
        # Said here too: the process ends without the interpreter's finalisation (below),
        # before pytest would print a usage error.
        print(message, file=sys.stderr)
        raise pytest.UsageError(message)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _exit_status.append(int(exitstatus))


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """End the process with the session's status once pytest has reported, without the
    interpreter's finalisation: the suite runs native libraries in this process (Spark's
    gateway, Ray's driver, Arrow Flight and gRPC clients, DataFusion) whose threads may still
    be inside a call then, and one calling back into a finalising interpreter crashes it,
    turning a passing run into a failed one after the last test (as gnomon's servers and the
    SDK scenarios already end with ``os._exit`` for the same reason)."""
    if _exit_status:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(_exit_status[-1])
