"""ClickHouse in the benchmark's process through chDB: a MergeTree table ordered by
(hostname, timestamp), declared as a ClickHouse user would (columns not nullable, tags
``LowCardinality(String)``, times ``DateTime64(3, 'UTC')``), loaded in one ``INSERT`` from the
Arrow table and queried in TSBS's ClickHouse forms (:mod:`queries`).

chDB runs one session per process at a time: a repetition's copy is closed before the next
one is loaded.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa

from bench.tsbs.cpu_only import FIELDS, TAGS
from bench.tsbs.system import Dialect, Workload, python_unavailable

if TYPE_CHECKING:
    from chdb.session import Session

DATABASE = "bench"
_COLUMNS = ", ".join(
    [
        "timestamp DateTime64(3, 'UTC')",
        *(f"{t} LowCardinality(String)" for t in TAGS),
        *(f"{f} Float64" for f in FIELDS),
    ]
)


class Chdb:
    """A chDB session holding the ``cpu`` table under ``root``."""

    name = "chdb"
    pids: tuple[int, ...] = ()

    def __init__(self, session: Session) -> None:
        self.session = session

    def query(self, sql: str) -> pa.Table:
        """The answer as Arrow. ClickHouse writes a ``DateTime`` (what ``toStartOfHour`` and
        the like return) as uint32 seconds; no other column of these answers is uint32, so
        such a column is read back as the timestamps it holds, as a ClickHouse client
        knowing the column's type would."""
        answer: pa.Table = self.session.query(sql, "ArrowTable")
        for i, f in enumerate(answer.schema):
            if pa.types.is_uint32(f.type):
                seconds = answer.column(i).cast(pa.int64()).cast(pa.timestamp("s", tz="UTC"))
                answer = answer.set_column(i, f.name, seconds)
        return answer

    def stored_rows(self) -> int:
        return int(self.query("SELECT count() FROM cpu").column(0)[0].as_py())

    def disk_bytes(self) -> int:
        """The bytes of the table's active parts (the session's own logs and metadata are not
        the data's)."""
        parts = self.query(
            "SELECT sum(bytes_on_disk) FROM system.parts "
            f"WHERE active AND database = '{DATABASE}' AND table = 'cpu'"
        )
        return int(parts.column(0)[0].as_py() or 0)

    def peak_rss(self) -> int | None:
        return None

    def stop(self) -> None:
        self.session.close()


class ChdbKind:
    name = "chdb"
    dialect: Dialect | None = "clickhouse"
    loaders = ("chdb",)
    encodings: tuple[str, ...] = ()

    def unavailable(self) -> str | None:
        return python_unavailable("chdb")

    def install(self) -> None:
        """Nothing: chdb is a development dependency."""

    def load(self, loader: str, where: Path, work: Workload) -> tuple[Chdb, float]:
        """The figure is the table's creation and the insert (ClickHouse sorts the rows into
        its part)."""
        from chdb.session import Session

        rows = work.table
        names = ", ".join(rows.column_names)
        t0 = time.perf_counter()
        session = Session(str(where))
        session.query(f"CREATE DATABASE {DATABASE}")
        session.query(f"USE {DATABASE}")
        session.query(
            f"CREATE TABLE cpu ({_COLUMNS}) ENGINE = MergeTree ORDER BY (hostname, timestamp)"
        )
        # chDB's Python() table function reads the local variable ``rows`` by its name.
        session.query(f"INSERT INTO cpu ({names}) SELECT {names} FROM Python(rows)")
        return Chdb(session), time.perf_counter() - t0

    def settle(self, system: Chdb, quiet_s: float) -> Chdb:
        """Parts merged: ``OPTIMIZE ... FINAL`` does at once what background merges would."""
        system.session.query("OPTIMIZE TABLE cpu FINAL")
        return system
