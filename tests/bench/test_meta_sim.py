"""The meta cluster simulation at a tiny size, so the benchmark keeps working."""

from __future__ import annotations

import pytest

from bench.meta_sim import run
from testkit.etcd import EtcdServer

pytestmark = pytest.mark.integration


def test_meta_sim_runs_and_balances(etcd: EtcdServer) -> None:
    result = run(etcd.endpoint, nodes=6, shards=300, verbose=False)
    assert set(result) == {"round_s", "failover_s", "load_ratio"}
    assert 1.0 <= result["load_ratio"] <= 1.1
