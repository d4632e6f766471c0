"""WAL append throughput vs the limit, side by side in one run.

disk: ``DiskWal.write`` (sync=always) vs raw appends of the same payloads to a file with an
fdatasync after each. kafka: ``KafkaWal.write`` vs raw confluent-kafka produce of the same
payloads (acks=all, each waited for, as the WAL acknowledges only after the broker). The Kafka
case needs a broker: ``--kafka HOST:PORT``, or ``--tansu`` to start the test broker locally.

    .venv/bin/python -m bench.wal --writes 2000 --payload 65536 --tansu
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from bench.common import median, timed
from node.wal.disk import DiskWal


def disk_wal(payloads: list[bytes], root: str) -> None:
    wal = DiskWal(root, sync="always")
    try:
        wal.open_region(0)
        for p in payloads:
            wal.write(0, 1, p)
    finally:
        wal.close()


def disk_limit(payloads: list[bytes], root: str) -> None:
    os.makedirs(root, exist_ok=True)
    fd = os.open(os.path.join(root, "log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        for p in payloads:
            os.write(fd, p)
            os.fdatasync(fd)
    finally:
        os.close(fd)


def kafka_wal(payloads: list[bytes], bootstrap: str) -> None:
    from wal_kafka import KafkaWal

    wal = KafkaWal(bootstrap, namespace=f"bench{uuid.uuid4().hex[:8]}")
    try:
        wal.open_region(0)
        wal.write(0, 1, b"warm-up")  # the first idempotent produce sets up the producer
        for p in payloads:
            wal.write(0, 1, p)
    finally:
        wal.close()


def kafka_limit(payloads: list[bytes], bootstrap: str) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"bench-raw-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "batch.num.messages": 1,
            "linger.ms": 0,
            "allow.auto.create.topics": False,
        }
    )
    producer.produce(topic, b"warm-up")
    producer.flush(30)
    for p in payloads:
        producer.produce(topic, p)
        producer.flush(30)


@contextmanager
def tansu(log_dir: Path) -> Iterator[str]:
    from gnomon_app.devcluster.brokers import running_tansu

    with running_tansu(log_dir) as broker:
        yield broker.bootstrap


def measure(
    name: str, ours: Callable[[], None], limit: Callable[[], None], n: int, nbytes: int, reps: int
) -> tuple[str, float, float, float]:
    o, li = [], []
    for _ in range(reps):
        o.append(n / timed(ours))
        li.append(n / timed(limit))
    om, lm = median(o), median(li)
    mb = nbytes / n / 1e6
    print(
        f"{name}: gnomon {om:,.0f} writes/s ({om * mb:,.1f} MB/s), "
        f"limit {lm:,.0f} writes/s ({lm * mb:,.1f} MB/s), ratio {om / lm:.2f}"
    )
    return name, om, lm, om / lm


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--writes", type=int, default=2000)
    ap.add_argument("--payload", type=int, default=64 * 1024, help="bytes per write")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--kafka", default=None, help="bootstrap of a Kafka broker")
    ap.add_argument("--tansu", action="store_true", help="start a local test broker")
    args = ap.parse_args()
    payloads = [os.urandom(args.payload) for _ in range(args.writes)]
    nbytes = args.writes * args.payload
    scratch = tempfile.mkdtemp(prefix="gnomon-bench-wal-")
    rows = []
    try:

        def fresh(name: str) -> str:
            d = os.path.join(scratch, f"{name}-{uuid.uuid4().hex[:6]}")
            return d

        rows.append(
            measure(
                "disk WAL (fsync per write)",
                lambda: disk_wal(payloads, fresh("wal")),
                lambda: disk_limit(payloads, fresh("raw")),
                args.writes,
                nbytes,
                args.reps,
            )
        )
        if args.kafka or args.tansu:
            with tansu(Path(scratch)) if args.tansu else _given(args.kafka) as bootstrap:
                rows.append(
                    measure(
                        "Kafka WAL (acks=all, waited)",
                        lambda: kafka_wal(payloads, bootstrap),
                        lambda: kafka_limit(payloads, bootstrap),
                        args.writes,
                        nbytes,
                        args.reps,
                    )
                )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    from bench.common import report

    report(f"WAL appends of {args.payload:,} B (median of reps)", rows, unit="writes/s")


@contextmanager
def _given(bootstrap: str) -> Iterator[str]:
    yield bootstrap


if __name__ == "__main__":
    main()
