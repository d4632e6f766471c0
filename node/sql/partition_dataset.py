"""A partition table as a DataFusion table, for the queries :mod:`node.sql.pushdown`
does not split (joins, subqueries, HAVING, DISTINCT, ``*``, ...): one fragment per sub-table,
each scanned where it is served with the projection and the filter DataFusion pushes, so
only matching rows cross."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from gnomon.errors import GnomonError, NotOwner
from node.cluster.remote import RemoteScan
from node.engine.scan import Scan, ScanRequest
from node.partition.parts import Part
from node.partition.tables import PartitionTable, PartMoved
from node.sql import cancel
from node.sql.provider import ScanRecord, recorded


class PartFragment:
    def __init__(self, dataset: PartitionDataset, part: Part) -> None:
        self._dataset = dataset
        self._part = part

    def scanner(
        self,
        schema: pa.Schema | None = None,
        columns: list[str] | None = None,
        filter: pc.Expression | None = None,
        **_: Any,
    ) -> ds.Scanner:
        d = self._dataset
        part = self._part
        wanted = list(d.schema.names) if columns is None else list(columns)
        try:
            scan = part.reader().scan(ScanRequest(part.table, columns=wanted, predicate=filter))
        except GnomonError as e:
            failed = _moved(part, e)
            d.errors.append(failed)
            raise failed from None
        record = ScanRecord(part.table, columns, lambda: filter, owner=part.owner)
        if isinstance(scan, Scan):
            record.stats = scan.stats
        if isinstance(scan, RemoteScan):
            record.scan_id = scan.scan_id
        return recorded(_counted(iter(scan), record, part), record, d.schema, wanted, d)


def _moved(part: Part, error: GnomonError) -> GnomonError:
    """``error`` of a scan of ``part``; "not owner" as :class:`PartMoved`, which the
    executor answers by looking the sub-table up again."""
    if isinstance(error, NotOwner):
        return PartMoved(f"sub-table {part.table!r} moved: {error.message}", error)
    return error


def _counted(
    batches: Iterator[pa.RecordBatch], record: ScanRecord, part: Part
) -> Iterator[pa.RecordBatch]:
    try:
        for b in batches:
            if b.num_rows:  # a batch of no rows carries nothing
                record.rows_received += b.num_rows
                yield b
    except NotOwner as e:
        raise _moved(part, e) from None


class PartitionDataset(ds.InMemoryDataset):  # type: ignore[misc]
    """A partition table as a DataFusion table: one fragment per sub-table of ``parts``,
    each scanned where it is served; string tags arrive plain."""

    def __init__(
        self,
        table: PartitionTable,
        parts: Sequence[Part],
        *,
        scans: list[ScanRecord],
        errors: list[GnomonError],
    ) -> None:
        self.table = table
        self.parts = list(parts)
        self.scans = scans
        self.errors = errors
        #: The query's cancellation token, taken in the request's thread (see EngineDataset).
        self.token = cancel.current()
        super().__init__(pa.Table.from_batches([], schema=table.spec.schema.arrow()))  # type: ignore[call-arg]

    def get_fragments(self, filter: pc.Expression | None = None) -> list[PartFragment]:
        return [PartFragment(self, p) for p in self.parts]
