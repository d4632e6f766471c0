"""Prepared statements and portals: a statement's text and parameter types, a portal's
rows and how far a client has fetched them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pyarrow as pa

from gnomon.errors import InvalidArgument
from node.server.pgwire import messages, types


@dataclass
class Prepared:
    sql: str
    #: The type of each parameter (0: unspecified, taken as text).
    param_types: list[int]


@dataclass
class Portal:
    """A bound statement; ``rows``/``tag`` are set once it has run."""

    sql: str
    #: Result formats as Bind gave them: none (all text), one for all, or one per column.
    formats: Sequence[int] = ()
    tag: str | None = None
    rows: pa.Table | None = None
    sent: int = 0
    _encoded: list[list[bytes | None]] | None = field(default=None, repr=False)

    @property
    def ran(self) -> bool:
        return self.tag is not None

    def format_of(self, column: int) -> int:
        if not self.formats:
            return 0
        if len(self.formats) == 1:
            return self.formats[0]
        if column >= len(self.formats):
            raise InvalidArgument(
                f"bind message has {len(self.formats)} result formats but the query has more "
                "columns"
            )
        return self.formats[column]

    def description(self) -> bytes:
        """RowDescription of the rows, or NoData for a statement without any."""
        if self.rows is None:
            return messages.NO_DATA
        return describe(self.rows.schema, [self.format_of(i) for i in range(len(self.rows.schema))])

    def take(self, most: int) -> list[bytes]:
        """DataRow messages of the next ``most`` rows (0: all the rest)."""
        if self.rows is None:
            return []
        if self._encoded is None:
            self._encoded = encode_rows(
                self.rows, [self.format_of(i) for i in range(len(self.rows.schema))]
            )
        end = len(self._encoded) if most <= 0 else min(self.sent + most, len(self._encoded))
        out = [messages.data_row(r) for r in self._encoded[self.sent : end]]
        self.sent = end
        return out

    def fetch(self, most: int | None) -> pa.Table:
        """The next ``most`` rows (None: all the rest) as a table, for FETCH."""
        rows = self.rows if self.rows is not None else pa.table({})
        end = rows.num_rows if most is None else min(self.sent + most, rows.num_rows)
        taken = rows.slice(self.sent, end - self.sent)
        self.sent = end
        return taken

    @property
    def exhausted(self) -> bool:
        return self.rows is None or self.sent >= self.rows.num_rows


def describe(schema: pa.Schema, formats: Sequence[int]) -> bytes:
    fields = []
    for f, fmt in zip(schema, formats, strict=True):
        t = types.pg_type(f.type)
        fields.append((f.name, t.oid, t.size, fmt))
    return messages.row_description(fields)


def encode_rows(table: pa.Table, formats: Sequence[int]) -> list[list[bytes | None]]:
    columns = []
    for column, fmt in zip(table.columns, formats, strict=True):
        if fmt == 1:
            encode = types.pg_type(column.type).binary
            columns.append([None if v is None else encode(v) for v in column.to_pylist()])
        else:
            columns.append(types.text_values(column))
    return [list(row) for row in zip(*columns, strict=True)] if columns else []
