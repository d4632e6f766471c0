"""Cluster benchmark on loopback, in one run: failover RTO (a shard reopened elsewhere, and
taken over by its follower), the HoraeDB SDK's writes through three nodes in Direct and Proxy
mode, write stalls while shards move, follower lag, partition-table queries, and one cluster
node's ingest beside a standalone server.

(a) Failover RTO. A three-node dev cluster (real etcd, broker, S3 server, meta and ``gnomon
    node`` processes) holds several tables. Each round SIGKILLs a node that leads a table's
    shard and times, from the kill, one-row gRPC writes of that table sent to a surviving node
    (which routes or forwards them), retried until one is acknowledged. Also timed: when the
    meta service first routes the table to another node (detection), and when the killed
    node's lease expired (its liveness key vanished from etcd: before that nobody may act), so
    "after expiry" is what the cluster takes once it may. The killed node is then restarted and
    the cluster left to settle before the next round. Target: the median within the lease TTL
    + 3 s.
(b) SDK writes through the three nodes, Direct vs Proxy. The published ``horaedb-client`` in a
    subprocess: the same clients, batches and tables in both modes (every batch holds points of
    every table, so each write spans the nodes); Direct asks for routes and sends each owner its
    part, Proxy sends everything to one node, which forwards the parts it does not own. Runs
    alternate between the modes; the median of each. ``direct_vs_proxy`` = direct / proxy.
    The SDK's Direct mode sends a Route request before every write, even when all its routes
    are cached (then naming no table), so it pays one more round trip per write than Proxy.
(c) Ingest of one cluster node (WAL on the broker, SSTs on the S3 server, catalog on etcd)
    beside ``gnomon standalone`` on disk with its default durability (WAL fsynced before each
    answer): the TSBS cpu-only rows as line protocol over HTTP, the same bodies and client
    workers for both, alternating which goes first. Target: cluster / standalone >= 0.5.
(d) Shard moves under a steady writer. On the cluster of (a): a writer sends gRPC writes
    holding one row of every table of a shard, back to back, through a node that does not lead
    it, while an operator migrates that shard to another node, and then splits a shard. The
    longest wait between two acknowledged writes while each move runs (and a second after) is
    its stall: target <= 1 s. Refused writes are counted (there should be none: a node waits
    for a moving table at its new home).
(e) Followers. Another three-node cluster whose meta service gives every shard a follower
    (``--followers 1``). Follower lag: a steady writer at a table's leader while a reader sends
    follower reads to its follower; for each acknowledged write, the time until a follower
    read first sees it (p50, p99). Fast failover: as in (a), SIGKILL a table's leader; its
    follower takes over (checked), replaying only the log tail it had not applied. Target: the
    median time from the lease's expiry to the first acknowledged write <= 1 s, next to (a)'s.
(f) Partition tables: the TSBS cpu-only queries on a 4-partition table whose sub-tables the
    meta service spreads over the nodes of (a), against the same rows in one table on one
    node, every answer pair checked equal (``bench/partitions.py``); partition / one table per
    query type.
(g) Shard spread after a start: a cluster as ``gnomon dev-cluster --nodes 3 --followers 1``
    starts it (8 shards; the first node to register is assigned all of them, the second
    follows them all). From the start until leader shards and follower shards each differ by
    at most one between the nodes (``testkit/spread.py``): ``leader_spread`` = most /
    fewest leader shards of a node, with the leader and follower shards of each. Target:
    within 30 s.

Every row written is counted afterwards. Prints a table, then one JSON line.

    python -m bench.cluster --kills 5 --lease-ttl-s 6
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.cluster_followers import FAST_RTO_TARGET_S, followers, quantile
from bench.cluster_moves import MOVE_STALL_TARGET_S, moves
from bench.cluster_probe import (
    BenchError,
    Kill,
    count,
    failover,
    owners,
    port,
    settle,
)
from bench.partitions import Settings as PartitionSettings
from bench.partitions import run_partitions
from bench.tsbs.cpu_only import INTERVAL_MS, cpu_only_batches
from bench.tsbs.gnomon_server import GnomonServer
from bench.tsbs.payloads import line_protocol
from bench.tsbs.serving import HttpClient
from bench.tsbs.system import send_all
from gnomon_app.devcluster.cluster import DevCluster
from testkit.sdk import run_sdk
from testkit.spread import SPREAD_LIMIT_S, spread

#: What the JSON line calls the durability of each ingest target.
DURABILITY = {
    "standalone": "disk WAL fsynced before each answer (--wal-sync always, the default)",
    "cluster": "WAL on the Kafka-protocol broker, SSTs on the S3 server, catalog on etcd",
}
RTO_SLACK_S = 3.0
INGEST_RATIO_TARGET = 0.5
SDK_TIMEOUT_S = 900.0
LP_PATH = "/influxdb/v1/write?db=public&precision=ms"


@dataclass(frozen=True)
class Settings:
    lease_ttl_s: int = 6
    kills: int = 5
    tables: int = 12
    sdk_clients: int = 4
    #: Points per SDK write, spread evenly over the tables.
    sdk_batch: int = 300
    sdk_writes: int = 80
    reps: int = 3
    hosts: int = 100
    steps: int = 2000
    rows_per_batch: int = 10_000
    workers: int = 2
    #: The partition-table queries (f): TSBS hosts and hours of rows.
    partition_hosts: int = 40
    partition_hours: int = 12


# -- helpers -------------------------------------------------------------------------------


def _poster(http: str) -> Callable[[bytes], None]:
    """Sends a line-protocol body to ``http`` (host:port), one keep-alive connection per
    calling thread."""
    client = HttpClient(port(http))

    def post(body: bytes) -> None:
        client.post(LP_PATH, body)

    return post


# -- (b) SDK writes, Direct vs Proxy --------------------------------------------------------

_SDK_SCENARIO = """
async def scenario(ctx):
    tables, n_clients, n_writes, batch, t0 = {tables!r}, {clients}, {writes}, {batch}, {t0}
    per_table = batch // len(tables)

    def requests(k):
        out = []
        for w in range(n_writes + 1):
            req = WriteRequest()
            req.add_points([
                point(t, t0 + w * per_table + i, {{"client": V().string(f"c{{k}}")}},
                      {{"v": V().double(i)}})
                for t in tables for i in range(per_table)
            ])
            out.append(req)
        return out

    clients = [client({mode!r}) for _ in range(n_clients)]
    reqs = [requests(k) for k in range(n_clients)]

    async def send(k, todo):
        ok = failed = 0
        for req in todo:
            got = await clients[k].write(ctx, req)
            ok, failed = ok + got.get_success(), failed + got.get_failed()
        return [ok, failed]

    # The first write of each client is not timed: routes, connections, new tables (made by
    # one client first: concurrent first writes of a new table through different nodes
    # are not what is measured here).
    warm = [await send(0, reqs[0][:1])]
    warm += await asyncio.gather(*(send(k, reqs[k][:1]) for k in range(1, n_clients)))
    began = time.perf_counter()
    timed = await asyncio.gather(*(send(k, reqs[k][1:]) for k in range(n_clients)))
    elapsed = time.perf_counter() - began
    return {{"elapsed": elapsed, "warm": [sum(x) for x in zip(*warm)],
             "timed": [sum(x) for x in zip(*timed)]}}
"""


def _sdk_run(cluster: DevCluster, s: Settings, tables: Sequence[str], mode: str, run: int,
             scratch: Path) -> float:  # fmt: skip
    """Rows per second of one SDK run; every point of it acknowledged."""
    per_table = s.sdk_batch // len(tables)
    scenario = _SDK_SCENARIO.format(
        tables=list(tables), clients=s.sdk_clients, writes=s.sdk_writes, batch=s.sdk_batch,
        t0=1_700_000_000_000 + run * (s.sdk_writes + 1) * per_table, mode=mode,
    )  # fmt: skip
    work = scratch / f"sdk-{run}"
    work.mkdir(parents=True)
    out = run_sdk(cluster.node_endpoints[0].grpc, scenario, work, timeout_s=SDK_TIMEOUT_S)
    points = s.sdk_clients * s.sdk_writes * per_table * len(tables)
    if out["timed"] != [points, 0] or out["warm"] != [s.sdk_clients * per_table * len(tables), 0]:
        raise BenchError(f"SDK {mode}: acknowledged {out}, sent {points} timed points")
    return float(points / out["elapsed"])


def sdk_writes(
    cluster: DevCluster, s: Settings, tables: Sequence[str], scratch: Path
) -> dict[str, list[float]]:
    """Rows/s of each run per mode; runs alternate which mode goes first."""
    rates: dict[str, list[float]] = {"Direct": [], "Proxy": []}
    run = 0
    for rep in range(s.reps):
        for mode in ("Direct", "Proxy") if rep % 2 == 0 else ("Proxy", "Direct"):
            rates[mode].append(_sdk_run(cluster, s, tables, mode, run, scratch))
            run += 1
    per_table = s.sdk_batch // len(tables)
    expected = run * s.sdk_clients * (s.sdk_writes + 1) * per_table
    for table, route in owners(cluster, tables).items():
        got = count(route.endpoints["http"], table)
        if got != expected:
            raise BenchError(f"SDK writes: {table} holds {got} rows, {expected} were written")
    return rates


# -- (c) ingest: one cluster node vs standalone ---------------------------------------------


def _bodies(s: Settings, rep: int) -> list[bytes]:
    """The rep's line-protocol bodies: the same hosts and steps, its own time range."""
    start = 1_451_606_400_000 + rep * s.steps * INTERVAL_MS
    return [
        line_protocol(b)
        for b in cpu_only_batches(s.hosts, s.steps, start_ms=start, rows_per_batch=s.rows_per_batch)
    ]


def ingest(s: Settings, scratch: Path) -> dict[str, list[float]]:
    """Rows/s of each rep per target. Both run at once (the cluster's services idle while the
    standalone server writes); the first body of each is written untimed (table creation)."""
    warm = line_protocol(next(cpu_only_batches(s.hosts, 1, start_ms=1_400_000_000_000)))
    standalone = GnomonServer(scratch / "standalone")
    try:
        with DevCluster(scratch / "cluster-1", nodes=1, lease_ttl_s=s.lease_ttl_s) as cluster:
            targets = {
                "standalone": f"127.0.0.1:{standalone.http_port}",
                "cluster": cluster.node_endpoints[0].http,
            }
            posts = {name: _poster(http) for name, http in targets.items()}
            rates: dict[str, list[float]] = {name: [] for name in targets}
            for post in posts.values():
                post(warm)
            for rep in range(s.reps):
                bodies = _bodies(s, rep)
                order = list(targets) if rep % 2 == 0 else list(targets)[::-1]
                for name in order:
                    seconds = send_all(bodies, posts[name], s.workers)
                    rates[name].append(s.hosts * s.steps / seconds)
            expected = s.hosts * (1 + s.reps * s.steps)
            for name, http in targets.items():
                got = count(http, "cpu")
                if got != expected:
                    raise BenchError(f"ingest: {name} holds {got} rows, {expected} were written")
    finally:
        standalone.stop()
    return rates


# -- the run --------------------------------------------------------------------------------


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 2)


def run(s: Settings, scratch: Path) -> dict[str, Any]:
    tables = [f"bench_t{i}" for i in range(s.tables)]
    # As many shards on each node: the meta service weighs a node by the shards it leads and
    # places every new table on the lightest, so with uneven counts all would land on one.
    nodes = 3
    with DevCluster(
        scratch / "cluster-3", nodes=nodes, shards=2 * nodes, lease_ttl_s=s.lease_ttl_s
    ) as cluster:
        # Shards move onto the nodes that joined last for a while after the cluster is up.
        settle(cluster, nodes)
        sdk = sdk_writes(cluster, s, tables, scratch)
        tables_per_node = sorted(
            sum(r.endpoint == ep.grpc for r in owners(cluster, tables).values())
            for ep in cluster.node_endpoints
        )
        moved = moves(cluster)
        partitioned = run_partitions(
            cluster, PartitionSettings(hosts=s.partition_hosts, hours=s.partition_hours)
        )
        kills = failover(cluster, tables, s.kills)
    lags, fast = followers(s.lease_ttl_s, s.kills, scratch)
    started = spread(s.lease_ttl_s, scratch)
    rates = ingest(s, scratch)
    stall = {m.kind: round(m.stall_s, 3) for m in moved}
    fast_after = statistics.median(k.after_expiry_s or 0.0 for k in fast)
    reopen_after = statistics.median(k.after_expiry_s or 0.0 for k in kills)
    rto = statistics.median(k.rto_s for k in kills)
    direct, proxy = (statistics.median(sdk[m]) for m in ("Direct", "Proxy"))
    standalone, node = (statistics.median(rates[t]) for t in ("standalone", "cluster"))
    return {
        "bench": "cluster",
        "rto_s": round(rto, 2),
        "lease_ttl_s": s.lease_ttl_s,
        "rto_target_s": s.lease_ttl_s + RTO_SLACK_S,
        "rto_met": rto <= s.lease_ttl_s + RTO_SLACK_S,
        "kills": [_kill_doc(k) for k in kills],
        "reopen_rto_after_expiry_s": round(reopen_after, 2),
        "fast_rto_after_expiry_s": round(fast_after, 2),
        "fast_rto_target_s": FAST_RTO_TARGET_S,
        "fast_rto_met": fast_after <= FAST_RTO_TARGET_S,
        "fast_kills": [_kill_doc(k) for k in fast],
        "follower_lag_p50_s": round(quantile(lags, 0.5), 3),
        "follower_lag_p99_s": round(quantile(lags, 0.99), 3),
        "follower_lag_writes": len(lags),
        "migrate_stall_s": stall["migrate"],
        "split_stall_s": stall["split"],
        "stall_target_s": MOVE_STALL_TARGET_S,
        "stall_met": max(stall.values()) <= MOVE_STALL_TARGET_S,
        "moves": [
            {**asdict(m), "stall_s": round(m.stall_s, 3), "move_s": round(m.move_s, 3)}
            for m in moved
        ],
        "partition_queries": partitioned["queries"],
        "partition_ratio_median": partitioned["ratio_median"],
        "partition_ratio_max": partitioned["ratio_max"],
        "partition_rows": partitioned["rows"],
        "spread_s": _round(started.spread_s),
        "spread_target_s": SPREAD_LIMIT_S,
        "spread_met": started.spread_s is not None,
        "leaders_per_node": list(started.copies.leaders),
        "followers_per_node": list(started.copies.followers),
        "direct_vs_proxy": round(direct / proxy, 2),
        "sdk_rows_per_s": {m: round(statistics.median(v)) for m, v in sdk.items()},
        "sdk_runs_rows_per_s": {m: [round(x) for x in v] for m, v in sdk.items()},
        "sdk_tables_per_node": tables_per_node,
        "cluster_vs_standalone_ingest": round(node / standalone, 2),
        "ingest_target": INGEST_RATIO_TARGET,
        "ingest_met": node / standalone >= INGEST_RATIO_TARGET,
        "ingest_rows_per_s": {"standalone": round(standalone), "cluster": round(node)},
        "ingest_runs_rows_per_s": {t: [round(x) for x in v] for t, v in rates.items()},
        "durability": DURABILITY,
        "settings": asdict(s),
        "leader_spread": _round(started.copies.leader_spread),
    }


def _kill_doc(k: Kill) -> dict[str, Any]:
    return {
        **asdict(k),
        "rto_s": round(k.rto_s, 2),
        "rerouted_s": _round(k.rerouted_s),
        "expired_s": _round(k.expired_s),
        "after_expiry_s": _round(k.after_expiry_s),
    }


def table(doc: dict[str, Any]) -> str:
    s = doc["settings"]
    rto = ", ".join(f"{k['rto_s']:.2f}" for k in doc["kills"])
    rerouted = ", ".join(str(k["rerouted_s"]) for k in doc["kills"])
    lines = [
        ("failover RTO, median (s)", f"{doc['rto_s']:.2f}",
         f"target <= {doc['rto_target_s']:.0f} (lease TTL {doc['lease_ttl_s']} s + 3)"),
        ("  each kill (s)", rto, "SIGKILL -> first acknowledged write"),
        ("  rerouted by meta (s)", rerouted, "SIGKILL -> route names another node"),
        ("  after lease expiry (s)", f"{doc['reopen_rto_after_expiry_s']:.2f}",
         "median: lease expired -> first acknowledged write (shard reopened elsewhere)"),
        ("fast failover after expiry (s)", f"{doc['fast_rto_after_expiry_s']:.2f}",
         f"target <= {FAST_RTO_TARGET_S:.0f}; the follower takes over: "
         + ", ".join(f"{k['after_expiry_s']:.2f}" for k in doc["fast_kills"])),
        ("follower lag p50 / p99 (s)",
         f"{doc['follower_lag_p50_s']:.3f} / {doc['follower_lag_p99_s']:.3f}",
         f"ack at the leader -> seen by a follower read, {doc['follower_lag_writes']} writes"),
        *(
            (f"{m['kind']} stall (s)", f"{m['stall_s']:.3f}",
             f"target <= {MOVE_STALL_TARGET_S:.0f}; shard {m['shard']} ({m['tables']} tables) "
             f"moved in {m['move_s']:.2f} s, {m['writes']} writes, {m['refused']} refused")
            for m in doc["moves"]
        ),
        ("partition table / one table",
         f"{doc['partition_ratio_median']:.2f}",
         f"median over the TSBS query types (largest {doc['partition_ratio_max']:.2f}), "
         f"{doc['partition_rows']:,} rows; 4 sub-tables over "
         "3 nodes vs one table on one node, answers equal; per type: "
         + ", ".join(f"{n} {q['ratio']:.2f}" for n, q in doc["partition_queries"].items())),
        ("leader spread (most/fewest)", str(doc["leader_spread"]),
         f"leaders per node {doc['leaders_per_node']}, followers per node "
         f"{doc['followers_per_node']}, even "
         + ("never" if doc["spread_s"] is None else f"{doc['spread_s']:.1f} s")
         + f" after the start (target <= {SPREAD_LIMIT_S:.0f}); 3 nodes, 1 follower"),
        ("SDK Direct rows/s", f"{doc['sdk_rows_per_s']['Direct']:,}",
         f"{s['sdk_clients']} clients x {s['sdk_batch']} points/write over {s['tables']} tables"),
        ("SDK Proxy rows/s", f"{doc['sdk_rows_per_s']['Proxy']:,}",
         f"tables per node {doc['sdk_tables_per_node']}"),
        ("  direct / proxy", f"{doc['direct_vs_proxy']:.2f}", ""),
        ("standalone ingest rows/s", f"{doc['ingest_rows_per_s']['standalone']:,}",
         DURABILITY["standalone"]),
        ("cluster node ingest rows/s", f"{doc['ingest_rows_per_s']['cluster']:,}",
         DURABILITY["cluster"]),
        ("  cluster / standalone", f"{doc['cluster_vs_standalone_ingest']:.2f}",
         f"target >= {INGEST_RATIO_TARGET}"),
    ]  # fmt: skip
    w0 = max(len(a) for a, _, _ in lines)
    w1 = max(len(b) for _, b, _ in lines)
    return "\n".join(f"{a.ljust(w0)}  {b.rjust(w1)}  {c}".rstrip() for a, b, c in lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    defaults = Settings()
    for name, value in asdict(defaults).items():
        parser.add_argument("--" + name.replace("_", "-"), type=int, default=value)
    parser.add_argument("--scratch", default=None, help="Where the data directories go.")
    args = vars(parser.parse_args(argv))
    scratch_dir = args.pop("scratch")
    s = Settings(**args)
    if min(asdict(s).values()) < 1 or s.lease_ttl_s < 3 or s.sdk_batch < s.tables:
        parser.error("every count must be positive, lease TTL >= 3, sdk-batch >= tables")
    with tempfile.TemporaryDirectory(prefix="bench-cluster-", dir=scratch_dir) as scratch:
        doc = run(s, Path(scratch))
    print(table(doc))
    print(json.dumps(doc, separators=(",", ":")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
