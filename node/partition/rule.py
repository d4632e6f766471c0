"""Which sub-table of a partition table holds a row: ``PARTITION BY KEY(k1, ...) PARTITIONS n``.

The partition of a row is ``tsid_of(key columns) mod n``: the series-id hash of
:mod:`node.engine.tsid` computed over the key columns alone, in the order the KEY clause names
them (blake2b of each value with its column's name, mixed in 64 bits; a null leaves the hash
as it is). The series id is a storage contract already (it is stored with every row), so this
hash never changes between versions or processes, and every writer (gRPC, line protocol, SQL
INSERT, on any node) computes it the same way. Key columns are string TAG columns, as in
HoraeDB, so a key is known from a write's tags alone.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from gnomon.errors import InvalidArgument
from node.engine.bounds import Range
from node.engine.schema import ColumnType, Schema
from node.engine.tsid import tsid_of

#: Most key combinations an ``=``/``IN`` filter is expanded to when pruning; a larger product
#: reads every sub-table.
MAX_PRUNE_COMBINATIONS = 4096


@dataclass(frozen=True)
class KeyRule:
    columns: tuple[str, ...]
    partitions: int

    def check(self, table: str, schema: Schema) -> None:
        """InvalidArgument unless the key names distinct string TAG columns of ``schema``."""
        if not self.columns:
            raise InvalidArgument(f"table {table!r}: PARTITION BY KEY needs at least one column")
        if len(set(self.columns)) != len(self.columns):
            raise InvalidArgument(f"table {table!r}: PARTITION BY KEY repeats a column")
        for name in self.columns:
            if not schema.has_column(name):
                raise InvalidArgument(
                    f"table {table!r}: partition key column {name!r} is not a column"
                )
            column = schema.column(name)
            if not column.is_tag or column.type is not ColumnType.STRING:
                raise InvalidArgument(
                    f"table {table!r}: partition key column {name!r} must be a string TAG "
                    f"column (it is {'a TAG' if column.is_tag else 'a field'} of type "
                    f"{column.type.value})"
                )

    def of(self, columns: Mapping[str, pa.Array[Any] | pa.ChunkedArray[Any]], n: int) -> np.ndarray:
        """The partition of each of ``n`` rows whose key values are ``columns`` (a key column
        left out is null in every row)."""
        arrays: dict[str, pa.Array[Any]] = {}
        for name in self.columns:
            values = columns.get(name)
            if values is None:
                arrays[name] = pa.nulls(n, pa.string())
            elif isinstance(values, pa.ChunkedArray):
                arrays[name] = values.combine_chunks()
            else:
                arrays[name] = values
            if pa.types.is_dictionary(arrays[name].type):
                arrays[name] = arrays[name].cast(pa.string())
        hashes = tsid_of(arrays, self.columns, n).to_numpy(zero_copy_only=False)
        return (hashes % np.uint64(self.partitions)).astype(np.int64)

    def prune(self, bounds: Mapping[str, Range]) -> list[int] | None:
        """The partitions that may hold rows within ``bounds`` (necessary conditions of a
        query's WHERE clause), or None when every one may: only a finite set of values on
        every key column (``=``, ``IN``) narrows them."""
        sets: list[Sequence[Any]] = []
        for name in self.columns:
            r = bounds.get(name)
            if r is None or r.values is None:
                return None
            sets.append(sorted(v for v in r.values if isinstance(v, str)))
        combos = 1
        for s in sets:
            combos *= len(s)
        if combos > MAX_PRUNE_COMBINATIONS:
            return None
        if combos == 0:
            return []
        rows = list(itertools.product(*sets))
        columns = {
            name: pa.array([row[i] for row in rows], pa.string())
            for i, name in enumerate(self.columns)
        }
        return sorted({int(p) for p in self.of(columns, len(rows))})

    def groups(self, partition: np.ndarray) -> dict[int, np.ndarray]:
        """Row indices by partition, each in row order."""
        if len(partition) == 0:
            return {}
        order = np.argsort(partition, kind="stable")
        ordered = partition[order]
        cuts = np.flatnonzero(np.diff(ordered)) + 1
        starts = np.concatenate(([0], cuts))
        return {
            int(ordered[s]): rows for s, rows in zip(starts, np.split(order, cuts), strict=True)
        }
