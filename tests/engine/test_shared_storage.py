"""Nothing durable lives on the node: a writer whose WAL is on a real Kafka-protocol broker,
SSTs on a real S3 server and catalog in a shared SQLite file is killed with SIGKILL; another
process on a fresh data directory reads every acknowledged row exactly once."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import boto3
import pytest

from gnomon_app.devcluster.brokers import running_moto
from node.backends import Storage, open_engine
from node.engine.shard import STANDALONE_SHARD
from tests.wal.test_kafka import running_tansu

from .shared_writer import BATCH, storage

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
KILLS = 3


def _read_ids(data_dir: str, cfg: Storage) -> Counter[int]:
    engine = open_engine(data_dir, cfg, compaction_threads=0, flush_on_close=False)
    try:
        engine.open_shard(STANDALONE_SHARD)
        return Counter(engine.read_all("shared", columns=["id"]).column("id").to_pylist())
    finally:
        engine.close()


def test_another_process_reads_every_acknowledged_row(tmp_path: Path) -> None:
    rng = random.Random(7)
    with running_tansu(tmp_path) as broker, running_moto(tmp_path) as endpoint:
        bucket = f"gnomon-{uuid.uuid4().hex[:8]}"
        s3 = boto3.client(
            "s3",
            endpoint_url=endpoint,
            region_name="us-east-1",
            aws_access_key_id="test",
            aws_secret_access_key="test",
        )
        s3.create_bucket(Bucket=bucket)
        args = [
            broker.bootstrap,
            f"ns{uuid.uuid4().hex[:6]}",
            endpoint,
            bucket,
            str(tmp_path / "shared-meta.db"),
        ]
        cfg = storage(*args)
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "AWS_ACCESS_KEY_ID": "test",
            "AWS_SECRET_ACCESS_KEY": "test",
        }
        acked: set[int] = set()
        next_batch = 0
        for kill in range(KILLS):
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "tests.engine.shared_writer",
                    str(tmp_path / f"writer{kill}"),
                    str(next_batch),
                    *args,
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=ROOT,
                env=env,
            )
            assert proc.stdout is not None and proc.stderr is not None
            first = proc.stdout.readline()
            assert first, f"writer died before writing: {proc.stderr.read()!r}"
            time.sleep(rng.uniform(0.5, 2.0))
            os.kill(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate(timeout=30)
            batches = [int(first)] + [int(x) for x in out.split()]
            for b in batches:
                acked.update(range(b * BATCH, (b + 1) * BATCH))
            next_batch = max(batches) + 2  # past a batch that may be durable but unacknowledged

            os.environ.setdefault("AWS_ACCESS_KEY_ID", "test")
            os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "test")
            ids = _read_ids(str(tmp_path / f"reader{kill}"), cfg)
            dupes = [i for i, n in ids.items() if n > 1]
            assert not dupes, f"kill {kill}: rows read twice: {dupes[:10]}"
            missing = acked - ids.keys()
            assert not missing, f"kill {kill}: acknowledged rows lost: {sorted(missing)[:10]}"
        assert len(acked) > KILLS * BATCH
        # Flushed SSTs went to S3 (the replayed tail came from Kafka).
        assert s3.list_objects_v2(Bucket=bucket).get("KeyCount", 0) > 0
