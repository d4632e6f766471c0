"""Writer process for the crash test: writes batches of unique ids forever, printing the first id
of each batch once the engine acknowledged it, while background compaction runs."""

from __future__ import annotations

import sys

from node.backends import open_standalone

from .writer_loop import ID_COLUMNS, acknowledge_forever, append_table, id_batch

BATCH = 50


def main() -> None:
    data_dir, start = sys.argv[1], int(sys.argv[2])
    engine = open_standalone(data_dir)
    # Small memtables and a low compaction threshold make kills land in flushes and in
    # compactions (between writing outputs and committing them) as often as in writes.
    append_table(
        engine,
        "crash",
        ID_COLUMNS,
        "ts",
        write_buffer_size=16 * 1024,
        segment_duration_ms=60_000,
        compaction_min_threshold=2,
    )
    acknowledge_forever(
        start, lambda k: engine.write("crash", id_batch(k, BATCH, hosts=7, step_ms=100))
    )


if __name__ == "__main__":
    main()
