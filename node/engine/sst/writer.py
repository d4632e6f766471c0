"""Writing one SST: a Parquet file of rows sorted by (primary key, seq) of one segment window.

Tags get dictionary encoding (few distinct values, long runs once sorted by series), floats
BYTE_STREAM_SPLIT, timestamps and sequences delta encoding; every column carries min/max
statistics per row group, which the read path prunes with. The file's key-value metadata names
the table, schema version and time/sequence ranges, so an SST can be understood on its own.
"""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from node.engine.options import TableOptions
from node.engine.schema import SEQ, ColumnType, Schema
from node.engine.sst.meta import SstMeta

_FLOATS = {ColumnType.DOUBLE, ColumnType.FLOAT}
_DELTA = {ColumnType.TIMESTAMP, ColumnType.INT64, ColumnType.INT32}


def _writer_options(schema: Schema, options: TableOptions) -> dict[str, object]:
    dictionary = [
        c.name
        for c in schema.columns
        if c.is_tag or c.type in (ColumnType.STRING, ColumnType.VARBINARY)
    ]
    encoding: dict[str, str] = {SEQ: "DELTA_BINARY_PACKED"}
    for c in schema.columns:
        if c.name in dictionary:
            continue
        if c.type in _FLOATS:
            encoding[c.name] = "BYTE_STREAM_SPLIT"
        elif c.type in _DELTA:
            encoding[c.name] = "DELTA_BINARY_PACKED"
    return {
        "compression": options.compression,
        "use_dictionary": dictionary,
        "column_encoding": encoding,
        "write_statistics": True,
        "write_page_index": True,
    }


def write_sst(
    rows: pa.Table,
    *,
    table_id: int,
    schema: Schema,
    options: TableOptions,
    local_path: str,
    key: str,
) -> SstMeta:
    """Write ``rows`` (storage schema, already sorted) to ``local_path``; the returned meta
    names ``key``, where the caller will store the file."""
    ts = rows.column(schema.timestamp_key).cast(pa.int64())
    min_ts, max_ts = (v.as_py() for v in pc.min_max(ts).values())
    min_seq, max_seq = (v.as_py() for v in pc.min_max(rows.column(SEQ)).values())
    kv = {
        "gnomon.table_id": str(table_id),
        "gnomon.schema_version": str(schema.version),
        "gnomon.schema": json.dumps(schema.to_json()),
        "gnomon.min_ts": str(min_ts),
        "gnomon.max_ts": str(max_ts),
        "gnomon.min_seq": str(min_seq),
        "gnomon.max_seq": str(max_seq),
    }
    rows = rows.replace_schema_metadata(kv)
    with pq.ParquetWriter(local_path, rows.schema, **_writer_options(schema, options)) as w:  # type: ignore[arg-type]
        w.write_table(rows, row_group_size=options.num_rows_per_row_group)
    return SstMeta(
        path=key,
        size=os.path.getsize(local_path),
        rows=rows.num_rows,
        min_ts=min_ts,
        max_ts=max_ts,
        min_seq=min_seq,
        max_seq=max_seq,
        schema_version=schema.version,
    )
