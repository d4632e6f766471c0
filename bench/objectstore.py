"""S3 object store put/get throughput vs raw boto3 on the same server, side by side in one run.
Needs an S3 endpoint: ``--endpoint URL --bucket NAME``, or ``--moto`` to start the test server.

    .venv/bin/python -m bench.objectstore --objects 40 --size 4194304 --moto
"""

from __future__ import annotations

import argparse
import os
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import boto3

from bench.common import median, report, timed
from objectstore.s3 import S3ObjectStore


@contextmanager
def moto() -> Iterator[str]:
    from gnomon_app.devcluster.brokers import running_moto

    with tempfile.TemporaryDirectory() as d, running_moto(Path(d)) as endpoint:
        yield endpoint


def _client(endpoint: str) -> Any:
    return boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--objects", type=int, default=40)
    ap.add_argument("--size", type=int, default=4 * 1024 * 1024)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--endpoint", default=None)
    ap.add_argument("--bucket", default=None)
    ap.add_argument("--moto", action="store_true")
    args = ap.parse_args()
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "test")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "test")
    data = [os.urandom(args.size) for _ in range(args.objects)]
    mb = args.objects * args.size / 1e6
    with moto() if args.moto else _given(args.endpoint) as endpoint:
        client = _client(endpoint)
        bucket = args.bucket or f"bench-{uuid.uuid4().hex[:8]}"
        if not args.bucket:
            client.create_bucket(Bucket=bucket)
        store = S3ObjectStore(bucket, endpoint_url=endpoint, region="us-east-1")

        def ours_put() -> None:
            for i, d in enumerate(data):
                store.put(f"ours/{i}", d)

        def raw_put() -> None:
            for i, d in enumerate(data):
                client.put_object(Bucket=bucket, Key=f"raw/{i}", Body=d)

        def ours_get() -> None:
            for i in range(len(data)):
                store.get(f"ours/{i}")

        def raw_get() -> None:
            for i in range(len(data)):
                client.get_object(Bucket=bucket, Key=f"raw/{i}")["Body"].read()

        rows = []
        for name, ours, raw in (("put", ours_put, raw_put), ("get", ours_get, raw_get)):
            o, r = [], []
            for _ in range(args.reps):
                o.append(mb / timed(ours))
                r.append(mb / timed(raw))
            om, rm = median(o), median(r)
            print(f"{name}: gnomon {om:,.1f} MB/s, raw boto3 {rm:,.1f} MB/s, ratio {om / rm:.2f}")
            rows.append((f"{name} {args.objects} x {args.size:,} B", om, rm, om / rm))
    report("S3 object store vs raw boto3 (median of reps)", rows, unit="MB/s")


@contextmanager
def _given(endpoint: str | None) -> Iterator[str]:
    if endpoint is None:
        raise SystemExit("give --endpoint URL (and --bucket) or --moto")
    yield endpoint


if __name__ == "__main__":
    main()
