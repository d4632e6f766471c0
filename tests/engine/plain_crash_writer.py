"""Writer process for the plain-rows crash test: one- to three-line line-protocol writes of
unique ids, most taken as plain rows (node.engine.plain) and every fifth as Arrow, printing
each write's first id once it is acknowledged, until it is killed."""

from __future__ import annotations

import sys

from node.backends import open_standalone
from node.engine.options import TableOptions, UpdateMode
from node.engine.schema import Column, ColumnType, Schema
from node.ingest import line_protocol
from node.ingest.writer import Ingestor

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
    schema = Schema.build(
        [
            Column("timestamp", ColumnType.TIMESTAMP),
            Column("host", ColumnType.STRING, is_tag=True),
            Column("id", ColumnType.INT64),
            Column("v", ColumnType.DOUBLE),
        ],
        timestamp_key="timestamp",
    )
    # APPEND keeps duplicates, so a row replayed twice would show up twice; small memtables
    # make kills land in flushes of memtables holding plain rows too.
    opts = TableOptions(update_mode=UpdateMode.APPEND, write_buffer_size=16 * 1024)
    engine.create_table("crash", schema, opts, if_not_exists=True)
    ingestor = Ingestor(engine)
    k = start
    while True:
        tables = line_protocol.parse(lines(k), precision="ms")
        logged = ingestor.start_write_all(tables) if k % 5 else None
        if logged is None:
            ingestor.write_all(tables)
        else:
            logged.ticket.wait()
            logged.finish()
        print(k, flush=True)
        k += 1


if __name__ == "__main__":
    main()
