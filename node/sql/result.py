"""What executing one SQL statement returns."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa


@dataclass
class QueryResult:
    """Either rows (a query: SELECT, SHOW, DESCRIBE, EXPLAIN) or an affected-row count
    (INSERT, DELETE, DDL)."""

    schema: pa.Schema | None = None
    batches: list[pa.RecordBatch] = field(default_factory=list)
    affected_rows: int | None = None
    #: The engine scans a query ran (pruning figures), for EXPLAIN and tests.
    scans: list[Any] = field(default_factory=list)

    @property
    def is_query(self) -> bool:
        return self.schema is not None

    @classmethod
    def rows(cls, table: pa.Table) -> QueryResult:
        return cls(schema=table.schema, batches=table.to_batches())

    @classmethod
    def affected(cls, n: int) -> QueryResult:
        return cls(affected_rows=n)

    def table(self) -> pa.Table:
        assert self.schema is not None, "not a query result"
        return pa.Table.from_batches(self.batches, schema=self.schema)

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        return iter(self.batches)
