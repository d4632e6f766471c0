"""Rows on their way into a table, held column by column.

Both write protocols (HoraeDB's gRPC Write and InfluxDB line protocol) decode into
:class:`TableRows`: one Python list per column, filled as the request is read, then turned into
one Arrow array per column in a single call. Rows never pass through the engine one at a time.
"""

from __future__ import annotations

from array import array
from collections.abc import MutableSequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from gnomon.errors import InvalidArgument
from node.engine.plain import PlainRows
from node.engine.schema import ColumnType
from node.engine.tsid import KnownSeries


@dataclass
class ColumnValues:
    """One tag or field column of a write: its kind, fixed by the first value seen, and one
    value per row (None where a row does not set it)."""

    name: str
    is_tag: bool
    type: ColumnType
    values: list[Any] = field(default_factory=list)
    #: The whole column as an Arrow array of its type, when a vectorised decoder built it
    #: (``values`` is then unused).
    built: pa.Array[Any] | None = None

    def put(self, row: int, value: Any) -> None:
        """Set the value of ``row``; a later value for the same row replaces an earlier one."""
        values = self.values
        n = len(values)
        if n == row:
            values.append(value)
        elif n > row:
            values[row] = value
        else:
            values.extend([None] * (row - n))
            values.append(value)

    def fill(self, start: int, count: int, value: Any) -> None:
        """Set rows ``start`` .. ``start + count - 1`` to ``value`` (a series' tag)."""
        values = self.values
        n = len(values)
        if n < start:
            values.extend([None] * (start - n))
        elif n > start:
            del values[start:]
        values.extend([value] * count)

    def array(self, num_rows: int) -> pa.Array[Any]:
        if self.built is not None:
            return self.built
        values = self.values
        if len(values) < num_rows:
            values.extend([None] * (num_rows - len(values)))
        try:
            return pa.array(values, type=self.type.arrow())
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as e:
            raise InvalidArgument(
                f"column {self.name!r}: values do not fit type {self.type.value}: {e}"
            ) from None


class TableRows:
    """The rows a request writes to one table: timestamps in milliseconds plus tag and field
    columns. A name is either a tag or a field, and has one value type, within a request."""

    def __init__(self, table: str) -> None:
        self.table = table
        #: A list, or a typed array ("q") that becomes Arrow's without a conversion.
        self.timestamps: MutableSequence[int] = []
        self.columns: dict[str, ColumnValues] = {}
        #: The rows' series, when the reader numbered them (their tsids are hashed once per
        #: series); rows made from these rows in another order must leave it behind.
        self.series: KnownSeries | None = None

    @property
    def num_rows(self) -> int:
        return len(self.timestamps)

    def column(self, name: str, *, is_tag: bool, type: ColumnType) -> ColumnValues:
        """The column ``name``, created on first use; an error if the request already used
        the name as the other of tag/field or with another value type."""
        col = self.columns.get(name)
        if col is None:
            col = ColumnValues(name, is_tag, type)
            self.columns[name] = col
            return col
        if col.is_tag != is_tag:
            raise InvalidArgument(
                f"table {self.table!r}: {name!r} is used both as a tag and as a field"
            )
        if col.type is not type:
            raise InvalidArgument(
                f"table {self.table!r}, column {name!r}: value type {type.value} differs from "
                f"{col.type.value} given earlier in the same request"
            )
        return col

    def plain(self, timestamp_key: str) -> PlainRows | None:
        """The rows as Python values (see node.engine.plain), the timestamps under
        ``timestamp_key``; None if a column was built as Arrow or holds a value that
        :meth:`arrow` would not convert as it is."""
        n = self.num_rows
        if not isinstance(self.timestamps, list):
            return None  # gathered in a typed array: the Arrow way is the cheaper
        columns = [(timestamp_key, ColumnType.TIMESTAMP, self.timestamps)]
        for name, col in self.columns.items():
            if col.built is not None:
                return None
            values = col.values
            if len(values) < n:
                values.extend([None] * (n - len(values)))
            columns.append((name, col.type, values))
        return PlainRows.of(columns)

    def arrow(self, timestamp_key: str) -> pa.Table:
        """The rows as an Arrow table: the timestamps under ``timestamp_key`` and one array
        per tag and field column."""
        n = self.num_rows
        stamps: Any = self.timestamps
        if isinstance(stamps, array):
            stamps = np.frombuffer(stamps, dtype=np.int64)
        arrays: dict[str, pa.Array[Any]] = {
            timestamp_key: pa.array(stamps, type=pa.timestamp("ms"))
        }
        for name, col in self.columns.items():
            try:
                arrays[name] = col.array(n)
            except InvalidArgument as e:
                raise InvalidArgument(f"table {self.table!r}, {e.message}") from None
        return pa.table(arrays)
