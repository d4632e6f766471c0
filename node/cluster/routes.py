"""Where each table lives, as this node last heard from the meta service.

A cached route is dropped when a shard event says its shard moved, when a request sent by it
comes back "not owner" or "fenced", and after ``ttl_s`` at the latest, so a lost
invalidation costs one wrong hop and a bounded wait, never a permanently stale route (the
peers' users report both kinds of staleness).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from meta.client import MetaClient


@dataclass(frozen=True)
class Route:
    table: str
    table_id: int
    #: None for a partition table's parent (its sub-tables carry the shards).
    shard_id: int | None
    #: The shard leader's gRPC endpoint (host:port); empty while the shard has no leader.
    endpoint: str
    epoch: int
    #: The leader's other endpoints by protocol ("http", "flight").
    endpoints: Mapping[str, str] = field(default_factory=dict)
    #: The shard's followers: gRPC endpoint -> their other endpoints by protocol.
    followers: Mapping[str, Mapping[str, str]] = field(default_factory=dict)


class RouteCache:
    def __init__(self, client: MetaClient, *, ttl_s: float = 30.0) -> None:
        self._client = client
        self._ttl_s = ttl_s
        self._routes: dict[str, tuple[float, Route]] = {}
        self._lock = threading.Lock()

    def lookup(self, tables: Sequence[str]) -> dict[str, Route]:
        """Routes of ``tables`` that exist (unknown tables are left out)."""
        now = time.monotonic()
        found: dict[str, Route] = {}
        with self._lock:
            for name in tables:
                cached = self._routes.get(name)
                if cached is not None and now - cached[0] < self._ttl_s:
                    found[name] = cached[1]
        missing = [t for t in dict.fromkeys(tables) if t not in found]
        if missing:
            fetched = {
                r.table: Route(
                    r.table,
                    r.table_id,
                    r.shard_id if r.HasField("shard_id") else None,
                    r.endpoint,
                    r.epoch,
                    dict(r.endpoints),
                    {f.endpoint: dict(f.endpoints) for f in r.followers},
                )
                for r in self._client.route(missing)
            }
            with self._lock:
                for name, route in fetched.items():
                    # A route without a leader is not worth keeping: ask again next time.
                    if route.endpoint:
                        self._routes[name] = (now, route)
            found.update(fetched)
        return found

    def invalidate(self, table: str | None = None, *, shard_id: int | None = None) -> None:
        """Forget one table's route, every route of one shard, or (no argument) all."""
        with self._lock:
            if table is not None:
                self._routes.pop(table, None)
            elif shard_id is not None:
                for name in [n for n, (_, r) in self._routes.items() if r.shard_id == shard_id]:
                    del self._routes[name]
            else:
                self._routes.clear()
