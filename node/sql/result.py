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

    #: The rows, kept as the table they were answered in (cut into batches only when asked).
    answer: pa.Table | None = None
    affected_rows: int | None = None
    #: The engine scans a query ran (pruning figures), for EXPLAIN and tests.
    scans: list[Any] = field(default_factory=list)
    #: DataFusion's own name of each column gnomon named by its SELECT item's text
    #: (:mod:`node.sql.naming`).
    expressions: dict[str, str] = field(default_factory=dict)

    @property
    def is_query(self) -> bool:
        return self.answer is not None

    @property
    def schema(self) -> pa.Schema | None:
        return None if self.answer is None else self.answer.schema

    @property
    def batches(self) -> list[pa.RecordBatch]:
        return [] if self.answer is None else self.answer.to_batches()

    @classmethod
    def rows(cls, table: pa.Table) -> QueryResult:
        return cls(answer=table)

    @classmethod
    def affected(cls, n: int) -> QueryResult:
        return cls(affected_rows=n)

    def table(self) -> pa.Table:
        assert self.answer is not None, "not a query result"
        return self.answer

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        return iter(self.batches)
