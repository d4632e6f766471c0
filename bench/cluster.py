"""Cluster benchmark on loopback, in one run: failover RTO, the HoraeDB SDK's writes through
three nodes in Direct and Proxy mode, and one cluster node's ingest beside a standalone server.

(a) Failover RTO. A three-node dev cluster (real etcd, broker, S3 server, meta and ``gnomon
    node`` processes) holds several tables. Each round SIGKILLs a node that leads a table's
    shard and times, from the kill, one-row gRPC writes of that table sent to a surviving node
    (which routes or forwards them), retried until one is acknowledged. Also timed: when the
    meta service first routes the table to another node (detection), so the rest is the new
    owner opening the shard. The killed node is then restarted and the cluster left to settle
    before the next round. Target: the median within the lease TTL + 3 s.
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

Every row written is counted afterwards. Prints a table, then one JSON line.

    python -m bench.cluster --kills 5 --lease-ttl-s 6
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import grpc
import pyarrow as pa

from bench.tsbs.cpu_only import INTERVAL_MS, cpu_only_batches
from bench.tsbs.gnomon_server import GnomonServer
from bench.tsbs.payloads import line_protocol
from bench.tsbs.serving import HttpClient
from bench.tsbs.system import send_all
from gnomon.devcluster.cluster import DevCluster
from gnomon.proto import storage_pb2
from meta.client import MetaClient
from node.server.http import ARROW_STREAM
from tests.server.sdk import run_sdk

#: What the JSON line calls the durability of each ingest target.
DURABILITY = {
    "standalone": "disk WAL fsynced before each answer (--wal-sync always, the default)",
    "cluster": "WAL on the Kafka-protocol broker, SSTs on the S3 server, catalog on etcd",
}
RTO_SLACK_S = 3.0
INGEST_RATIO_TARGET = 0.5
#: One write attempt during failover; short, so a write stuck on the dead node is retried soon.
ATTEMPT_TIMEOUT_S = 1.0
RETRY_PAUSE_S = 0.05
#: Bound on the wait for a write after a kill, and on the cluster settling after a restart.
FAILOVER_LIMIT_S = 120.0
SETTLE_LIMIT_S = 60.0
#: Shard leaders unchanged this long count as settled.
SETTLED_FOR_S = 3.0
SDK_TIMEOUT_S = 900.0
WRITE = "/storage.StorageService/Write"
LP_PATH = "/influxdb/v1/write?db=public&precision=ms"


class BenchError(RuntimeError):
    """A write was refused, never acknowledged, or rows went missing."""


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


# -- helpers -------------------------------------------------------------------------------


def _owners(cluster: DevCluster, tables: Sequence[str]) -> dict[str, Any]:
    """Each table's route (leader endpoint, its http endpoint) as the meta service has it."""
    with MetaClient(cluster.meta) as client:
        return {r.table: r for r in client.route(list(tables))}


def _port(endpoint: str) -> int:
    return int(endpoint.rsplit(":", 1)[1])


def _count(http: str, table: str) -> int:
    """``count(*)`` of ``table`` through the HTTP SQL API at ``http`` (host:port)."""
    body, content_type = HttpClient(_port(http)).post_typed(
        "/sql?format=arrow", json.dumps({"query": f"SELECT count(*) AS n FROM {table}"}).encode()
    )
    if not content_type.startswith(ARROW_STREAM):
        raise BenchError(f"count of {table}: {body[:300]!r}")
    return int(pa.ipc.open_stream(body).read_all().column("n")[0].as_py())


def _poster(http: str) -> Callable[[bytes], None]:
    """Sends a line-protocol body to ``http`` (host:port), one keep-alive connection per
    calling thread."""
    client = HttpClient(_port(http))

    def post(body: bytes) -> None:
        client.post(LP_PATH, body)

    return post


def _one_row(table: str, ts: int) -> bytes:
    req = storage_pb2.WriteRequest()
    req.context.database = "public"
    t = req.table_requests.add(table=table, tag_names=["host"], field_names=["v"])
    entry = t.entries.add()
    entry.tags.add(name_index=0).value.string_value = "failover"
    entry.field_groups.add(timestamp=ts).fields.add(name_index=0).value.float64_value = 1.0
    return req.SerializeToString()


def _write_once(channel: grpc.Channel, table: str, ts: int) -> str | None:
    """None if one row of ``table`` was acknowledged, else why not."""
    call = channel.unary_unary(
        WRITE,
        request_serializer=lambda b: b,
        response_deserializer=storage_pb2.WriteResponse.FromString,
    )
    try:
        resp = call(_one_row(table, ts), timeout=ATTEMPT_TIMEOUT_S)
    except grpc.RpcError as e:
        return f"{e.code().name}: {e.details()}"
    return None if resp.header.code == 200 else f"{resp.header.code}: {resp.header.error}"


def _bounded(what: str, limit_s: float, done: Callable[[], bool], pause_s: float) -> None:
    deadline = time.monotonic() + limit_s
    while not done():
        if time.monotonic() > deadline:
            raise BenchError(f"{what}: not within {limit_s}s")
        time.sleep(pause_s)


# -- (a) failover ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Kill:
    node: str
    table: str
    rto_s: float
    #: When the meta service was first seen routing the table to another node (None: the
    #: write went through before).
    rerouted_s: float | None
    attempts: int
    first_error: str


def _settle(cluster: DevCluster, nodes: int) -> None:
    """Until ``nodes`` nodes are live, every shard is ready and led by one of them, and no
    shard has changed for :data:`SETTLED_FOR_S` (rebalancing onto a new node is over)."""
    seen: list[Any] = [None, time.monotonic()]

    def settled() -> bool:
        with MetaClient(cluster.meta) as client:
            live = {n.name for n in client.nodes() if n.live}
            leaders = tuple((s.id, s.leader, s.epoch, s.status) for s in client.shards())
        now = time.monotonic()
        if leaders != seen[0]:
            seen[0], seen[1] = leaders, now
        return (
            len(live) == nodes
            and all(leader in live and status == "ready" for _, leader, _, status in leaders)
            and now - seen[1] >= SETTLED_FOR_S
        )

    _bounded("the cluster settling", SETTLE_LIMIT_S, settled, 0.2)


def _victim(cluster: DevCluster, tables: Sequence[str], round_: int) -> tuple[int, str]:
    """A node leading some table's shard (a different one each round where possible), and
    that table."""
    owners = _owners(cluster, tables)
    indices = [
        i for i, ep in enumerate(cluster.node_endpoints)
        if any(r.endpoint == ep.grpc for r in owners.values())
    ]  # fmt: skip
    i = indices[round_ % len(indices)]
    table = next(t for t, r in owners.items() if r.endpoint == cluster.node_endpoints[i].grpc)
    return i, table


def _moved(meta: MetaClient, table: str, old: str) -> bool:
    """Whether the meta service routes ``table`` to a node other than ``old``."""
    endpoint = meta.route([table])[0].endpoint
    return bool(endpoint) and endpoint != old


def _kill_and_write(cluster: DevCluster, i: int, table: str, ts: int) -> Kill:
    victim = cluster.node_endpoints[i]
    entry = next(ep for ep in cluster.node_endpoints if ep.name != victim.name)
    attempts, first_error = 0, ""
    rerouted: float | None = None
    with grpc.insecure_channel(entry.grpc) as channel, MetaClient(cluster.meta) as meta:
        began = time.perf_counter()
        cluster.processes[victim.name].kill(signal.SIGKILL)
        while True:
            # The route first, so a reroute is seen before the write it lets through.
            if rerouted is None and _moved(meta, table, victim.grpc):
                rerouted = time.perf_counter() - began
            attempts += 1
            error = _write_once(channel, table, ts + attempts)
            now = time.perf_counter() - began
            if error is None:
                break
            first_error = first_error or error
            if now > FAILOVER_LIMIT_S:
                raise BenchError(f"no write of {table} acknowledged {now:.0f}s after the kill")
            time.sleep(RETRY_PAUSE_S)
    return Kill(victim.name, table, now, rerouted, attempts, first_error)


def failover(cluster: DevCluster, tables: Sequence[str], kills: int) -> list[Kill]:
    """``kills`` rounds of: SIGKILL a table's owner, write that table until acknowledged,
    restart the node, let the cluster settle."""
    out: list[Kill] = []
    for k in range(kills):
        _settle(cluster, len(cluster.node_endpoints))
        i, table = _victim(cluster, tables, k)
        out.append(_kill_and_write(cluster, i, table, 1_800_000_000_000 + k * 1_000_000))
        cluster.processes[cluster.node_endpoints[i].name].stop()
        cluster.start_node(i)
    _settle(cluster, len(cluster.node_endpoints))
    return out


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
    for table, route in _owners(cluster, tables).items():
        got = _count(route.endpoints["http"], table)
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
                got = _count(http, "cpu")
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
        _settle(cluster, nodes)
        sdk = sdk_writes(cluster, s, tables, scratch)
        spread = sorted(
            sum(r.endpoint == ep.grpc for r in _owners(cluster, tables).values())
            for ep in cluster.node_endpoints
        )
        kills = failover(cluster, tables, s.kills)
    rates = ingest(s, scratch)
    rto = statistics.median(k.rto_s for k in kills)
    direct, proxy = (statistics.median(sdk[m]) for m in ("Direct", "Proxy"))
    standalone, node = (statistics.median(rates[t]) for t in ("standalone", "cluster"))
    return {
        "bench": "cluster",
        "rto_s": round(rto, 2),
        "lease_ttl_s": s.lease_ttl_s,
        "rto_target_s": s.lease_ttl_s + RTO_SLACK_S,
        "rto_met": rto <= s.lease_ttl_s + RTO_SLACK_S,
        "kills": [
            {**asdict(k), "rto_s": round(k.rto_s, 2), "rerouted_s": _round(k.rerouted_s)}
            for k in kills
        ],
        "direct_vs_proxy": round(direct / proxy, 2),
        "sdk_rows_per_s": {m: round(statistics.median(v)) for m, v in sdk.items()},
        "sdk_runs_rows_per_s": {m: [round(x) for x in v] for m, v in sdk.items()},
        "sdk_tables_per_node": spread,
        "cluster_vs_standalone_ingest": round(node / standalone, 2),
        "ingest_target": INGEST_RATIO_TARGET,
        "ingest_met": node / standalone >= INGEST_RATIO_TARGET,
        "ingest_rows_per_s": {"standalone": round(standalone), "cluster": round(node)},
        "ingest_runs_rows_per_s": {t: [round(x) for x in v] for t, v in rates.items()},
        "durability": DURABILITY,
        "settings": asdict(s),
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
