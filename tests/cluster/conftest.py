"""Fixtures of the cluster tests; a standalone server stands in for a remote owner where
only the client side of a call is under test."""

from tests.server.conftest import gnomon

__all__ = ["gnomon"]
