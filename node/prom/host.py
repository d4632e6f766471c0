"""What the Prometheus endpoints need from the server that carries them (an HttpApp is one)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from gnomon.metrics import Registry
from node.ingest.rows import TableRows
from node.prom.metric_rows import SeriesCache
from node.sql.cancel import Queries
from node.sql.result import QueryResult


class Ingests(Protocol):
    def write_all(self, tables: Sequence[TableRows]) -> int: ...


class PromHost(Protocol):
    """The ingestor writes go through (on a cluster, one that sends rows to their tables'
    owners), the SQL reads go through, and the server's limits and metrics."""

    @property
    def ingestor(self) -> Ingests: ...

    @property
    def execute(self) -> Callable[[str], QueryResult]: ...

    @property
    def max_body_bytes(self) -> int: ...

    @property
    def metrics(self) -> Registry: ...

    @property
    def queries(self) -> Queries: ...

    @property
    def series_cache(self) -> SeriesCache: ...
