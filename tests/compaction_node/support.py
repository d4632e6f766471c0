"""What the compaction-node tests do to a running cluster: make a table whose writes flush
into exactly enough SSTs for one compaction, check its rows, read the data node's metrics,
ask compaction nodes their status, and list the table's workspace on the S3 server."""

from __future__ import annotations

import urllib.request

import boto3  # type: ignore[import-untyped]

from gnomon.proto import compaction_pb2
from gnomon_app.devcluster.cluster import BUCKET, S3_ENV, DevCluster
from meta.client import MetaClient
from node.engine.compaction.client import CompactionClient
from tests.cluster.support import http_sql, write_lines

#: Rows per write; each write is larger than the tables' write buffer, so each flushes one SST,
#: and the fourth (compaction_min_threshold) makes the table compact.
ROWS = 1000
BATCHES = 4
T0 = 1_700_000_000_000
#: Bound of every wait; far above what the step takes.
WAIT_S = 120.0


def create_table(cluster: DevCluster, name: str) -> int:
    """An APPEND table (a row stored twice would show) with a small write buffer; its id."""
    status, body = http_sql(
        cluster.node_endpoints[0].http,
        f"CREATE TABLE {name} (host string TAG, v double, ts timestamp NOT NULL, "
        "TIMESTAMP KEY(ts)) WITH (update_mode='APPEND', write_buffer_size='16kb')",
    )
    assert status == 200, body
    with MetaClient(cluster.meta) as client:
        return int(client.route([name])[0].table_id)


def write(cluster: DevCluster, name: str, batches: range = range(BATCHES)) -> None:
    """Write ``batches`` of ROWS rows each: row i has ts T0 + i and v = i."""
    for b in batches:
        lines = "\n".join(
            f"{name},host=h{i % 10} v={i} {T0 + i}" for i in range(b * ROWS, (b + 1) * ROWS)
        )
        status, body = write_lines(cluster.node_endpoints[0].http, lines)
        assert status == 204, body


def check_rows(cluster: DevCluster, name: str) -> None:
    """Every row written is there exactly once: counts, distinct keys, key range and sum."""
    n = BATCHES * ROWS
    status, body = http_sql(
        cluster.node_endpoints[0].http,
        f"SELECT count(*) AS n, count(DISTINCT ts) AS keys, min(v) AS lo, max(v) AS hi, "
        f"sum(v) AS total FROM {name}",
    )
    assert status == 200, body
    row = body["rows"][0]
    assert (row["n"], row["keys"], row["lo"], row["hi"], row["total"]) == (
        n,
        n,
        0,
        n - 1,
        n * (n - 1) / 2,
    ), row


def metrics(endpoint: str) -> dict[str, float]:
    with urllib.request.urlopen(f"http://{endpoint}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            out[key] = float(value)
    return out


def outcome(cluster: DevCluster, name: str) -> float:
    """Compaction tasks of the data node that ended as ``name`` (offloaded, fallback_...)."""
    key = f'gnomon_compaction_tasks{{outcome="{name}"}}'
    return metrics(cluster.node_endpoints[0].http).get(key, 0.0)


def compacted(cluster: DevCluster, table: str) -> bool:
    """Every row written is flushed, and the table's SSTs are merged into one."""
    found = metrics(cluster.node_endpoints[0].http)
    files, rows = (
        found.get(f'gnomon_table_ssts{{table="{table}",unit="{u}"}}') for u in ("files", "rows")
    )
    return files == 1 and rows == BATCHES * ROWS


def status(endpoint: str) -> compaction_pb2.StatusResponse:
    with CompactionClient() as client:
        return client.status(endpoint)


def workspace(cluster: DevCluster, table_id: int) -> list[str]:
    """The objects under the table's workspace on the S3 server."""
    s3 = boto3.client(
        "s3",
        endpoint_url=cluster.s3_endpoint,
        aws_access_key_id=S3_ENV["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=S3_ENV["AWS_SECRET_ACCESS_KEY"],
        region_name=S3_ENV["AWS_DEFAULT_REGION"],
    )
    found = s3.list_objects_v2(Bucket=BUCKET, Prefix=f"sst/tables/{table_id}/workspace/")
    return [o["Key"] for o in found.get("Contents", [])]
