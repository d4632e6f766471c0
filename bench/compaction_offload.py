"""Offloaded compaction beside local compaction, on the same input SSTs (``bench/compaction.py``
runs it after its comparison with the physical limit).

Services: etcd and one meta instance (the compaction nodes register there), and two
``gnomon compaction-node`` processes on the input's object store (a local directory, so no
network store's speed enters the comparison), one with ``--executor local`` and one with
``--executor ray`` (a local Ray), one slot each. The data node is an engine in this process,
as a data node's is in its own: local compaction runs in it; an offloaded one sends the task
to a node (named directly: what is compared is where the merge runs, not meta's pick), waits
for the answer and installs the outputs with its commit.

Throughput: input MB over the seconds of ``Engine.compact`` (plan, merge, install), each
variant on a fresh copy of the catalog and the same SSTs, interleaved over the repetitions
after one warm-up each (the Ray worker imports gnomon on its first task).

Write latency: a steady writer (small batches at a fixed rate, another table of the same
engine) while the whole input is compacted, locally and offloaded (local executor); the p99 of
the writes made during the compaction.
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from bench.common import timed
from bench.engine_ingest import SCHEMA
from bench.tsbs.cpu_only import cpu_only_batches
from gnomon_app.devcluster.etcd import EtcdServer
from gnomon_app.devcluster.procs import Server
from node.backends import Storage, open_engine
from node.engine.compaction.client import CompactionClient
from node.engine.compaction.offload import CompactionMode, Offload
from node.engine.engine import Engine
from node.engine.shard import STANDALONE_SHARD
from objectstore.local import LocalObjectStore

EXECUTORS = ("local", "ray")
#: The steady writer: rows per write and writes per second.
WRITER_ROWS = 100
WRITER_RATE = 200
ENGINE_CONFIG: dict[str, object] = {
    "compaction_threads": 0,
    "gc_interval_s": 0,
    "compaction_check_interval_s": 0,
}


class OneNode:
    """Always the same compaction node (the bench names the node whose executor it measures)."""

    def __init__(self, node: str) -> None:
        self.node = node

    def pick_compaction_node(self) -> str | None:
        return self.node


@dataclass(frozen=True)
class Services:
    #: Executor -> its compaction node's gRPC endpoint.
    nodes: dict[str, str]
    store: str


@contextmanager
def services(scratch: Path, store: Path) -> Iterator[Services]:
    """etcd, meta and one compaction node per executor on the object store ``store``."""
    logs = scratch / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    with ExitStack() as stack:
        (scratch / "etcd").mkdir(exist_ok=True)
        etcd = EtcdServer(scratch / "etcd")
        etcd.start()
        stack.callback(etcd.stop)
        cli = [sys.executable, "-m", "gnomon_app.cli", "--log-level=WARNING"]
        meta, ports = Server.start_gnomon(
            [*cli, "meta", f"--etcd={etcd.endpoint}", "--grpc-port=0", "--shards=1"],
            log=logs / "meta.log",
        )
        stack.callback(meta.stop)
        meta_endpoint = f"127.0.0.1:{ports['grpc']}"
        nodes: dict[str, str] = {}
        for executor in EXECUTORS:
            node, ports = Server.start_gnomon(
                [
                    *cli,
                    "compaction-node",
                    f"--meta={meta_endpoint}",
                    f"--store=file://{store}",
                    f"--executor={executor}",
                    "--slots=1",
                    "--grpc-port=0",
                    "--http-port=0",
                    f"--data-dir={scratch / executor}",
                ],
                log=logs / f"compaction-{executor}.log",
                timeout_s=120,
            )
            stack.callback(node.stop)
            nodes[executor] = f"127.0.0.1:{ports['grpc']}"
        yield Services(nodes, str(store))


def _engine(root: str, store: str, offload: Offload | None) -> Engine:
    storage = Storage(store=f"file://{store}", wal_sync="never")
    engine = open_engine(root, storage, offload=offload, **ENGINE_CONFIG)  # type: ignore[arg-type]
    engine.open_shard(STANDALONE_SHARD)
    return engine


def _offload(node: str | None) -> Offload | None:
    if node is None:
        return None
    return Offload(OneNode(node), CompactionClient("bench"), mode=CompactionMode.OFFLOAD)


def _check_offloaded(offload: Offload | None) -> None:
    if offload is not None:
        fell_back = {k: v for k, v in offload.outcomes().items() if k != "offloaded"}
        assert not fell_back, f"offloaded compaction fell back to local: {fell_back}"


def _prune(store: str, inputs: set[str]) -> None:
    """Delete what a run wrote to the shared store (its inputs stay for the next)."""
    objects = LocalObjectStore(store)
    for obj in list(objects.list("tables/")):
        if obj.key not in inputs:
            objects.delete(obj.key)


def compact_once(src: str, work: str, store: str, node: str | None) -> float:
    """Seconds of compacting a fresh copy of ``src``'s catalog, here (``node`` None) or on
    ``node``; the store's outputs are removed afterwards."""
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(src, work)
    offload = _offload(node)
    inputs = {o.key for o in LocalObjectStore(store).list("tables/")}
    try:
        with _engine(work, store, offload) as engine:
            seconds = timed(lambda: engine.compact("cpu"))
        _check_offloaded(offload)
        return seconds
    finally:
        _prune(store, inputs)


def _writes() -> Iterator[pa.Table]:
    """Endless writes of WRITER_ROWS rows (as many hosts, one reading each), later and later."""
    start = 1_700_000_000_000
    while True:
        yield from cpu_only_batches(WRITER_ROWS, 1000, start_ms=start, rows_per_batch=WRITER_ROWS)
        start += 1000 * 10_000


def p99_while_compacting(src: str, work: str, store: str, node: str | None) -> float:
    """p99 milliseconds of a steady writer's writes during one compaction of the input."""
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(src, work)
    offload = _offload(node)
    inputs = {o.key for o in LocalObjectStore(store).list("tables/")}
    latencies: list[float] = []
    done = threading.Event()
    try:
        with _engine(work, store, offload) as engine:
            engine.create_table("steady", SCHEMA)

            def writer() -> None:
                writes = _writes()
                next_at = time.perf_counter()
                while not done.is_set():
                    batch = next(writes)
                    t0 = time.perf_counter()
                    engine.write("steady", batch)
                    latencies.append((time.perf_counter() - t0) * 1000)
                    next_at += 1 / WRITER_RATE
                    time.sleep(max(0.0, next_at - time.perf_counter()))

            thread = threading.Thread(target=writer, name="bench-steady-writer")
            # Writes before the compaction are warm-up: only those during it count.
            thread.start()
            time.sleep(0.5)
            skip = len(latencies)
            engine.compact("cpu")
            done.set()
            thread.join()
        _check_offloaded(offload)
    finally:
        _prune(store, inputs)
    during = latencies[skip:]
    return float(np.percentile(during, 99)) if during else float("nan")


@dataclass(frozen=True)
class OffloadResult:
    local: list[float]
    offload: list[float]
    ray: list[float]
    p99_local_ms: float
    p99_offload_ms: float
    writes: int


def run_offload(scratch: str, src_root: str, *, reps: int, verbose: bool = True) -> OffloadResult:
    """The comparisons on the input built in ``src_root`` (``bench.compaction.build``)."""
    root = Path(scratch) / "offload"
    store = root / "store"
    catalog = root / "catalog"
    shutil.copytree(os.path.join(src_root, "sst"), store)
    shutil.copytree(src_root, catalog, ignore=shutil.ignore_patterns("sst", "cache", "tmp"))
    work = str(root / "work")
    times: dict[str, list[float]] = {"local": [], "offload": [], "ray": []}
    with services(root, store) as svc:
        variants = {"local": None, "offload": svc.nodes["local"], "ray": svc.nodes["ray"]}
        for node in variants.values():
            compact_once(str(catalog), work, svc.store, node)  # warm-up
        for rep in range(reps):
            for name, node in variants.items():
                times[name].append(compact_once(str(catalog), work, svc.store, node))
            if verbose:
                print(
                    f"rep {rep}: " + ", ".join(f"{n} {times[n][-1]:.2f}s" for n in variants),
                    flush=True,
                )
        p99_local = statistics.median(
            p99_while_compacting(str(catalog), work, svc.store, None) for _ in range(reps)
        )
        p99_offload = statistics.median(
            p99_while_compacting(str(catalog), work, svc.store, svc.nodes["local"])
            for _ in range(reps)
        )
    return OffloadResult(
        times["local"], times["offload"], times["ray"], p99_local, p99_offload, WRITER_RATE
    )
