"""The read path: plan a scan over one snapshot (an SST set plus memtable views) and stream it.

:class:`Scan` (in :mod:`.planner`) judges a :class:`ScanRequest` against the snapshot
(:mod:`.context`), prunes SSTs to the row groups and series runs that may hold matching rows
(:mod:`.pruning`) and hands each group of sources to one strategy, a module each saying when
it applies and why it is correct:

| strategy | reads |
| --- | --- |
| :mod:`.located` | the series one tag's values name, sliced from SSTs that need no merge |
| :mod:`.lone` | an SST nothing overlaps, the filter pushed into the read |
| :mod:`.memtable` | a memtable slice nothing overlaps |
| :mod:`.split` | overlapping sources one by one, only their narrow overlap zones resolved |
| :mod:`.merged` | overlapping sources through the k-way merge |
| :mod:`.ordered` | every source merged in key order (``order``, per-series limits) |
| :mod:`.latest` | each series' latest rows: each SST's last ones per series, merged so |

A request reaches another node's engine in its one wire form, :mod:`.wire` (the Arrow Flight
ticket).

Range tombstones of the snapshot (tombstone SSTs and memtables) that overlap the scan are
applied to every batch; row deletions are resolved by the merge. Columns a source predates
(ADD COLUMN) read as their default or null.
"""

from node.engine.scan.planner import Scan
from node.engine.scan.request import (
    Order,
    ScanRequest,
    ScanStats,
    check_predicate,
    referenced_columns,
)
from node.engine.scan.split import overlap_zones

__all__ = [
    "Order",
    "Scan",
    "ScanRequest",
    "ScanStats",
    "check_predicate",
    "overlap_zones",
    "referenced_columns",
]
