"""DuckDB in the benchmark's process, two ways: its own table in a database file (what a user
who picks DuckDB runs) and a view over a Parquet file written by pyarrow.

Both hold the rows sorted by (hostname, timestamp), as gnomon's SSTs sort by series then time
(DuckDB's zone maps then skip what a host filter rules out). The Parquet file has one row group
per host (host filters read only their groups), tags dictionary-encoded, floats
BYTE_STREAM_SPLIT without dictionary, zstd: both smaller and faster to write than pyarrow's
defaults, so DuckDB gets a strong layout to beat. The table keeps DuckDB's own types (tags
VARCHAR, which it compresses by dictionary itself).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from bench.tsbs.cpu_only import FIELDS, TAGS
from bench.tsbs.system import Dialect, Workload, python_unavailable


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
    """An in-process DuckDB answering over ``cpu``, its data in the file ``data``."""

    pids: tuple[int, ...] = ()

    def __init__(self, name: str, con: duckdb.DuckDBPyConnection, data: Path) -> None:
        self.name = name
        self.con = con
        self.data = data

    def query(self, sql: str) -> pa.Table:
        answer: pa.Table = self.con.sql(sql).to_arrow_table()
        return answer

    def stored_rows(self) -> int:
        return int(self.query("SELECT count(*) FROM cpu").column(0)[0].as_py())

    def disk_bytes(self) -> int:
        return os.path.getsize(self.data)

    def peak_rss(self) -> int | None:
        return None

    def stop(self) -> None:
        self.con.close()


class _InProcess:
    """What both DuckDB variants share: one loader named as the system, no request bodies,
    nothing to settle."""

    name: str
    dialect: Dialect | None = "duckdb"
    encodings: tuple[str, ...] = ()

    @property
    def loaders(self) -> tuple[str, ...]:
        return (self.name,)

    def unavailable(self) -> str | None:
        return python_unavailable("duckdb")

    def install(self) -> None:
        """Nothing: duckdb is a development dependency."""

    def settle(self, system: DuckDb, quiet_s: float) -> DuckDb:
        return system


class DuckNative(_InProcess):
    """The rows loaded into a DuckDB table; the figure is the sorted insert and a checkpoint
    (the table on disk)."""

    name = "duckdb"

    def load(self, loader: str, where: Path, work: Workload) -> tuple[DuckDb, float]:
        where.mkdir(parents=True)
        path = where / "cpu.duckdb"
        rows = work.table
        t0 = time.perf_counter()
        con = duckdb.connect(str(path))
        con.register("batch", rows)
        con.execute("CREATE TABLE cpu AS SELECT * FROM batch ORDER BY hostname, timestamp")
        con.unregister("batch")
        con.execute("CHECKPOINT")
        return DuckDb(self.name, con, path), time.perf_counter() - t0


class DuckParquet(_InProcess):
    """A view over the Parquet file; the figure is pyarrow's sort and write."""

    name = "duckdb-parquet"

    def load(self, loader: str, where: Path, work: Workload) -> tuple[DuckDb, float]:
        where.mkdir(parents=True)
        path = where / "cpu.parquet"
        t0 = time.perf_counter()
        write_parquet(work.table, path, hosts=work.hosts)
        seconds = time.perf_counter() - t0
        con = duckdb.connect()
        con.execute(f"CREATE VIEW cpu AS SELECT * FROM read_parquet('{path}')")
        return DuckDb(self.name, con, path), seconds
