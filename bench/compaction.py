"""Compaction throughput of the engine vs. the physical limit, side by side in one run.

Input: TSBS cpu-only data in one segment window, flushed as ``--files`` SSTs of consecutive
time chunks (every SST holds every series, so all of them overlap in key space), each flush
after the first also rewriting the previous chunk's rows of a tenth of the hosts with new
values (overwritten keys, newest wins).

gnomon: ``Engine.compact`` on that table (plan, streaming k-way merge of the SSTs into new ones
of the target size, manifest commit), on a fresh copy of the data directory each repetition.
limit: pyarrow reading the very same SST files whole, one vectorised sort by (tsid, timestamp,
__seq), keeping the newest row of each key, and writing one Parquet file with the SST writer's
settings (compression, encodings, row group size, statistics, page index).

Both are measured on the input SSTs' bytes and rows; the ratio is the same for either.

Then, unless ``--no-offload``, the same input compacted locally vs offloaded to a compaction
node (local and Ray executors), and the p99 write latency of a steady writer during a local
vs an offloaded compaction (``bench/compaction_offload.py``). The last line is one JSON object
of the figures.

    .venv/bin/python -m bench.compaction --hosts 1000 --steps 2000
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bench.common import median, report, timed
from bench.compaction_offload import WRITER_ROWS, run_offload
from bench.engine_ingest import SCHEMA
from bench.tsbs.cpu_only import FIELDS, INTERVAL_MS, cpu_only_batches
from node.backends import open_standalone
from node.engine.engine import Engine
from node.engine.options import TableOptions
from node.engine.schema import DELETE, KIND, SEQ
from node.engine.sst.writer import _writer_options

DAY_MS = 86_400_000
#: One flush in this many rewrites a host's readings of the chunk before.
REWRITE_EVERY = 10
#: No background compaction or garbage collection; the benchmark compacts by hand.
ENGINE_CONFIG: dict[str, object] = {
    "compaction_threads": 0,
    "gc_interval_s": 0,
    "wal_sync": "never",
}


def table_options(steps: int) -> TableOptions:
    # One segment window holds all of the data (TSBS starts at midnight), and no flush is
    # triggered by size: the benchmark decides where the SSTs are cut.
    days = -(-steps * INTERVAL_MS // DAY_MS)
    return TableOptions.from_strings({"segment_duration": f"{days}d", "write_buffer_size": "4gb"})


def _rewrite(chunk: pa.Table, hosts: int, k: int) -> pa.Table:
    """The rows of ``chunk`` of every ``REWRITE_EVERY``-th host (shifted by ``k``), with new
    field values."""
    host = np.arange(chunk.num_rows) % hosts
    rows = chunk.filter(pa.array(host % REWRITE_EVERY == k % REWRITE_EVERY))
    for f in FIELDS:
        i = rows.schema.get_field_index(f)
        rows = rows.set_column(i, f, pc.add(rows.column(f), 0.5))
    return rows


def _flushes(hosts: int, steps: int, files: int, batch: int) -> Iterator[list[pa.Table]]:
    """The writes of each flush: a chunk of consecutive steps of every host, then (after the
    first) the rewrite of some hosts' rows of the chunk before."""
    per = -(-steps // files)
    chunks = list(cpu_only_batches(hosts, steps, rows_per_batch=per * hosts))
    for k, chunk in enumerate(chunks):
        writes = [chunk.slice(o, batch) for o in range(0, chunk.num_rows, batch)]
        if k:
            writes.append(_rewrite(chunks[k - 1], hosts, k))
        yield writes


@dataclass(frozen=True)
class Input:
    root: str
    paths: list[str]
    rows: int
    bytes: int
    #: Rows left once every key keeps its newest version.
    distinct: int


def build(root: str, *, hosts: int, steps: int, files: int, batch: int = 10_000) -> Input:
    """A data directory holding the cpu table as ``files`` overlapping SSTs of one window."""
    with open_standalone(root, **ENGINE_CONFIG) as engine:
        engine.create_table("cpu", SCHEMA, table_options(steps))
        for writes in _flushes(hosts, steps, files, batch):
            for w in writes:
                engine.write("cpu", w)
            engine.flush("cpu")
        return _describe(engine, root, distinct=hosts * steps)


def _describe(engine: Engine, root: str, *, distinct: int) -> Input:
    version = engine.manifest.current(engine.describe("cpu").table_id)
    data = [f for f in version.files if f.is_data]
    paths = [os.path.relpath(engine._sst_files.path(f.path), root) for f in data]
    return Input(
        root,
        paths,
        rows=sum(f.rows for f in data),
        bytes=sum(f.size for f in data),
        distinct=distinct,
    )


def compact_engine(root: str) -> tuple[float, int, int]:
    """Compact the cpu table in ``root``: (seconds, output rows, output SSTs)."""
    with open_standalone(root, **ENGINE_CONFIG) as engine:
        before = engine.manifest.current(engine.describe("cpu").table_id).files
        seconds = timed(lambda: engine.compact("cpu"))
        after = engine.manifest.current(engine.describe("cpu").table_id).files
        left = {f.path for f in before} & {f.path for f in after}
        assert not left, f"compaction left {len(left)} of {len(before)} input SSTs unmerged"
        return seconds, sum(f.rows for f in after), len(after)


def compact_limit(paths: list[str], out: str, options: TableOptions) -> int:
    """The same merge with pyarrow, whole in memory: rows written to ``out``."""
    t = pa.concat_tables([pq.read_table(p) for p in paths])
    key = SCHEMA.primary_key
    order = pc.sort_indices(t, sort_keys=[*((k, "ascending") for k in key), (SEQ, "ascending")])
    # Newest of each key: the last row of every run of equal keys, found on the key columns
    # alone, so that the whole rows are gathered once; no deletion markers.
    n = t.num_rows
    same = np.ones(n - 1, dtype=bool)
    for k in key:
        col = t.column(k).take(order).to_numpy()
        same &= col[1:] == col[:-1]
    keep = np.append(~same, True)
    keep &= t.column(KIND).take(order).to_numpy() != DELETE
    t = t.take(order.filter(pa.array(keep)))
    pq.write_table(
        t,
        out,
        row_group_size=options.num_rows_per_row_group,
        **_writer_options(SCHEMA, options),  # type: ignore[arg-type]
    )
    return t.num_rows


def run(
    scratch: str, *, hosts: int, steps: int, files: int, reps: int, verbose: bool = True
) -> tuple[Input, list[float], list[float]]:
    """Build the input once, then compact a fresh copy of it with the engine and with the
    limit, interleaved ``reps`` times; seconds of each run."""
    src = build(os.path.join(scratch, "input"), hosts=hosts, steps=steps, files=files)
    options = table_options(steps)
    ours: list[float] = []
    limit: list[float] = []
    for rep in range(reps):
        work = os.path.join(scratch, f"engine{rep}")
        shutil.copytree(src.root, work)
        seconds, rows, outputs = compact_engine(work)
        shutil.rmtree(work)
        ours.append(seconds)
        out = os.path.join(scratch, f"limit{rep}.parquet")
        lim_rows = 0

        def limit_run(out: str = out) -> None:
            nonlocal lim_rows
            lim_rows = compact_limit([os.path.join(src.root, p) for p in src.paths], out, options)

        limit.append(timed(limit_run))
        os.unlink(out)
        assert rows == lim_rows == src.distinct, (
            f"gnomon compacted to {rows} rows, the limit to {lim_rows}, expected {src.distinct}"
        )
        if verbose:
            mb = src.bytes / 1e6
            print(
                f"rep {rep}: gnomon {mb / ours[-1]:,.1f} MB/s ({outputs} SST), "
                f"limit {mb / limit[-1]:,.1f} MB/s; {rows:,} rows out"
            )
    return src, ours, limit


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--hosts", type=int, default=1000)
    ap.add_argument("--steps", type=int, default=2000, help="readings per host (10 s apart)")
    ap.add_argument("--files", type=int, default=8, help="input SSTs (at most 16)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--dir", default=None, help="scratch directory (default: a temp dir)")
    ap.add_argument(
        "--no-offload",
        action="store_true",
        help="skip the offloaded compactions (they start etcd, meta and compaction nodes)",
    )
    args = ap.parse_args()
    if not 4 <= args.files <= TableOptions().compaction_max_threshold:
        ap.error("--files must be between compaction_min_threshold and compaction_max_threshold")
    scratch = tempfile.mkdtemp(prefix="gnomon-bench-compact-", dir=args.dir)
    try:
        src, ours, limit = run(
            scratch, hosts=args.hosts, steps=args.steps, files=args.files, reps=args.reps
        )
        offloaded = None if args.no_offload else run_offload(scratch, src.root, reps=args.reps)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    o, lim = median(ours), median(limit)
    mb = src.bytes / 1e6
    print(
        f"input: {len(src.paths)} overlapping SSTs in one window, {src.rows:,} rows, {mb:,.1f} MB"
        f" -> {src.distinct:,} rows; {args.reps} reps, interleaved"
    )
    case = f"merge {len(src.paths)} SSTs ({src.rows:,} rows, {mb:,.0f} MB)"
    title = "compaction of the same input SSTs (median of reps)"
    report(title, [(case, mb / o, mb / lim, lim / o)], unit="MB/s")
    report(title, [(case, src.rows / o, src.rows / lim, lim / o)], unit="rows/s")
    summary: dict[str, float] = {"local_mb_s": mb / o, "limit_mb_s": mb / lim}
    if offloaded is not None:
        local, offload, ray = (
            mb / median(x) for x in (offloaded.local, offloaded.offload, offloaded.ray)
        )
        title = "local vs offloaded compaction of the same input (median of reps)"
        report(
            title,
            [
                (f"{case}, local executor", offload, local, offload / local),
                (f"{case}, ray executor", ray, local, ray / local),
            ],
            unit="MB/s",
            names=("offloaded", "local"),
        )
        print(
            f"p99 of a steady writer ({offloaded.writes} writes/s of {WRITER_ROWS} rows) during "
            f"the compaction: local {offloaded.p99_local_ms:.2f} ms, offloaded "
            f"{offloaded.p99_offload_ms:.2f} ms"
        )
        summary.update(
            {
                "local_in_engine_mb_s": local,
                "offload_mb_s": offload,
                "ray_mb_s": ray,
                "offload_vs_local": offload / local,
                "ray_vs_local": ray / local,
                "p99_write_ms_local": offloaded.p99_local_ms,
                "p99_write_ms_offload": offloaded.p99_offload_ms,
            }
        )
    print(json.dumps({k: round(v, 3) for k, v in summary.items()}))


if __name__ == "__main__":
    main()
