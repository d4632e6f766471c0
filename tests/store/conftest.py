"""Fixtures of every store test module, built from the module's own ``store_opener`` (see
``conformance.py``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gnomon.store.api import StructuredStore

# The suite's asserts live in another module: have pytest rewrite them for readable failures.
pytest.register_assert_rewrite(f"{__package__}.conformance")

from .conformance import StoreFactory, StoreOpener  # noqa: E402


@pytest.fixture
def store_factory(store_opener: StoreOpener) -> Iterator[StoreFactory]:
    """Opens handles with ``store_opener`` and closes them all after the test."""
    opened: list[StructuredStore] = []

    def factory(name: str = "main") -> StructuredStore:
        store = store_opener(name)()
        opened.append(store)
        return store

    yield factory
    for store in opened:
        store.close()


@pytest.fixture
def store(store_factory: StoreFactory) -> StructuredStore:
    return store_factory()
