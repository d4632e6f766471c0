"""Turning what a client writes into a batch of the table's exact schema.

Checks happen before anything is logged, so a rejected write changes nothing: unknown columns,
missing NOT NULL columns, nulls in NOT NULL columns and values that do not convert safely to the
column type are errors naming the column.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from gnomon.errors import SchemaMismatch, TooLarge
from node.engine.schema import TSID, Schema
from node.engine.tsid import compute_tsid


def as_record_batch(data: pa.RecordBatch | pa.Table) -> pa.RecordBatch:
    if isinstance(data, pa.RecordBatch):
        return data
    if isinstance(data, pa.Table):
        table = data.combine_chunks()
        batches = table.to_batches()
        if not batches:
            return pa.RecordBatch.from_pylist([], schema=table.schema)
        return batches[0]
    raise SchemaMismatch(f"expected a pyarrow RecordBatch or Table, got {type(data).__name__}")


def conform(
    table: str, schema: Schema, data: pa.RecordBatch | pa.Table, *, max_bytes: int
) -> pa.RecordBatch:
    """``data`` as a batch of ``schema.arrow()``, tsid computed; raises SchemaMismatch."""
    batch = as_record_batch(data)
    if batch.nbytes > max_bytes:
        raise TooLarge(
            f"table {table!r}: write of {batch.nbytes} bytes exceeds the limit of {max_bytes}; "
            "split it into smaller batches"
        )
    given = batch.schema.names
    if len(set(given)) != len(given):
        dup = sorted({n for n in given if given.count(n) > 1})
        raise SchemaMismatch(f"table {table!r}: duplicate columns {dup} in write")
    for name in given:
        if not schema.has_column(name):
            raise SchemaMismatch(f"table {table!r} has no column {name!r}")
        if name == TSID and schema.has_tsid:
            raise SchemaMismatch(
                f"table {table!r}: column {TSID!r} is computed from the tags; do not write it"
            )
    n = batch.num_rows
    arrays: list[pa.Array[Any]] = []
    for col in schema.columns:
        if col.name == TSID and schema.has_tsid:
            arrays.append(pa.nulls(n, pa.uint64()))  # replaced below, once tags are cast
            continue
        target: Any = col.type.arrow()
        if col.name in given:
            arr = batch.column(col.name)
            if arr.type != target:
                try:
                    arr = arr.cast(target, safe=True)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                    raise SchemaMismatch(
                        f"table {table!r}, column {col.name!r}: cannot convert {arr.type} to "
                        f"{col.type}: {e}"
                    ) from None
        elif col.default is not None:
            arr = pa.repeat(pa.scalar(col.default, target), n)
        elif not col.nullable:
            raise SchemaMismatch(f"table {table!r}: missing value for NOT NULL column {col.name!r}")
        else:
            arr = pa.nulls(n, target)
        if not col.nullable and arr.null_count:
            raise SchemaMismatch(
                f"table {table!r}: column {col.name!r} is NOT NULL but {arr.null_count} "
                "values are null"
            )
        arrays.append(arr)
    out = pa.RecordBatch.from_arrays(arrays, schema=schema.arrow())
    if schema.has_tsid:
        idx = schema.names.index(TSID)
        out = out.set_column(idx, schema.arrow().field(idx), compute_tsid(out, schema.tags))
    return out
