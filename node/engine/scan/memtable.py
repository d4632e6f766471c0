"""Lone memtable slices: a memtable's rows of one segment window that no other source
overlaps in time.

Applies to a memtable slice standing alone in its overlap group (or, in APPEND mode, one of a
group without deletion markers).

Correct because a memtable view is already sorted and resolved (its newest version of each key
kept, see :mod:`node.engine.memtable`), and with nothing else overlapping no other source can
hold another version: its deletion markers shadow nothing and are dropped; range tombstones
and the filter are applied by :meth:`ScanContext.finish`.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa

from node.engine.rows import strip_markers
from node.engine.scan.context import ScanContext


def read(ctx: ScanContext, rows: pa.Table) -> Iterator[pa.Table]:
    yield from ctx.finish(ctx.conformed_table(strip_markers(rows)))
