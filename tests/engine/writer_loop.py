"""What the crash tests' writer processes share: an APPEND table (a row replayed twice would
show up twice), batches of unique ids, and the loop that prints each write's number once the
engine acknowledged it, until the process is killed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn

import pyarrow as pa

from node.engine.engine import Engine
from node.engine.options import TableOptions, UpdateMode
from node.engine.schema import Column, ColumnType, Schema

#: Columns of the id batches: a tag, the unique id, the timestamp key.
ID_COLUMNS = [
    Column("host", ColumnType.STRING, is_tag=True),
    Column("id", ColumnType.INT64),
    Column("ts", ColumnType.TIMESTAMP),
]


def append_table(engine: Engine, name: str, columns: list[Column], key: str, **opts: Any) -> None:
    """Create the APPEND table ``name`` unless a run before the kill did."""
    schema = Schema.build(columns, timestamp_key=key)
    options = TableOptions(update_mode=UpdateMode.APPEND, **opts)
    engine.create_table(name, schema, options, if_not_exists=True)


def id_batch(k: int, size: int, *, hosts: int, step_ms: int) -> pa.Table:
    """Batch ``k``: ids ``k * size`` up to the next batch's, on ``hosts`` hosts, ``step_ms``
    apart."""
    ids = list(range(k * size, (k + 1) * size))
    return pa.table(
        {
            "host": [f"h{i % hosts}" for i in ids],
            "id": pa.array(ids, pa.int64()),
            "ts": pa.array([i * step_ms for i in ids], pa.timestamp("ms")),
        }
    )


def acknowledge_forever(start: int, write: Callable[[int], object]) -> NoReturn:
    """Write ``start``, ``start + 1``, ... printing each number once ``write`` returned."""
    k = start
    while True:
        write(k)
        print(k, flush=True)
        k += 1
