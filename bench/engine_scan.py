"""Scan throughput of the engine vs. pyarrow reading the very same Parquet files (the engine's
SSTs), side by side in one run: a full scan of every column, a full scan of one field, and a
one-hour time-range scan.

    .venv/bin/python -m bench.engine_scan --hosts 1000 --steps 5000
"""

from __future__ import annotations

import argparse
import shutil
import tempfile

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from bench.common import median, report, timed
from bench.engine_ingest import SCHEMA
from bench.tsbs.cpu_only import cpu_only_batches
from node.backends import open_standalone

START = 1_451_606_400_000


def count(it: object) -> int:
    return sum(b.num_rows for b in it)  # type: ignore[attr-defined]


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
        dataset = ds.dataset(paths, format="parquet")
        hour = (START + 3_600_000, START + 2 * 3_600_000)
        ts = pc.field("timestamp")
        hour_filter = (ts >= pa.scalar(hour[0], pa.timestamp("ms"))) & (
            ts < pa.scalar(hour[1], pa.timestamp("ms"))
        )
        cols = [c for c in SCHEMA.names if c != "tsid"]
        cases = {
            "full scan, all columns": (
                lambda: count(engine.scan("cpu", columns=cols)),
                lambda: count(dataset.to_batches(columns=cols)),
            ),
            "full scan, one field": (
                lambda: count(engine.scan("cpu", columns=["usage_user"])),
                lambda: count(dataset.to_batches(columns=["usage_user"])),
            ),
            "1h time range, all columns": (
                lambda: count(engine.scan("cpu", columns=cols, time_range=hour)),
                lambda: count(dataset.to_batches(columns=cols, filter=hour_filter)),
            ),
        }
        out = []
        for name, (ours_fn, limit_fn) in cases.items():
            n_ours, n_lim = ours_fn(), limit_fn()
            assert n_ours == n_lim, f"{name}: gnomon read {n_ours} rows, pyarrow {n_lim}"
            ours, lim = [], []
            for _ in range(args.reps):
                ours.append(n_ours / timed(ours_fn))
                lim.append(n_lim / timed(limit_fn))
            o, li = median(ours), median(lim)
            out.append((f"{name} ({n_ours:,} rows)", o, li, o / li))
        engine.close()
        report("engine scan vs pyarrow on the same Parquet (median of reps)", out)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
