"""Which SSTs of a snapshot a reader may read as plain Parquet, without the engine's merge
(Spark reads these with its own vectorized Parquet reader, the rest through the
node).

An SST's rows are the table's rows, as stored, when nothing the scan would resolve reaches them:

- it holds every column of the table's current schema (it was written with the current
  schema version, or an older one that differs only in settings: files from before an ADD
  COLUMN lack the column, which the engine fills with its default);
- it holds no row-deletion markers;
- no other source of the snapshot (SST or memtable) overlaps its time range and might hold
  another version of one of its keys (in APPEND mode nothing shadows anything, so only an
  overlapping source holding deletions counts);
- no range tombstone newer than what the file already applied overlaps its time range.

The reader still applies the time range, the TTL floor and its filters; the files' hidden
columns (sequence, kind) are simply not read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

from node.engine.options import TableOptions, UpdateMode
from node.engine.schema import Schema
from node.engine.sst.meta import SstMeta
from node.engine.table import Pinned

TimeRange = tuple[int | None, int | None]


@runtime_checkable
class AddressedStore(Protocol):
    """An object store whose objects other readers can address (``file:``, ``s3a:``)."""

    def uri(self, key: str) -> str: ...


def _overlap(a_min: int, a_max: int, b_min: int, b_max: int) -> bool:
    return a_min <= b_max and b_min <= a_max


def _in_range(f: SstMeta, time_range: TimeRange) -> bool:
    lo, hi = time_range
    return (lo is None or f.max_ts >= lo) and (hi is None or f.min_ts < hi)


def native_files(
    schema: Schema,
    options: TableOptions,
    pinned: Pinned,
    time_range: TimeRange,
    columns_of: Callable[[str], frozenset[str]],
) -> list[SstMeta]:
    """The data SSTs of ``pinned`` in ``time_range`` whose rows need no merge (see above);
    ``columns_of`` gives the columns an SST holds (asked only of older schema versions')."""
    files = pinned.version.files
    data = [f for f in files if f.is_data and _in_range(f, time_range)]
    tombstone_files = [f for f in files if not f.is_data]
    append = options.update_mode is UpdateMode.APPEND
    # Every source a file could overlap: (min_ts, max_ts, holds deletions, the file or None).
    others: list[tuple[int, int, bool, SstMeta | None]] = [
        (f.min_ts, f.max_ts, f.deletes > 0, f) for f in files if f.is_data
    ]
    for view in pinned.views:
        if view.batches:
            # A view's deletions are not counted apart: any memtable overlap is a merge.
            others.append((view.min_ts, view.max_ts, True, None))
    memtable_ranges = [r for view in pinned.views for r in view.ranges]
    out = []
    for f in data:
        if f.deletes:
            continue
        if f.schema_version != schema.version and not set(schema.names) <= columns_of(f.path):
            continue
        if any(
            o is not f and (deletes or not append) and _overlap(f.min_ts, f.max_ts, lo, hi)
            for lo, hi, deletes, o in others
        ):
            continue
        if any(
            t.max_seq > f.tombstones_applied and _overlap(f.min_ts, f.max_ts, t.min_ts, t.max_ts)
            for t in tombstone_files
        ):
            continue
        if any(
            _overlap(
                f.min_ts,
                f.max_ts,
                r.start if r.start is not None else f.min_ts,
                r.end - 1 if r.end is not None else f.max_ts,
            )
            for r in memtable_ranges
        ):
            continue
        out.append(f)
    return out
