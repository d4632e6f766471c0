"""Ingest throughput of the engine vs. the physical limit, side by side in one run.

gnomon: TSBS cpu-only batches written through ``Engine.write`` (WAL fsync per write, memtable,
background flush to Parquet SSTs), then a final flush, so every row ends up in Parquet.
limit: the same batches appended as Arrow IPC bytes to one file with an fsync per batch (the
same sync policy as the WAL) and written by pyarrow straight to a Parquet file.

    .venv/bin/python -m bench.engine_ingest --hosts 1000 --steps 5000
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile

import pyarrow as pa
import pyarrow.parquet as pq

from bench.common import median, report, timed
from bench.tsbs.cpu_only import FIELDS, TAGS, cpu_only_batches
from node.backends import open_standalone
from node.engine.schema import Column, ColumnType, Schema

SCHEMA = Schema.build(
    [Column(t, ColumnType.STRING, is_tag=True) for t in TAGS]
    + [Column(f, ColumnType.DOUBLE) for f in FIELDS]
    + [Column("timestamp", ColumnType.TIMESTAMP)],
    timestamp_key="timestamp",
)


def ingest_engine(batches: list[pa.Table], root: str) -> None:
    with open_standalone(root) as engine:
        engine.create_table("cpu", SCHEMA)
        for b in batches:
            engine.write("cpu", b)
        engine.flush()


def ingest_limit(batches: list[pa.Table], root: str) -> None:
    os.makedirs(root, exist_ok=True)
    fd = os.open(os.path.join(root, "log.ipc"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        with pq.ParquetWriter(os.path.join(root, "data.parquet"), batches[0].schema) as w:
            for b in batches:
                sink = pa.BufferOutputStream()
                with pa.ipc.new_stream(sink, b.schema) as s:
                    s.write_table(b)
                os.write(fd, sink.getvalue())
                os.fdatasync(fd)
                w.write_table(b)
    finally:
        os.close(fd)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--hosts", type=int, default=1000)
    ap.add_argument("--steps", type=int, default=5000, help="readings per host (10 s apart)")
    ap.add_argument("--batch", type=int, default=10_000, help="rows per write")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--dir", default=None, help="scratch directory (default: a temp dir)")
    args = ap.parse_args()
    batches = list(cpu_only_batches(args.hosts, args.steps, rows_per_batch=args.batch))
    rows = sum(b.num_rows for b in batches)
    print(
        f"{rows:,} rows in {len(batches)} batches of {args.batch:,}; {args.reps} reps, interleaved"
    )
    scratch = tempfile.mkdtemp(prefix="gnomon-bench-", dir=args.dir)
    ours: list[float] = []
    limit: list[float] = []
    try:
        for rep in range(args.reps):
            d = os.path.join(scratch, f"engine{rep}")
            ours.append(rows / timed(lambda d=d: ingest_engine(batches, d)))
            shutil.rmtree(d)
            d = os.path.join(scratch, f"limit{rep}")
            limit.append(rows / timed(lambda d=d: ingest_limit(batches, d)))
            shutil.rmtree(d)
            print(f"rep {rep}: gnomon {ours[-1]:,.0f} rows/s, limit {limit[-1]:,.0f} rows/s")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    o, lim = median(ours), median(limit)
    report("engine ingest (median of reps)", [("TSBS cpu-only", o, lim, o / lim)])


if __name__ == "__main__":
    main()
