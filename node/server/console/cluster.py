"""``GET /api/cluster``: what the console's cluster page shows, as one JSON document.

In a cluster it is the meta service's view (the client the node already holds): data nodes
with their liveness, load and the figures of their last heartbeat (rows/s, memtable bytes,
queries/s, CPU), shards with their leader, followers (and how far each is behind), epoch and
status, the procedures running (each holds the shards it works on, ``busy`` then) and the
compaction nodes. A standalone server answers the same shape for itself: one node, its shards,
and its tables."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from gnomon.errors import GnomonError
from gnomon.proto import meta_pb2 as pb
from meta.client import MetaClient, kind_of
from meta.model import FOLLOWER_LAG
from node.engine.engine import Engine

#: Figures a standalone node samples at most this often (rates need an interval to mean much).
SAMPLE_S = 1.0
#: The figures a node reports that the page shows, by the names the page uses.
FIGURES = {
    "rows_per_s": "rows_written_per_s",
    "memtable_bytes": "memtable_bytes",
    "queries_per_s": "queries_per_s",
    "cpu": "cpu",
    "tables": "tables",
}


def _figures(figures: Mapping[str, float]) -> dict[str, float | None]:
    return {name: figures.get(key) for name, key in FIGURES.items()}


class ClusterView:
    """The cluster page's document. ``figures`` samples this node (rates since its previous
    call); ``meta``, a cluster node's meta client (None: standalone)."""

    def __init__(
        self,
        engine: Engine,
        me: str,
        figures: Callable[[], Mapping[str, float]],
        meta: MetaClient | None = None,
    ) -> None:
        self.engine = engine
        self.me = me
        self.meta = meta
        self._figures = figures
        self._lock = threading.Lock()
        self._sampled: tuple[float, Mapping[str, float]] | None = None

    def __call__(self) -> dict[str, Any]:
        if self.meta is None:
            return self._standalone()
        return self._cluster(self.meta)

    def _sample(self) -> Mapping[str, float]:
        with self._lock:
            now = time.monotonic()
            if self._sampled is None or now - self._sampled[0] >= SAMPLE_S:
                self._sampled = (now, self._figures())
            return self._sampled[1]

    def _standalone(self) -> dict[str, Any]:
        figures = self._sample()
        stats = self.engine.stats()
        shard_tables = self.engine.shard_tables()
        shards = self.engine.shards()
        return {
            "mode": "standalone",
            "me": self.me,
            "nodes": [
                {
                    "name": self.me,
                    "kind": "data",
                    "role": "standalone",
                    "live": True,
                    "load": float(len(stats.tables)),
                    "leader_shards": len(shards),
                    "follower_shards": 0,
                    **_figures(figures),
                }
            ],
            "shards": [
                {
                    "id": shard_id,
                    "leader": self.me,
                    "followers": [],
                    "epoch": epoch,
                    "status": "ready",
                    "pinned": False,
                    "tables": len(shard_tables.get(shard_id, ())),
                }
                for shard_id, epoch in sorted(shards.items())
            ],
            "tables": [
                {
                    "name": t.name,
                    "id": t.table_id,
                    "sst_files": t.sst_files,
                    "sst_bytes": t.sst_bytes,
                    "rows": t.sst_rows + t.memtable_rows,
                    "memtable_bytes": t.memtable_bytes,
                }
                for t in sorted(stats.tables, key=lambda t: t.name)
            ],
            "procedures": [],
            "compaction_nodes": [],
        }

    def _cluster(self, meta: MetaClient) -> dict[str, Any]:
        nodes = meta.nodes()
        shards = meta.shards()
        data = [n for n in nodes if n.kind != pb.COMPACTION]
        lags: dict[str, Mapping[str, float]] = {n.name: n.figures for n in data}

        def follower(shard_id: int, name: str) -> dict[str, Any]:
            return {"name": name, "lag_s": lags.get(name, {}).get(f"{FOLLOWER_LAG}{shard_id}")}

        return {
            "mode": "cluster",
            "me": self.me,
            "nodes": [
                {
                    "name": n.name,
                    "kind": kind_of(n).value,
                    "role": _role(n),
                    "live": n.live,
                    "load": n.load,
                    "leader_shards": n.leader_shards,
                    "follower_shards": n.follower_shards,
                    "heartbeat_age_s": None if n.heartbeat_age_s < 0 else n.heartbeat_age_s,
                    **_figures(n.figures),
                }
                for n in data
            ],
            "shards": [
                {
                    "id": s.id,
                    "leader": s.leader or None,
                    "followers": [follower(s.id, f) for f in s.followers],
                    "epoch": s.epoch,
                    "status": s.status,
                    "pinned": s.pinned,
                    "tables": s.tables,
                    "load": s.load,
                }
                for s in shards
            ],
            "tables": [],
            "procedures": self._procedures(meta, shards),
            "compaction_nodes": [
                {
                    "name": n.name,
                    "live": n.live,
                    "load": n.load,
                    "heartbeat_age_s": None if n.heartbeat_age_s < 0 else n.heartbeat_age_s,
                    "running": n.figures.get("running"),
                    "queued": n.figures.get("queued"),
                    "slots": n.figures.get("slots"),
                    "bytes_per_s": n.figures.get("bytes_per_s"),
                    "cpu": n.figures.get("cpu"),
                }
                for n in nodes
                if n.kind == pb.COMPACTION
            ],
        }

    @staticmethod
    def _procedures(meta: MetaClient, shards: Sequence[pb.ShardInfo]) -> list[dict[str, Any]]:
        """The procedures running: each holds the shards it works on (busy ones)."""
        held: dict[int, list[int]] = {}
        for s in shards:
            if s.procedure:
                held.setdefault(s.procedure, []).append(s.id)
        found = []
        for proc_id, shard_ids in sorted(held.items()):
            try:
                info = meta.procedure(proc_id)
            except GnomonError:
                continue  # finished and forgotten since the shards were listed
            if info.status != "running":
                continue
            found.append(
                {
                    "id": info.id,
                    "kind": info.kind,
                    "status": info.status,
                    "step": info.step,
                    "shards": shard_ids,
                    "params": info.params,
                }
            )
        return found


def _role(node: pb.NodeInfo) -> str:
    """A node's part in the cluster: leading shards, following them, answering queries (a
    query node), or idle."""
    if node.kind == pb.QUERY:
        return "query"
    if node.leader_shards and node.follower_shards:
        return "leader + follower"
    if node.leader_shards:
        return "leader"
    if node.follower_shards:
        return "follower"
    return "idle"
