"""Writer process for the plain-rows crash test: one- to three-line line-protocol writes of
unique ids, most taken as plain rows (node.engine.plain) and every fifth as Arrow, printing
each write's first id once it is acknowledged, until it is killed."""

from __future__ import annotations

import sys

from node.backends import open_standalone
from node.engine.schema import Column, ColumnType
from node.ingest import line_protocol
from node.ingest.writer import Ingestor

from .writer_loop import acknowledge_forever, append_table

#: Ids per write: k * IDS .. k * IDS + lines - 1, with 1 to IDS lines.
IDS = 3
HOSTS = 7


def lines(k: int) -> str:
    """The body of write ``k``: ids of one write, each on a host of its own, value id / 2."""
    ids = range(k * IDS, k * IDS + 1 + k % IDS)
    return "\n".join(f"crash,host=h{i % HOSTS} id={i}i,v={i / 2} {i * 10}" for i in ids)


def main() -> None:
    data_dir, start = sys.argv[1], int(sys.argv[2])
    engine = open_standalone(data_dir)
    columns = [
        Column("timestamp", ColumnType.TIMESTAMP),
        Column("host", ColumnType.STRING, is_tag=True),
        Column("id", ColumnType.INT64),
        Column("v", ColumnType.DOUBLE),
    ]
    # Small memtables make kills land in flushes of memtables holding plain rows too.
    append_table(engine, "crash", columns, "timestamp", write_buffer_size=16 * 1024)
    ingestor = Ingestor(engine)

    def write(k: int) -> None:
        tables = line_protocol.parse(lines(k), precision="ms")
        logged = ingestor.start_write_all(tables) if k % 5 else None
        if logged is None:
            ingestor.write_all(tables)
        else:
            logged.wait()

    acknowledge_forever(start, write)


if __name__ == "__main__":
    main()
