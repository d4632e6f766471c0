"""Real servers for integration tests (the same process handling `gnomon dev-cluster` uses)."""

from gnomon_app.devcluster.procs import PortTaken, Server, free_port, on_free_ports

__all__ = ["PortTaken", "Server", "free_port", "on_free_ports"]
