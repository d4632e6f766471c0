"""Writer process for the shared-storage test: an engine whose WAL is on Kafka, SSTs on S3 and
catalog in a shared SQLite file writes batches of unique ids forever, printing the first batch
number once each write is acknowledged."""

from __future__ import annotations

import sys

import pyarrow as pa

from node.backends import Storage, open_engine
from node.engine.options import TableOptions, UpdateMode
from node.engine.schema import Column, ColumnType, Schema
from node.engine.shard import STANDALONE_SHARD

BATCH = 40


def storage(bootstrap: str, namespace: str, endpoint: str, bucket: str, meta: str) -> Storage:
    return Storage(
        wal=f"kafka://{bootstrap}",
        kafka_namespace=namespace,
        store=f"s3://{bucket}",
        s3_endpoint=endpoint,
        s3_region="us-east-1",
        catalog=f"sqlite://{meta}",
    )


def main() -> None:
    data_dir, start, *rest = sys.argv[1:]
    engine = open_engine(data_dir, storage(*rest), compaction_threads=0)
    engine.open_shard(STANDALONE_SHARD)
    schema = Schema.build(
        [
            Column("host", ColumnType.STRING, is_tag=True),
            Column("id", ColumnType.INT64),
            Column("ts", ColumnType.TIMESTAMP),
        ],
        timestamp_key="ts",
    )
    # APPEND keeps duplicates, so a record replayed twice would show up twice.
    opts = TableOptions(update_mode=UpdateMode.APPEND, write_buffer_size=8 * 1024)
    engine.create_table("shared", schema, opts, if_not_exists=True)
    k = int(start)
    while True:
        ids = list(range(k * BATCH, (k + 1) * BATCH))
        engine.write(
            "shared",
            pa.table(
                {
                    "host": [f"h{i % 5}" for i in ids],
                    "id": pa.array(ids, pa.int64()),
                    "ts": pa.array([i * 1000 for i in ids], pa.timestamp("ms")),
                }
            ),
        )
        print(k, flush=True)
        k += 1


if __name__ == "__main__":
    main()
