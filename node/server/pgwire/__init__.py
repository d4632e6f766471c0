"""gnomon's PostgreSQL wire protocol server (see README.md)."""

from node.server.pgwire.server import PgServer

__all__ = ["PgServer"]
