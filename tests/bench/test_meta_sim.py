"""The meta cluster simulation at a tiny size, so the benchmark keeps working."""

from __future__ import annotations

from pathlib import Path

from bench.meta_sim import run
from tests.support.etcd import EtcdServer


def test_meta_sim_runs_and_balances(tmp_path: Path) -> None:
    server = EtcdServer(tmp_path)
    server.start()
    try:
        result = run(server.endpoint, nodes=6, shards=300, verbose=False)
    finally:
        server.stop()
    assert set(result) == {"round_s", "failover_s", "load_ratio"}
    assert 1.0 <= result["load_ratio"] <= 1.1
