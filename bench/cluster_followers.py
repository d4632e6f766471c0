"""Followers (``bench/cluster.py`` (e)): on three nodes whose meta service gives every shard
a follower, the follower lag under a steady writer and the failover time after lease expiry
when the follower takes over."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path

import grpc

from bench.cluster_probe import (
    SETTLE_LIMIT_S,
    BenchError,
    Kill,
    bounded,
    kill_and_write,
    scalar,
    settle,
    victim,
    write_once,
)
from gnomon_app.devcluster.cluster import DevCluster
from meta.client import MetaClient

FAST_RTO_TARGET_S = 1.0
#: Writes of the steady writer whose visibility on the follower is timed.
LAG_WRITES = 300
LAG_WRITE_PAUSE_S = 0.01


def _settle_followers(cluster: DevCluster) -> None:
    """:func:`_settle`, and every shard has a live follower."""
    nodes = len(cluster.node_endpoints)

    def followed() -> bool:
        with MetaClient(cluster.meta) as client:
            live = {n.name for n in client.nodes() if n.live}
            return all(any(f in live for f in s.followers) for s in client.shards())

    bounded("every shard having a live follower", SETTLE_LIMIT_S, followed, 0.2)
    settle(cluster, nodes)


def _follower_lag(cluster: DevCluster, table: str) -> list[float]:
    """Seconds from each acknowledged write of ``table`` (at its leader) to the first
    follower read on its follower that sees it, under a steady writer."""
    with MetaClient(cluster.meta) as meta:
        (route,) = meta.route([table])
    follower = next(ep for ep in cluster.node_endpoints if ep.grpc == route.followers[0].endpoint)
    leader = next(ep for ep in cluster.node_endpoints if ep.grpc == route.endpoint)
    seen: list[tuple[float, float]] = []  # (answered at, newest v seen)
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            v = scalar(follower.http, f"SELECT max(v) AS v FROM {table}", read="follower")
            seen.append((time.perf_counter(), -1.0 if v is None else float(v)))

    reader = threading.Thread(target=read, name="bench-follower-reader", daemon=True)
    acked: list[float] = []
    with grpc.insecure_channel(leader.grpc) as channel:
        base = float(scalar(leader.http, f"SELECT max(v) AS v FROM {table}") or 0.0)
        reader.start()
        try:
            for k in range(1, LAG_WRITES + 1):
                error = write_once(channel, table, 1_950_000_000_000 + k, base + k)
                if error is not None:
                    raise BenchError(f"a steady write to {table}'s leader failed: {error}")
                acked.append(time.perf_counter())
                time.sleep(LAG_WRITE_PAUSE_S)
            bounded(
                "the follower seeing the last write",
                SETTLE_LIMIT_S,
                lambda: bool(seen) and seen[-1][1] >= base + LAG_WRITES,
                0.01,
            )
        finally:
            stop.set()
            reader.join(timeout=30)
    lags = []
    for k, at in enumerate(acked, start=1):
        visible = next(t for t, v in seen if v >= base + k)
        lags.append(max(0.0, visible - at))
    return lags


def followers(lease_ttl_s: int, kills: int, scratch: Path) -> tuple[list[float], list[Kill]]:
    """On three nodes with a follower for every shard: the follower lag under a steady
    writer, then SIGKILLs of a table's leader (its follower takes over) as in (a)."""
    tables = [f"bench_f{i}" for i in range(3)]
    with DevCluster(
        scratch / "cluster-followers", nodes=3, shards=3, followers=1, lease_ttl_s=lease_ttl_s
    ) as cluster:
        with grpc.insecure_channel(cluster.node_endpoints[0].grpc) as channel:
            for i, table in enumerate(tables):
                error = write_once(channel, table, 1_940_000_000_000 + i)
                if error is not None:
                    raise BenchError(f"creating {table}: {error}")
        _settle_followers(cluster)
        lags = _follower_lag(cluster, tables[0])
        done: list[Kill] = []
        for k in range(min(kills, 3)):
            _settle_followers(cluster)
            i, table = victim(cluster, tables, k)
            with MetaClient(cluster.meta) as meta:
                (route,) = meta.route([table])
            kill = kill_and_write(cluster, i, table, 1_960_000_000_000 + k * 1_000_000)
            with MetaClient(cluster.meta) as meta:
                (after,) = meta.route([table])
            if after.endpoint != route.followers[0].endpoint:
                raise BenchError(f"{table} went to {after.endpoint}, not its follower")
            done.append(kill)
            cluster.processes[cluster.node_endpoints[i].name].stop()
            cluster.start_node(i)
    return lags, done


def quantile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile of ``values`` (the nearest rank at or below)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]
