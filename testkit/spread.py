"""Shard spread after a start (``bench/cluster.py`` (g)): a cluster as ``gnomon dev-cluster
--nodes 3 --followers 1`` starts it (8 shards). The nodes register one after another, so the
first is assigned every shard and the second follows them all before the third is up; the
meta service must then spread leaders and followers over the three. Timed from the start:
until every shard is ready with its follower and leader shards, and follower shards, each
differ by at most one between the nodes. Target: within 30 s."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gnomon_app.devcluster.cluster import DevCluster
from meta.client import MetaClient

SPREAD_LIMIT_S = 30.0
POLL_S = 0.2


@dataclass(frozen=True)
class Copies:
    """Leader and follower shards of each node, in the order the nodes were asked for."""

    leaders: tuple[int, ...]
    followers: tuple[int, ...]
    #: Every shard is ready, led by one of the nodes and followed by another.
    placed: bool

    @property
    def even(self) -> bool:
        return self.placed and all(max(c) - min(c) <= 1 for c in (self.leaders, self.followers))

    @property
    def leader_spread(self) -> float | None:
        """Most leader shards of a node over the fewest (None: a node leads none)."""
        return max(self.leaders) / min(self.leaders) if min(self.leaders) else None


def copies(client: MetaClient, nodes: Sequence[str]) -> Copies:
    """What each of ``nodes`` (gRPC endpoints) leads and follows, as the meta service says."""
    shards = client.shards()
    placed = all(
        s.status == "ready" and s.leader in nodes and s.followers and set(s.followers) <= set(nodes)
        for s in shards
    )
    return Copies(
        tuple(sum(s.leader == n for s in shards) for n in nodes),
        tuple(sum(n in s.followers for s in shards) for n in nodes),
        placed,
    )


@dataclass(frozen=True)
class Spread:
    #: Seconds from the start until the copies were even; None: not within the limit.
    spread_s: float | None
    #: The copies then (or at the limit).
    copies: Copies


def spread(lease_ttl_s: int, scratch: Path) -> Spread:
    """Start the cluster and watch its copies until they are even (or the limit passes)."""
    began = time.monotonic()
    with DevCluster(
        scratch / "cluster-spread", nodes=3, followers=1, lease_ttl_s=lease_ttl_s
    ) as cluster:
        nodes = [ep.grpc for ep in cluster.node_endpoints]
        with MetaClient(cluster.meta) as client:
            while True:
                now = copies(client, nodes)
                elapsed = time.monotonic() - began
                if now.even:
                    return Spread(elapsed, now)
                if elapsed > SPREAD_LIMIT_S:
                    return Spread(None, now)
                time.sleep(POLL_S)
