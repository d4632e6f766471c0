"""The TSBS "cpu-only" workload as Arrow batches: N hosts with the ten TSBS host tags and the
ten cpu fields, one reading per host every 10 s, deterministic by seed."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa

TAGS = [
    "hostname", "region", "datacenter", "rack", "os", "arch", "team", "service",
    "service_version", "service_environment",
]  # fmt: skip
FIELDS = [
    "usage_user", "usage_system", "usage_idle", "usage_nice", "usage_iowait", "usage_irq",
    "usage_softirq", "usage_steal", "usage_guest", "usage_guest_nice",
]  # fmt: skip
INTERVAL_MS = 10_000
REGIONS = [
    "us-east-1",
    "us-west-1",
    "us-west-2",
    "eu-west-1",
    "eu-central-1",
    "ap-southeast-1",
    "ap-southeast-2",
    "ap-northeast-1",
    "sa-east-1",
]


def host_tags(hosts: int, seed: int = 1) -> pa.Table:
    """One row per host: its ten tag values."""
    rng = np.random.default_rng(seed)
    region = rng.integers(0, len(REGIONS), hosts)
    return pa.table(
        {
            "hostname": [f"host_{i}" for i in range(hosts)],
            "region": [REGIONS[r] for r in region],
            "datacenter": [f"{REGIONS[r]}{'abc'[i % 3]}" for i, r in enumerate(region)],
            "rack": [str(x) for x in rng.integers(0, 100, hosts)],
            "os": [
                ["Ubuntu16.10", "Ubuntu16.04LTS", "Ubuntu15.10"][x]
                for x in rng.integers(0, 3, hosts)
            ],
            "arch": [["x64", "x86"][x] for x in rng.integers(0, 2, hosts)],
            "team": [["SF", "NYC", "LON", "CHI"][x] for x in rng.integers(0, 4, hosts)],
            "service": [str(x) for x in rng.integers(0, 20, hosts)],
            "service_version": [str(x) for x in rng.integers(0, 2, hosts)],
            "service_environment": [
                ["production", "staging", "test"][x] for x in rng.integers(0, 3, hosts)
            ],
        }
    )


def cpu_only_batches(
    hosts: int,
    steps: int,
    *,
    start_ms: int = 1_451_606_400_000,  # 2016-01-01, as TSBS
    rows_per_batch: int = 10_000,
    seed: int = 1,
) -> Iterator[pa.Table]:
    """``hosts * steps`` readings in time order, ``rows_per_batch`` rows per batch (whole time
    steps, so at least one step of all hosts)."""
    tags = host_tags(hosts, seed)
    rng = np.random.default_rng(seed + 1)
    steps_per_batch = max(1, rows_per_batch // hosts)
    level = rng.uniform(0, 100, (hosts, len(FIELDS)))
    for s0 in range(0, steps, steps_per_batch):
        k = min(steps_per_batch, steps - s0)
        n = k * hosts
        host_idx = pa.array(np.tile(np.arange(hosts), k))
        cols: dict[str, pa.Array] = {t: tags.column(t).take(host_idx) for t in TAGS}
        walk = rng.normal(0, 1, (k, hosts, len(FIELDS)))
        values = np.clip(level[None, :, :] + np.cumsum(walk, axis=0), 0, 100)
        level = values[-1]
        flat = values.reshape(n, len(FIELDS))
        for j, f in enumerate(FIELDS):
            cols[f] = pa.array(flat[:, j])
        ts = start_ms + np.repeat(np.arange(s0, s0 + k), hosts) * INTERVAL_MS
        cols["timestamp"] = pa.array(ts, pa.timestamp("ms"))
        yield pa.table(cols)
