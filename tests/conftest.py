"""Fixtures shared by several test packages."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.etcd import EtcdServer


@pytest.fixture(scope="module")
def etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdServer]:
    """A real single-member etcd on loopback, shared by the tests of one module."""
    server = EtcdServer(tmp_path_factory.mktemp("etcd"))
    server.start()
    yield server
    server.stop()
