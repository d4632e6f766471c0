"""Fixtures of the partition table tests: a real standalone server for the write paths."""

from tests.server.conftest import gnomon

__all__ = ["gnomon"]
