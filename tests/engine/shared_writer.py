"""Writer process for the shared-storage test: an engine whose WAL is on Kafka, SSTs on S3 and
catalog in a shared SQLite file writes batches of unique ids forever, printing the first batch
number once each write is acknowledged."""

from __future__ import annotations

import sys

from node.backends import Storage, open_engine
from node.engine.shard import STANDALONE_SHARD

from .writer_loop import ID_COLUMNS, acknowledge_forever, append_table, id_batch

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
    append_table(engine, "shared", ID_COLUMNS, "ts", write_buffer_size=8 * 1024)
    acknowledge_forever(
        int(start), lambda k: engine.write("shared", id_batch(k, BATCH, hosts=5, step_ms=1000))
    )


if __name__ == "__main__":
    main()
