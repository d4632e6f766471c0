"""The node's side of a Spark ingest, in process, for one or more source trees side by side
in one run (before and after a change to staging): the rows ``bench/spark.py`` writes (100
hosts x 3 regions, four doubles, one row per host every 10 s), cut as its two tasks send them
(10,000-row batches, each task's in time order) and as the Flight endpoint stages them
(64 MB chunks, ``PUT_CHUNK_BYTES``), staged under one revision and committed. Per round and
tree, the CPU seconds (user + system) and minor page faults of

- ``checks``: ``conform`` (the checks, casts and series ids),
- ``sort``: ``split_sorted_by_window`` (the order, the rows gathered in it, versions),
- ``sst``: ``write_sst`` (Parquet encoding, statistics, the series directory),
- ``stage``: all of ``Revisions.stage`` (the above, the SSTs stored and recorded).

Flight's receiving and checking of the batches is not in it. A pause before each chunk
(``--pause``, 1.2 s: what a chunk of a 4M-row Spark write takes to arrive) lets the
allocators return freed memory as they do between a task's chunks, so its page faults count
as they do in a server.

Each tree runs in a child process of its own (``node`` imported from the tree), the trees in
turn, the order reversed every round.

    python -m bench.spark_staging --tree before=/path/to/old/checkout --tree after=. --rounds 2

Prints one line per round and tree, then one JSON line with every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
START_MS = 1_451_606_400_000
HOSTS = 100
COLUMNS = (
    "host string TAG, region string TAG, usage_user double, usage_system double, "
    "usage_idle double, usage_iowait double, ts timestamp NOT NULL, TIMESTAMP KEY(ts)"
)
OPTIONS = "WITH (segment_duration='1d', compression='snappy', update_mode='append')"
#: The stages timed: a name of ``node.engine.revisions`` (a function it calls, or its class
#: ``Revisions``'s method) and the label it is reported under.
STAGES = (
    ("conform", "checks"),
    ("split_sorted_by_window", "sort"),
    ("write_sst", "sst"),
    ("Revisions.stage", "stage"),
)


def _task_batches(lo: int, hi: int, per: int = 10_000) -> Iterator[Any]:
    """Rows ``lo`` to ``hi`` of the Spark bench's frame, as its tasks hand them over."""
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng(lo)
    hosts = pa.array([f"host_{i:04d}" for i in range(HOSTS)])
    regions = pa.array(["eu", "us", "ap"])
    for start in range(lo, hi, per):
        ids = np.arange(start, min(hi, start + per))
        yield pa.RecordBatch.from_arrays(
            [
                hosts.take(ids % HOSTS),
                regions.take(ids % 3),
                *(pa.array(rng.random(len(ids)) * 100) for _ in range(3)),
                pa.array((ids % 1000).astype(np.float64)),
                pa.array(START_MS + (ids // HOSTS) * 10_000, pa.timestamp("ms")),
            ],
            names=[
                "host", "region", "usage_user", "usage_system", "usage_idle", "usage_iowait",
                "ts",
            ],
        )  # fmt: skip


def _chunks(rows: int, chunk_bytes: int) -> list[Any]:
    """The tables the Flight endpoint stages: each task's batches cut at ``chunk_bytes``."""
    import pyarrow as pa

    out = []
    for lo, hi in ((0, rows // 2), (rows // 2, rows)):
        pending: list[Any] = []
        size = 0
        for batch in _task_batches(lo, hi):
            pending.append(batch)
            size += batch.nbytes
            if size >= chunk_bytes:
                out.append(pa.Table.from_batches(pending))
                pending, size = [], 0
        if pending:
            out.append(pa.Table.from_batches(pending))
    return out


def _measure(rows: int, pause_s: float) -> dict[str, list[float]]:
    """The figures of the tree this process imports ``node`` from: per stage, CPU seconds
    and minor faults of the second of two staged jobs (the first warms the process up)."""
    import node.engine.revisions as revisions
    from node.backends import open_standalone
    from node.server.flight import PUT_CHUNK_BYTES
    from node.sql.executor import SqlExecutor

    spent: dict[str, list[float]] = {}

    def timed(fn: Callable[..., Any], label: str) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            before = resource.getrusage(resource.RUSAGE_SELF)
            try:
                return fn(*args, **kwargs)
            finally:
                after = resource.getrusage(resource.RUSAGE_SELF)
                figures = spent.setdefault(label, [0.0, 0.0])
                figures[0] += after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
                figures[1] += after.ru_minflt - before.ru_minflt

        return run

    for name, label in STAGES:
        owner: Any = revisions
        if "." in name:
            cls, name = name.split(".")
            owner = getattr(revisions, cls)
        setattr(owner, name, timed(getattr(owner, name), label))
    chunks = _chunks(rows, PUT_CHUNK_BYTES)
    with tempfile.TemporaryDirectory(prefix="gnomon-bench-staging-") as scratch:
        engine = open_standalone(scratch, compaction_threads=0, gc_interval_s=0)
        try:
            for job in range(2):
                spent.clear()
                table = f"cpu_{job}"
                SqlExecutor(engine).execute(f"CREATE TABLE {table} ({COLUMNS}) {OPTIONS}")
                rev = engine.revisions.reserve(table)
                for chunk in chunks:
                    time.sleep(pause_s)
                    engine.revisions.stage(table, rev.revision, chunk, attempt="task")
                engine.revisions.commit(table, rev.revision)
                if engine.read_all(table, columns=["ts"]).num_rows != rows:
                    raise RuntimeError(f"{table}: staged rows went missing")
        finally:
            engine.close()
    return {label: [round(spent[label][0], 3), int(spent[label][1])] for _, label in STAGES}


def _child(tree: Path, rows: int, pause_s: float) -> dict[str, list[float]]:
    """The figures of ``tree``: this file run with ``node`` imported from there."""
    done = subprocess.run(
        [sys.executable, "-P", __file__, "--child", str(rows), str(pause_s)],
        cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree)},
        capture_output=True,
        text=True,
        check=True,
        timeout=1200,
    )
    figures: dict[str, list[float]] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def main(argv: Sequence[str] | None = None) -> int:
    # Imported here: a child imports nothing of bench/ (its tree may hold another version).
    from bench.common import add_tree_option, source_trees

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_tree_option(parser, "to measure")
    parser.add_argument("--rows", type=int, default=4_000_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--pause", type=float, default=1.2, help="Seconds before each chunk.")
    args = parser.parse_args(argv)
    trees = source_trees(parser, args.tree, REPO)
    rounds: list[dict[str, Any]] = []
    for r in range(args.rounds):
        order = trees if r % 2 == 0 else list(reversed(trees))
        found = {name: _child(path, args.rows, args.pause) for name, path in order}
        rounds.append(found)
        for name, _ in trees:
            line = "  ".join(
                f"{label} {cpu:5.3f} s {faults:6d} faults"
                for label, (cpu, faults) in found[name].items()
            )
            print(f"round {r + 1}  {name:>8}  {line}", flush=True)
    print(json.dumps(rounds))
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        print(json.dumps(_measure(int(sys.argv[2]), float(sys.argv[3]))))
        raise SystemExit(0)
    raise SystemExit(main())
