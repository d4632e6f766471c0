"""What a scan is asked for (:class:`ScanRequest`) and what it touched (:class:`ScanStats`).

:class:`ScanRequest` is the one value every reader of a table is handed: the SQL provider
and the up-front reads of :mod:`node.sql.session` build it (from :mod:`node.sql.prescan`'s
bounds), the table-source seam (:mod:`node.tables`) passes it to a local engine or to a
remote owner, and :mod:`node.engine.scan.wire` is its one form on the wire (the Flight
ticket, :class:`gnomon.flight.ticket.ScanSpec`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import pyarrow as pa
import pyarrow.compute as pc

from gnomon.errors import InvalidArgument
from node.engine.bounds import Bounds
from node.engine.schema import Schema

if TYPE_CHECKING:
    from node.engine.table import Pinned

Order = Literal["asc", "desc"]
TimeRange = tuple[int | None, int | None]


@dataclass(frozen=True)
class ScanRequest:
    """One scan of ``table``: ``columns`` (None: all) of the rows in ``time_range`` that
    match ``predicate`` and ``bounds``, of the live table, a manifest version (``version``,
    or the one current at ``timestamp_ms``: time travel) or a held snapshot (``pinned``)."""

    table: str
    columns: Sequence[str] | None = None
    #: [start, end) in milliseconds since the epoch; either bound may be None.
    time_range: TimeRange | None = None
    predicate: pc.Expression | None = None
    batch_size: int = 65_536
    #: Primary-key order (within a series: time ascending) or its reverse; None: unordered.
    order: Order | None = None
    #: At most this many rows per series, the first ones in ``order`` (default "desc": the
    #: latest rows).
    limit_per_series: int | None = None
    #: Per-column bounds every returned row satisfies (see :mod:`node.engine.bounds`): they
    #: filter like ``predicate`` and prune files, row groups and series without judging an
    #: expression per row group.
    bounds: Bounds | None = None
    #: Return string tag columns dictionary encoded (decoded so from Parquet where possible);
    #: a reader may ignore it (a remote one does: tags then arrive plain).
    dictionary_tags: bool = False
    version: int | None = None
    timestamp_ms: int | None = None
    #: Scan this snapshot (held under a lease, :mod:`node.engine.leases`) instead of
    #: ``version``.
    pinned: Pinned | None = None


@dataclass
class ScanStats:
    """What a scan touched, for EXPLAIN and for tests that prove pruning."""

    ssts_total: int = 0
    ssts_read: int = 0
    row_groups_total: int = 0
    row_groups_read: int = 0
    #: Row groups read only at the rows of the series wanted, which the series directory
    #: locates.
    row_groups_located: int = 0
    memtable_slices: int = 0
    merged_components: int = 0
    #: Groups of overlapping sources read source by source, only their overlap zones resolved.
    split_components: int = 0
    range_tombstones: int = 0
    #: Read as a located read: series' runs sliced from SSTs that need no merge, without the
    #: general plan.
    located: bool = False
    #: Read as each series' latest rows: the SSTs' candidates from the ends of their series'
    #: runs, merged with the memtables.
    latest: bool = False


def referenced_columns(expr: pc.Expression, schema: Schema) -> list[str]:
    """Columns ``expr`` may reference (a superset): pyarrow expressions cannot be walked, but
    every field reference appears by name in their text."""
    text = str(expr)
    return [n for n in schema.names if re.search(rf"(?<![\w.\-]){re.escape(n)}(?![\w.\-])", text)]


def check_predicate(expr: pc.Expression, schema: Schema) -> None:
    try:
        pa.Table.from_batches([], schema.arrow()).filter(expr)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, TypeError) as e:
        raise InvalidArgument(f"invalid predicate {expr}: {e}") from None
