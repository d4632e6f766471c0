"""What a data node reports of itself with each heartbeat, for operators (``gnomon admin
nodes``): shards and tables served, memtable bytes, and rows written, queries and CPU per
second since the previous heartbeat; and, per shard followed, how far the follower is behind
its leader (``follower_lag_s:<shard>``, seconds since it was last caught up; ``admin shards``
shows them)."""

from __future__ import annotations

import time
from collections.abc import Callable

from meta.model import FOLLOWER_LAG
from node.engine.engine import Engine

#: Endpoints whose requests count as queries.
QUERY_ENDPOINTS = frozenset({"SqlQuery", "StreamSqlQuery", "/sql"})


class Figures:
    def __init__(
        self, engine: Engine, *, rows_written: Callable[[], float], queries: Callable[[], float]
    ) -> None:
        self._engine = engine
        self._rows_written = rows_written
        self._queries = queries
        self._last = self._sample()

    def _sample(self) -> tuple[float, float, float, float]:
        return time.monotonic(), time.process_time(), self._rows_written(), self._queries()

    def __call__(self) -> dict[str, float]:
        now = self._sample()
        elapsed = max(now[0] - self._last[0], 1e-6)
        cpu, rows, queries = ((now[i] - self._last[i]) / elapsed for i in (1, 2, 3))
        self._last = now
        stats = self._engine.stats()
        lags = {
            f"{FOLLOWER_LAG}{shard_id}": followed.lag()[1]
            for shard_id, followed in self._engine.followed().items()
        }
        return {
            **lags,
            "shards": float(len(self._engine.shards())),
            "tables": float(len(stats.tables)),
            "memtable_bytes": float(stats.memtable_bytes),
            "rows_written_per_s": rows,
            "queries_per_s": queries,
            "cpu": cpu,
        }
