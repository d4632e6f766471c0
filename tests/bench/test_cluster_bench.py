"""The cluster benchmark at toy scale against real clusters (etcd, broker, S3 server, meta and
node processes) and a standalone server: one kill is recovered from, every SDK point and
ingested row is acknowledged and counted, and the last line is the JSON report."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from bench import cluster

pytestmark = pytest.mark.cluster


@pytest.mark.long
def test_toy_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--kills", "1", "--lease-ttl-s", "3", "--tables", "4", "--sdk-clients", "2",
            "--sdk-batch", "8", "--sdk-writes", "2", "--reps", "1", "--hosts", "5",
            "--steps", "10", "--rows-per-batch", "20", "--partition-hosts", "4",
            "--partition-hours", "1", "--scratch", str(tmp_path)]  # fmt: skip
    assert cluster.main(argv) == 0
    out = capsys.readouterr().out.strip().splitlines()
    doc = json.loads(out[-1])
    assert doc["lease_ttl_s"] == 3
    [kill] = doc["kills"]
    # Nodes heartbeat every third of the TTL, so the killed node's lease had at least two
    # thirds of it left: no write of its table can be acknowledged sooner.
    assert kill["rto_s"] == doc["rto_s"] >= 3 * 2 / 3
    assert kill["attempts"] > 1 and kill["first_error"]
    assert sum(doc["sdk_tables_per_node"]) == 4
    for key in ("direct_vs_proxy", "cluster_vs_standalone_ingest"):
        assert math.isfinite(doc[key]) and doc[key] > 0
    assert set(doc["ingest_rows_per_s"]) == {"standalone", "cluster"}
    assert "failover RTO" in "\n".join(out[:-1])
    # Shard moves under a writer refuse nothing; the follower took its leader's shard.
    assert [m["kind"] for m in doc["moves"]] == ["migrate", "split"]
    assert all(m["refused"] == 0 and m["writes"] > 0 for m in doc["moves"])
    [fast] = doc["fast_kills"]
    assert fast["expired_s"] is not None and fast["rto_s"] >= fast["expired_s"] - 0.05
    assert doc["follower_lag_writes"] > 0 and doc["follower_lag_p99_s"] >= 0
    assert doc["partition_queries"] and doc["partition_ratio_median"] > 0
    assert doc["partition_ratio_max"] >= doc["partition_ratio_median"]
    # Started as the README's dev cluster (8 shards, a follower each), it spread them evenly.
    assert doc["spread_met"] and doc["leader_spread"] <= 1.5
    assert sum(doc["leaders_per_node"]) == sum(doc["followers_per_node"]) == 8


def test_bad_settings_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        cluster.main(["--lease-ttl-s", "2"])
    assert e.value.code == 2
    assert "lease TTL >= 3" in capsys.readouterr().err
