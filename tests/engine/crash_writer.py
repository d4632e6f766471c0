"""Writer process for the crash test: writes batches of unique ids forever, printing the first id
of each batch once the engine acknowledged it, while background compaction runs."""

from __future__ import annotations

import sys

import pyarrow as pa

from node.backends import open_standalone
from node.engine.options import TableOptions, UpdateMode
from node.engine.schema import Column, ColumnType, Schema

BATCH = 50


def main() -> None:
    data_dir, start = sys.argv[1], int(sys.argv[2])
    engine = open_standalone(data_dir)
    schema = Schema.build(
        [
            Column("host", ColumnType.STRING, is_tag=True),
            Column("id", ColumnType.INT64),
            Column("ts", ColumnType.TIMESTAMP),
        ],
        timestamp_key="ts",
    )
    # APPEND keeps duplicates, so a row replayed (or compacted) twice would show up twice.
    # Small memtables and a low compaction threshold make kills land in flushes and in
    # compactions (between writing outputs and committing them) as often as in writes.
    opts = TableOptions(
        update_mode=UpdateMode.APPEND,
        write_buffer_size=16 * 1024,
        segment_duration_ms=60_000,
        compaction_min_threshold=2,
    )
    engine.create_table("crash", schema, opts, if_not_exists=True)
    k = start
    while True:
        ids = list(range(k * BATCH, (k + 1) * BATCH))
        engine.write(
            "crash",
            pa.table(
                {
                    "host": [f"h{i % 7}" for i in ids],
                    "id": pa.array(ids, pa.int64()),
                    "ts": pa.array([i * 100 for i in ids], pa.timestamp("ms")),
                }
            ),
        )
        print(k, flush=True)
        k += 1


if __name__ == "__main__":
    main()
