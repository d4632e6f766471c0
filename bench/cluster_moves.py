"""Shard moves under a steady writer (``bench/cluster.py`` (d)): a writer sends gRPC writes
holding one row of every table of a shard, back to back, through a node that does not lead
it, while an operator migrates the shard and then splits one; the longest wait between two
acknowledged writes is the move's stall."""

from __future__ import annotations

import itertools
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import grpc

from bench.cluster_probe import (
    FAILOVER_LIMIT_S,
    SETTLE_LIMIT_S,
    WRITE,
    BenchError,
    bounded,
    settle,
)
from gnomon.proto import storage_pb2
from gnomon_app.devcluster.cluster import DevCluster
from meta.client import MetaClient

MOVE_STALL_TARGET_S = 1.0
#: How long the writer goes on after a move ended (a stall may come right after it).
AFTER_MOVE_S = 1.0


def _rows(tables: Sequence[str], ts: int) -> bytes:
    """One write holding a row of each of ``tables``."""
    req = storage_pb2.WriteRequest()
    req.context.database = "public"
    for table in tables:
        t = req.table_requests.add(table=table, tag_names=["host"], field_names=["v"])
        entry = t.entries.add()
        entry.tags.add(name_index=0).value.string_value = "moves"
        entry.field_groups.add(timestamp=ts).fields.add(name_index=0).value.float64_value = 1.0
    return req.SerializeToString()


class _SteadyWriter:
    """Writes back to back on a thread, keeping when each write was acknowledged."""

    def __init__(self, endpoint: str, tables: Sequence[str], ts: int) -> None:
        self.acks: list[float] = []
        self.errors: list[str] = []
        self._endpoint, self._tables, self._ts = endpoint, list(tables), ts
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-writer", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        with grpc.insecure_channel(self._endpoint) as channel:
            call = channel.unary_unary(
                WRITE,
                request_serializer=lambda b: b,
                response_deserializer=storage_pb2.WriteResponse.FromString,
            )
            k = 0
            while not self._stop.is_set():
                k += 1
                try:
                    resp = call(_rows(self._tables, self._ts + k), timeout=FAILOVER_LIMIT_S)
                    error = None if resp.header.code == 200 else resp.header.error
                except grpc.RpcError as e:
                    error = f"{e.code().name}: {e.details()}"
                if error is None:
                    self.acks.append(time.perf_counter())
                else:
                    self.errors.append(error)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=FAILOVER_LIMIT_S)


@dataclass(frozen=True)
class ShardMove:
    kind: str
    shard: int
    tables: int
    #: The longest wait between acknowledged writes from the move's start to a second after.
    stall_s: float
    #: How long the move's procedure took.
    move_s: float
    writes: int
    refused: int
    first_refusal: str


def _move_under_writer(
    cluster: DevCluster, kind: str, start: Callable[[MetaClient, Any], Any], ts: int
) -> ShardMove:
    with MetaClient(cluster.meta) as meta:
        counts = Counter(r.shard_id for r in meta.route([t.name for t in meta.tables()]))
        # The ready shard holding the most tables (a split moves half of them).
        shard = max(
            (s for s in meta.shards() if counts[s.id] and s.status == "ready"),
            key=lambda s: (counts[s.id], -s.id),
        )
        tables = sorted(r.table for r in meta.route([t.name for t in meta.tables()])
                        if r.shard_id == shard.id)  # fmt: skip
        entry = next(ep for ep in cluster.node_endpoints if ep.grpc != shard.leader)
        writer = _SteadyWriter(entry.grpc, tables, ts)
        try:
            bounded(
                "the writer's first acknowledgement",
                SETTLE_LIMIT_S,
                lambda: bool(writer.acks),
                0.05,
            )
            began = time.perf_counter()
            proc = start(meta, shard)
            done = meta.wait_procedure(proc.id, timeout_s=FAILOVER_LIMIT_S)
            ended = time.perf_counter()
            if done.status != "done":
                raise BenchError(f"{kind} of shard {shard.id}: {done.status} {done.error}")
            time.sleep(AFTER_MOVE_S)
        finally:
            writer.stop()
    acks = [began] + [t for t in writer.acks if t > began]
    gaps = [b - a for a, b in itertools.pairwise(acks)]
    return ShardMove(
        kind,
        shard.id,
        len(tables),
        max(gaps, default=ended + AFTER_MOVE_S - began),
        ended - began,
        len(writer.acks),
        len(writer.errors),
        writer.errors[0] if writer.errors else "",
    )


def moves(cluster: DevCluster) -> list[ShardMove]:
    """A migrate, then a split, each under a steady writer of the moved shard's tables."""

    def migrate(meta: MetaClient, shard: Any) -> Any:
        target = next(ep.grpc for ep in cluster.node_endpoints if ep.grpc != shard.leader)
        return meta.migrate(shard.id, target)

    out = []
    for k, (kind, start) in enumerate(
        (("migrate", migrate), ("split", lambda meta, shard: meta.split(shard.id)))
    ):
        settle(cluster, len(cluster.node_endpoints))
        out.append(_move_under_writer(cluster, kind, start, 1_900_000_000_000 + k * 10_000_000))
    return out
