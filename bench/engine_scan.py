"""Scan throughput of the engine vs. pyarrow reading the very same Parquet files (the engine's
SSTs), side by side in one run: a full scan of every column, a full scan of one field, and a
one-hour time-range scan.

Each case is measured twice. Cold: gnomon's in-memory caches dropped before each read
(footers and decoded column chunks, :meth:`SstFiles.drop_caches`) and pyarrow given a new
dataset (its fragments keep the footers they read); the OS page cache is left as it is for
both, so both read files the kernel holds. Warm: the same reads again back to back, gnomon
answering from what its decoded chunk cache kept. The ratio against the limit is the cold one:
warm, gnomon serves decoded chunks while pyarrow decodes every time.

    .venv/bin/python -m bench.engine_scan --hosts 1000 --steps 5000
"""

from __future__ import annotations

import argparse
import functools
import shutil
import tempfile
from collections.abc import Callable, Iterable, Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from bench.common import median, report, timed
from bench.engine_ingest import SCHEMA
from bench.tsbs.cpu_only import cpu_only_batches
from node.backends import open_standalone

START = 1_451_606_400_000


def count(batches: Iterable[pa.RecordBatch]) -> int:
    return sum(b.num_rows for b in batches)


def rates(
    rows: int, read: Callable[[], object], reps: int, before: Callable[[], object] | None = None
) -> float:
    """Median rows/s of ``reps`` reads, ``before`` run untimed ahead of each."""
    out = []
    for _ in range(reps):
        if before is not None:
            before()
        out.append(rows / timed(read))
    return median(out)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--hosts", type=int, default=1000)
    ap.add_argument("--steps", type=int, default=5000)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    scratch = tempfile.mkdtemp(prefix="gnomon-bench-scan-")
    try:
        engine = open_standalone(scratch)
        engine.create_table("cpu", SCHEMA)
        for b in cpu_only_batches(args.hosts, args.steps):
            engine.write("cpu", b)
        engine.flush()
        files = engine.manifest.current(engine.describe("cpu").table_id).files
        paths = [engine._sst_files.path(f.path) for f in files]
        rows = sum(f.rows for f in files)
        print(f"{rows:,} rows in {len(files)} SSTs")
        hour = (START + 3_600_000, START + 2 * 3_600_000)
        ts = pc.field("timestamp")
        hour_filter = (ts >= pa.scalar(hour[0], pa.timestamp("ms"))) & (
            ts < pa.scalar(hour[1], pa.timestamp("ms"))
        )
        cols = [c for c in SCHEMA.names if c != "tsid"]
        warm_dataset = ds.dataset(paths, format="parquet")

        def limit(columns: Sequence[str], where: pc.Expression | None, cold: bool) -> int:
            dataset = ds.dataset(paths, format="parquet") if cold else warm_dataset
            return count(dataset.to_batches(columns=list(columns), filter=where))

        def ours(columns: Sequence[str], window: tuple[int, int] | None) -> int:
            return count(engine.scan("cpu", columns=list(columns), time_range=window))

        cases = {
            "full scan, all columns": (cols, None, None),
            "full scan, one field": (["usage_user"], None, None),
            "1h time range, all columns": (cols, hour, hour_filter),
        }
        cold_rows, warm_rows = [], []
        for name, (columns, window, where) in cases.items():
            n_ours, n_lim = ours(columns, window), limit(columns, where, cold=True)
            assert n_ours == n_lim, f"{name}: gnomon read {n_ours} rows, pyarrow {n_lim}"
            label = f"{name} ({n_ours:,} rows)"
            for cold, out in ((True, cold_rows), (False, warm_rows)):
                drop = engine._sst_files.drop_caches if cold else None
                o = rates(n_ours, functools.partial(ours, columns, window), args.reps, drop)
                li = rates(n_lim, functools.partial(limit, columns, where, cold), args.reps)
                out.append((label, o, li, o / li))
        engine.close()
        report("engine scan vs pyarrow on the same Parquet, cold (median of reps)", cold_rows)
        report("the same, warm: back to back, gnomon's caches kept (median of reps)", warm_rows)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
