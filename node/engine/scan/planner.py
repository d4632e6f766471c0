"""The scan planner: which strategy reads which sources of a snapshot.

An ordered request (``order``, or a per-series limit) is one :mod:`ordered` merge of every
source. An unordered one is a :mod:`located` read when it qualifies; otherwise its sources are
grouped by time overlap (SSTs and memtable slices whose time ranges overlap may hold versions
of the same key; in APPEND mode only groups holding deletion markers stay together) and each
group goes to the first strategy that applies: a lone memtable slice to :mod:`memtable`, a lone
SST holding every column needed to :mod:`lone`, a group overlapping in narrow zones to
:mod:`split`, anything else to :mod:`merged`.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from node.engine.memtable import MemtableView
from node.engine.options import TableOptions, UpdateMode
from node.engine.scan import located, lone, memtable, merged, ordered, split
from node.engine.scan.context import ScanContext, Source
from node.engine.scan.pruning import pruned_all
from node.engine.scan.request import ScanRequest
from node.engine.schema import Schema
from node.engine.sst.meta import SstMeta
from node.engine.sst.reader import LocatedArrays, Part, SstFiles


@dataclass
class UnorderedPlan:
    """What an unordered scan reads and by which strategy: memtable slices and SSTs (with
    the row groups pruning keeps, split by whether they hold deletion markers) read on their
    own, groups of overlapping sources read one by one with their overlap zones, and groups
    merged."""

    memtables: list[pa.Table] = field(default_factory=list)
    lone: dict[bool, list[Part]] = field(default_factory=dict)
    split: list[tuple[list[Source], list[tuple[int, int]]]] = field(default_factory=list)
    merged: list[list[Source]] = field(default_factory=list)
    #: Local paths of lone SSTs whose statistics prove every row read passes the filter.
    covered: set[str] = field(default_factory=set)


class Scan:
    """A scan of one snapshot, planned when first read (or asked how large it is)."""

    def __init__(
        self,
        schema: Schema,
        options: TableOptions,
        files: Sequence[SstMeta],
        memtables: Sequence[MemtableView],
        sst_files: SstFiles,
        request: ScanRequest,
        *,
        now_ms: int,
    ) -> None:
        self._ctx = ScanContext(
            schema, options, files, memtables, sst_files, request, now_ms=now_ms
        )
        self.schema = schema
        self.options = options
        self.request = request
        self.columns = self._ctx.columns
        self.stats = self._ctx.stats
        self._unordered_plan: UnorderedPlan | None = None

    @property
    def filter(self) -> pc.Expression | None:
        """The whole filter as one expression (see :attr:`ScanContext.filter`)."""
        return self._ctx.filter

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        for table in self._tables():
            yield from table.to_batches(max_chunksize=self.request.batch_size)

    def to_table(self) -> pa.Table:
        """Every row the scan returns, as one table (for small results: a table per
        source would be cut into batches only to be put together again)."""
        tables = list(self._tables())
        if len(tables) == 1:
            return tables[0]
        if not tables:
            schema = self.schema.arrow(dictionary_tags=self.request.dictionary_tags)
            return pa.schema([schema.field(c) for c in self.columns]).empty_table()
        return pa.concat_tables(tables)

    def located_arrays(self) -> LocatedArrays | None:
        """The rows of a located read as numpy arrays, one per column asked for, in the
        order :meth:`to_table` gives them (timestamps as integers of their unit), and
        whether that is time order: what an aggregation in numpy takes, without the tables
        in between. None for any other scan, and where numpy would not hold the columns as
        read (see :func:`located.arrays`): :meth:`to_table` reads those."""
        parts = self._located
        if parts is None:
            return None
        done = True  # the files are unpinned, unless to_table is to read them after all
        try:
            arrays = located.arrays(self._ctx, parts)
            done = arrays is not None
            return arrays
        finally:
            if done:
                self._ctx.pins.close()

    def estimated_rows(self) -> int:
        """Rows the scan reads at most (before filtering): those of the row groups pruning
        keeps of SSTs read on their own, and every row of memtables and merged SSTs."""
        ctx = self._ctx
        if ctx.order is not None:
            return sum(s.rows for s in ctx.sources())
        parts = self._located
        if parts is not None:
            return sum(b - a for p in parts for runs in p.runs.values() for a, b in runs)
        plan = self._plan()
        alone = sum(
            ctx.footers[part.path].row_group(rg).num_rows
            for parts in plan.lone.values()
            for part in parts
            for rg in part.row_groups
        )
        mem = sum(t.num_rows for t in plan.memtables)
        grouped = sum(s.rows for g, _ in plan.split for s in g)
        return alone + mem + grouped + sum(s.rows for g in plan.merged for s in g)

    def _tables(self) -> Iterator[pa.Table]:
        """The rows, a table per source or group of sources read together, keeping every
        SST the scan opens pinned in the local cache until the scan ends."""
        with self._ctx.pins:
            yield from ordered.read(self._ctx) if self._ctx.order is not None else self._unordered()

    @functools.cached_property
    def _located(self) -> list[Part] | None:
        return located.locate(self._ctx)

    def _unordered(self) -> Iterator[pa.Table]:
        ctx = self._ctx
        parts = self._located
        if parts is not None:
            yield from located.read(ctx, parts)
            return
        plan = self._plan()
        for rows in plan.memtables:
            yield from memtable.read(ctx, rows)
        for deletes, ssts in plan.lone.items():
            yield from lone.read(ctx, ssts, deletes=deletes, covered=plan.covered)
        for group, zones in plan.split:
            yield from split.read(ctx, group, zones)
        for group in plan.merged:
            yield from merged.read(ctx, group)

    def _plan(self) -> UnorderedPlan:
        """The unordered scan's plan, made once (pruning happens here)."""
        if self._unordered_plan is None:
            self._unordered_plan = self._make_plan()
        return self._unordered_plan

    def _make_plan(self) -> UnorderedPlan:
        ctx = self._ctx
        alone: dict[bool, list[SstMeta]] = {False: [], True: []}
        plan = UnorderedPlan()
        components = self._components()
        for group in components:
            s = group[0]
            if len(group) > 1:
                zones = split.zones_if_split(group)
                if zones is not None:
                    plan.split.append((group, zones))
                else:
                    plan.merged.append(group)
            elif s.mem is not None:
                plan.memtables.append(s.mem)
            elif s.sst is not None and lone.applies(ctx, s):
                alone[s.deletes].append(s.sst)
            else:
                plan.merged.append(group)
        ctx.stats.memtable_slices = sum(1 for g in components for s in g if s.mem is not None)
        ctx.stats.merged_components = sum(1 for g in plan.merged if len(g) > 1)
        ctx.stats.split_components = len(plan.split)
        plan.lone = {d: pruned_all(ctx, ssts, ctx.schema.names) for d, ssts in alone.items()}
        plan.covered = lone.covered(ctx, [p for parts in plan.lone.values() for p in parts])
        return plan

    def _components(self) -> list[list[Source]]:
        """The sources grouped by time overlap, in time order."""
        sources = self._ctx.sources()
        sources.sort(key=lambda s: s.min_ts)
        groups: list[list[Source]] = []
        end = None
        for s in sources:
            if groups and end is not None and s.min_ts <= end:
                groups[-1].append(s)
                end = max(end, s.max_ts)
            else:
                groups.append([s])
                end = s.max_ts
        if self.options.update_mode is UpdateMode.APPEND:
            # Without deletions nothing shadows anything: every source stands alone.
            groups = [
                part
                for g in groups
                for part in ([g] if any(s.deletes for s in g) else [[s] for s in g])
            ]
        return groups
