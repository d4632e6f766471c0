"""DuckDB over Parquet files of the benchmark data, written by pyarrow.

Layout: one file, rows sorted by (hostname, timestamp) as gnomon's SSTs sort by series then
time, one row group per host (host filters then read only their groups), tags
dictionary-encoded, floats BYTE_STREAM_SPLIT without dictionary, zstd. That is both smaller
and faster to write than pyarrow's defaults, so DuckDB gets a strong layout to beat.
"""

from __future__ import annotations

import os
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from bench.tsbs.cpu_only import FIELDS, TAGS


def write_parquet(table: pa.Table, path: Path, *, hosts: int) -> None:
    ordered = table.sort_by([("hostname", "ascending"), ("timestamp", "ascending")])
    pq.write_table(
        ordered,
        path,
        row_group_size=max(1, ordered.num_rows // max(1, hosts)),
        compression="zstd",
        use_dictionary=TAGS,
        column_encoding=dict.fromkeys(FIELDS, "BYTE_STREAM_SPLIT"),
    )


class DuckDb:
    """An in-process DuckDB with a ``cpu`` view over one Parquet file."""

    name = "duckdb"

    def __init__(self, parquet: Path) -> None:
        self.parquet = parquet
        self.con = duckdb.connect()
        self.con.execute(f"CREATE VIEW cpu AS SELECT * FROM read_parquet('{parquet}')")

    def query(self, sql: str) -> pa.Table:
        return self.con.sql(sql).to_arrow_table()

    def disk_bytes(self) -> int:
        return os.path.getsize(self.parquet)

    def stop(self) -> None:
        self.con.close()
