"""Real servers for integration tests (the same process handling `gnomon dev-cluster` uses)."""

from gnomon.devcluster.procs import Server, free_port, wait_for_port

__all__ = ["Server", "free_port", "wait_for_port"]
