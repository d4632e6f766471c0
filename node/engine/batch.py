"""Turning what a client writes into a batch of the table's exact schema.

Checks happen before anything is logged, so a rejected write changes nothing: unknown columns,
missing NOT NULL columns, nulls in NOT NULL columns and values that do not convert safely to the
column type are errors naming the column.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from gnomon.errors import SchemaMismatch, TooLarge
from node.engine import defaults
from node.engine.schema import DICTIONARY_TAG, TSID, Schema, repeat
from node.engine.tsid import KnownSeries, tsid_of


def as_record_batch(data: pa.RecordBatch | pa.Table) -> pa.RecordBatch:
    if isinstance(data, pa.RecordBatch):
        return data
    if isinstance(data, pa.Table):
        batches = data.to_batches()
        if len(batches) == 1:
            return batches[0]  # one chunk per column already: nothing to combine
        table = data.combine_chunks()
        batches = table.to_batches()
        if not batches:
            return pa.RecordBatch.from_pylist([], schema=table.schema)
        return batches[0]
    raise SchemaMismatch(f"expected a pyarrow RecordBatch or Table, got {type(data).__name__}")


def conform(
    table: str,
    schema: Schema,
    data: pa.RecordBatch | pa.Table,
    *,
    max_bytes: int,
    dictionary: Sequence[str] = (),
    tsid: bool = True,
    series: KnownSeries | None = None,
) -> pa.RecordBatch:
    """``data`` as a batch of ``schema.arrow()``, tsid computed (from ``series`` when its
    writer numbered the rows' series; without ``tsid``, a batch only checked: its tsid
    column is nulls); raises SchemaMismatch. The
    string tags named in ``dictionary`` come dictionary encoded (``DICTIONARY_TAG``), in the
    encoding the tsid is computed from, so a caller sorting and storing the rows need not
    move or hash their strings again."""
    batch = as_record_batch(data)
    # The whole buffers bound the bytes the batch reaches, and cost nothing to add up.
    if batch.get_total_buffer_size() > max_bytes and batch.nbytes > max_bytes:
        raise TooLarge(
            f"table {table!r}: write of {batch.nbytes} bytes exceeds the limit of {max_bytes}; "
            "split it into smaller batches"
        )
    given = batch.schema.names
    position = {name: i for i, name in enumerate(given)}
    if len(position) != len(given):
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
    has_tsid = schema.has_tsid
    arrays: dict[str, pa.Array[Any]] = {}
    for col in schema.columns:
        if has_tsid and col.name == TSID:
            continue  # computed below, once the tags are cast
        target: Any = col.type.arrow()
        i = position.get(col.name)
        if i is not None:
            arr = batch.column(i)
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
        elif col.default_expr is not None:
            try:
                arr = defaults.evaluate(col.default_expr, arrays, n, target)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
                raise SchemaMismatch(
                    f"table {table!r}, column {col.name!r}: DEFAULT {col.default_expr}: {e}"
                ) from None
        elif not col.nullable:
            raise SchemaMismatch(f"table {table!r}: missing value for NOT NULL column {col.name!r}")
        else:
            arr = pa.nulls(n, target)
        if not col.nullable and arr.null_count:
            raise SchemaMismatch(
                f"table {table!r}: column {col.name!r} is NOT NULL but {arr.null_count} "
                "values are null"
            )
        arrays[col.name] = arr
    for name in dictionary:
        arrays[name] = pc.dictionary_encode(arrays[name])
    if has_tsid and not tsid:
        arrays[TSID] = pa.nulls(n, pa.uint64())
    elif has_tsid and series is not None:
        arrays[TSID] = series.tsids(schema.tags, untagged_zero=schema.untagged_tsid_zero)
    elif has_tsid:
        # The tsid's encoding of a tag already dictionary encoded is that encoding itself.
        arrays[TSID] = tsid_of(arrays, schema.tags, n, untagged_zero=schema.untagged_tsid_zero)
    out = schema.arrow()
    if dictionary:
        out = pa.schema([f.with_type(DICTIONARY_TAG) if f.name in dictionary else f for f in out])
    return pa.RecordBatch.from_arrays([arrays[name] for name in schema.names], schema=out)


def key_columns_of_delete(schema: Schema) -> list[str]:
    """What a row deletion names: the primary key, with the tags in place of an implicit
    tsid (which is computed from them, as on write)."""
    if schema.has_tsid:
        return [*schema.tags, *(k for k in schema.primary_key if k != TSID)]
    return list(schema.primary_key)


def conform_keys(
    table: str, schema: Schema, data: pa.RecordBatch | pa.Table, *, max_bytes: int
) -> pa.RecordBatch:
    """The keys of a row deletion as a batch of :func:`key_columns_of_delete` (plus the
    computed tsid); raises SchemaMismatch when a key column is missing or does not convert."""
    batch = as_record_batch(data)
    wanted = key_columns_of_delete(schema)
    missing = [c for c in wanted if c not in batch.schema.names]
    if missing:
        raise SchemaMismatch(f"table {table!r}: a row deletion needs the columns {missing}")
    key_schema = Schema.build(
        [schema.column(c) for c in wanted if c != TSID],
        timestamp_key=schema.timestamp_key,
        primary_key=None if schema.has_tsid else list(schema.primary_key),
        tsid_version=schema.tsid_version,
    )
    return conform(table, key_schema, batch.select(wanted), max_bytes=max_bytes)


def deletion_markers(schema: Schema, keys: pa.RecordBatch) -> pa.RecordBatch:
    """Rows of ``schema`` that carry the deleted keys; the other columns hold fill values
    (the markers are never read as data)."""
    n = keys.num_rows
    names = keys.schema.names
    arrays = [
        keys.column(c.name) if c.name in names else repeat(schema.fill_value(c.name), n)
        for c in schema.columns
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=schema.arrow())
