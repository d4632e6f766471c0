"""The engine: tables on one data directory (standalone) — catalog and manifests in SQLite,
WAL on local disk, SSTs in a local object store — behind a small Python API."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from gnomon.errors import (
    AlreadyExists,
    Closed,
    Conflict,
    InvalidArgument,
    NotFound,
    NotOwner,
)
from gnomon.names import check_table_name
from gnomon.store.api import StructuredStore, TableContext
from gnomon.wal.api import Wal
from node.engine import fences
from node.engine.bounds import Bounds
from node.engine.catalog import Catalog, TableInfo
from node.engine.compaction.compactor import Compactor
from node.engine.compaction.offload import Offload
from node.engine.compaction.scheduler import CompactionScheduler
from node.engine.config import EngineConfig
from node.engine.fences import UNFENCED, ShardFences
from node.engine.follow import FollowedShard, FollowerGuard
from node.engine.gc import GcReport, collect
from node.engine.leases import SnapshotLeases
from node.engine.manifest import Manifest
from node.engine.native import AddressedStore
from node.engine.options import TableOptions
from node.engine.placement import LocalPlacer, TablePlacer
from node.engine.releases import ReleasedTables
from node.engine.revisions import Revisions
from node.engine.scan import Order, Scan, ScanRequest
from node.engine.schema import Column, Schema
from node.engine.shard import ShardGuard
from node.engine.shards import Served, Shards
from node.engine.splits import time_splits, window_rows
from node.engine.sst.reader import SstFiles
from node.engine.stats import EngineStats
from node.engine.table import Pinned, Table
from node.engine.tsid import KnownSeries
from node.engine.workers import Flusher, Periodic
from objectstore.api import ObjectStore

log = logging.getLogger("gnomon.engine")


class Engine:
    def __init__(
        self,
        config: EngineConfig,
        *,
        meta: StructuredStore,
        wal: Wal,
        store: ObjectStore,
        placer: TablePlacer | None = None,
        offload: Offload | None = None,
    ) -> None:
        self.config = config
        #: Where compaction tasks may run besides here (a cluster node's compaction nodes).
        self.offload = offload
        self._placer = placer or LocalPlacer()
        self._meta = meta
        self._wal = wal
        self._store = store
        self._staging = os.path.join(config.data_dir, "tmp")
        shutil.rmtree(self._staging, ignore_errors=True)
        os.makedirs(self._staging, exist_ok=True)
        self._sst_files = SstFiles(
            store,
            os.path.join(config.data_dir, "cache"),
            decoded_bytes=config.decoded_cache_bytes,
            file_bytes=config.file_cache_bytes,
        )
        self.catalog = Catalog(meta)
        self.manifest = Manifest(meta, table_name=self._table_name, fence=self._check_fence)
        self._flusher = Flusher(config.flush_threads)
        self._scheduler = CompactionScheduler(config.compaction_threads)
        self._served = Served()
        self._lifecycle = Shards(
            self._served,
            catalog=self.catalog,
            wal=wal,
            fences=ShardFences(meta),
            released=ReleasedTables(meta),
            open_table=self._open_table,
            new_table=self._new_table,
            on_opened=self._on_opened,
            flush_on_close=config.flush_on_close,
        )
        self._closed = False
        #: Revisioned batch ingest (reserve / stage / commit / abort), see revisions.py.
        self.revisions = Revisions(meta, table=self.table, by_id=self._served.by_id)
        #: Snapshots held for outside readers (Spark jobs), kept from garbage collection.
        self.leases = SnapshotLeases()
        self._gc = Periodic(config.gc_interval_s, self._gc_quietly, name="gnomon-gc")
        self._compaction_check = Periodic(
            config.compaction_check_interval_s,
            self._request_compactions,
            name="gnomon-compaction-check",
        )

    def _table_name(self, table_id: int) -> str | None:
        table = self._served.by_id(table_id)
        return None if table is None else table.name

    # -- shards (node/engine/shards.py) ---------------------------------------------------------

    def open_shard(
        self,
        shard_id: int,
        *,
        epoch: int = UNFENCED,
        table_ids: Iterable[int] | None = None,
        lease: Callable[[], bool] | None = None,
    ) -> list[str]:
        """See :meth:`Shards.open`."""
        self._check_open()
        return self._lifecycle.open(shard_id, epoch=epoch, table_ids=table_ids, lease=lease)

    def close_shard(self, shard_id: int) -> bool:
        """See :meth:`Shards.close`."""
        return self._lifecycle.close(shard_id)

    def release(self, shard_id: int, epoch: int, table_ids: Collection[int] | None) -> list[str]:
        """See :meth:`Shards.release`."""
        return self._lifecycle.release(shard_id, epoch, table_ids)

    def unhold(self, shard_id: int) -> None:
        """See :meth:`Shards.unhold`."""
        self._lifecycle.unhold(shard_id)

    def held(self) -> set[int]:
        """See :meth:`Shards.held`."""
        return self._lifecycle.held()

    def shards(self) -> dict[int, int]:
        """The shards open here: id -> epoch."""
        return self._lifecycle.epochs()

    def shard_tables(self) -> dict[int, set[str]]:
        """The shards open here: id -> the names of their open tables."""
        return self._lifecycle.tables()

    def follow_shard(self, shard_id: int, *, table_ids: Iterable[int], leader: str) -> list[str]:
        """See :meth:`Shards.follow`."""
        self._check_open()
        return self._lifecycle.follow(shard_id, table_ids=table_ids, leader=leader)

    def unfollow_shard(self, shard_id: int) -> bool:
        """See :meth:`Shards.unfollow`."""
        return self._lifecycle.unfollow(shard_id)

    def followed(self) -> dict[int, FollowedShard]:
        """The shards followed here, by id."""
        return self._lifecycle.followed()

    def follower_table(self, name: str) -> Table:
        """See :meth:`Shards.follower_table`."""
        return self._lifecycle.follower_table(name)

    def shard_of(self, name: str) -> int:
        """The shard table ``name`` is served in."""
        return self.table(name).guard.shard_id

    def _check_fence(self, ctx: TableContext, table_id: int) -> None:
        # Not the open tables: close_shard flushes its tables after taking them out.
        guard = self._served.guards.get(table_id)
        if guard is not None:
            fences.check(ctx, guard.shard_id, guard.epoch)

    def _open_table(
        self, info: TableInfo, guard: ShardGuard, followed: Table | None = None
    ) -> Table:
        """Table ``info`` led here under ``guard``: ``followed``, its follower copy, if this
        node followed the shard until now."""
        if followed is not None and followed.info == info:
            table = followed
            table.lead(guard, self._flusher.request, self._request_compaction)
        else:
            if followed is not None:
                followed.close()
            table = self._new_table(info, guard)
        run = None if self.offload is None else self.offload.runner(table)
        self._served.compactors[info.name] = Compactor(table, run=run)
        self._served.guards[info.table_id] = guard
        return table

    def _new_table(self, info: TableInfo, guard: ShardGuard) -> Table:
        """A table object; a follower's (``FollowerGuard``) never asks for flushes."""
        return Table(
            info,
            wal=self._wal,
            guard=guard,
            manifest=self.manifest,
            store=self._store,
            sst_files=self._sst_files,
            staging_dir=self._staging,
            request_flush=(
                (lambda _t: None) if isinstance(guard, FollowerGuard) else self._flusher.request
            ),
            on_flushed=self._request_compaction,
            max_immutables=self.config.max_immutables,
            max_write_bytes=self.config.max_write_bytes,
        )

    def _on_opened(self, opened: list[Table]) -> None:
        self.revisions.recover()
        if self.config.compaction_check_interval_s > 0:
            for table in opened:
                self._request_compaction(table)

    def _request_compaction(self, table: Table) -> None:
        if table.info.options.enable_compaction:
            compactor = self._served.compactors.get(table.name)
            if compactor is not None and compactor.table is table:
                self._scheduler.request(compactor)

    def _request_compactions(self) -> None:
        with self._served.lock:
            tables = list(self._served.tables.values())
        for table in tables:
            self._request_compaction(table)

    def _check_open(self) -> None:
        if self._closed:
            raise Closed("engine is closed")

    def table(self, name: str) -> Table:
        self._check_open()
        with self._served.lock:
            t = self._served.tables.get(name)
        return self._elsewhere(name) if t is None else t

    def _elsewhere(self, name: str) -> Table:
        """A table not open here: NotOwner naming its owner, or NotFound. When a route names
        this node or a shard open here, the placer asks again at the source after bringing the
        shards here up to date with it (a table created through another node since its shard
        opened is open then). A route is never reason enough to open a table in a
        shard: a cached route can name the shard a table left (fetched while a split ran, or
        its shard event missed), and rows written there would go to a log the table's owner
        never reads."""
        placed = self._placer.locate(name)
        if placed is not None and placed.shard_id in self.shards():
            placed = self._placer.locate(name, fresh=True)
        with self._served.lock:
            t = self._served.tables.get(name)
        if t is not None:
            return t
        if placed is None:
            raise NotFound(f"table {name!r} does not exist")
        owner = placed.owner or "no node yet"
        raise NotOwner(
            f"table {name!r} is in shard {placed.shard_id}, served by {owner}",
            owner=placed.owner,
            shard_id=placed.shard_id,
        )

    # -- DDL -------------------------------------------------------------------------------------

    def create_table(
        self,
        name: str,
        schema: Schema,
        options: TableOptions | None = None,
        *,
        if_not_exists: bool = False,
        shard_id: int | None = None,
        table_id: int | None = None,
    ) -> TableInfo:
        """Create a table. Without ``shard_id`` the placer picks its shard and id (in a
        cluster, the meta service); a table placed in a shard not open here is only defined
        (catalog and manifest) for the shard's owner to open. With ``shard_id`` (open here)
        and ``table_id``, the caller placed it."""
        self._check_open()
        # Before the placer records it anywhere (see gnomon/names.py).
        check_table_name(name)
        options = options or TableOptions()
        existing = self._existing(name, if_not_exists)
        if existing is not None:
            return existing
        if shard_id is None:
            try:
                placed = self._placer.place(name, schema, options)
            except AlreadyExists:
                if if_not_exists:
                    return self.catalog.get(name)
                raise
            shard_id, table_id = placed.shard_id, placed.table_id
            if shard_id not in self.shards() and table_id is not None:
                self.define_table(name, schema, options, table_id=table_id)
                return self.catalog.get(name)
        with self._served.lock:
            opened = self._served.tables.get(name)
            if opened is not None and table_id is not None and opened.table_id == table_id:
                return opened.info  # placed by this call, opened by the shard's keeper since
            # Another creator of the same name may have won meanwhile.
            existing = self._existing(name, if_not_exists)
            if existing is not None:
                return existing
            shard = self._served.shards.get(shard_id)
            if shard is None:
                raise NotOwner(f"shard {shard_id} is not open on this node", shard_id=shard_id)
            shard.guard.check()
            if table_id is None:
                info = self.catalog.create(name, schema, options)
                self.manifest.create_table(info.table_id)
            else:
                # The shard's keeper may have defined it already, from the meta service's
                # definition, between the placement and this.
                self.define_table(name, schema, options, table_id=table_id)
                info = self.catalog.get(name)
            self._served.tables[name] = self._open_table(info, shard.guard)
            shard.tables.add(name)
            log.info("created table", extra={"table": name, "table_id": info.table_id})
            return info

    def _existing(self, name: str, if_not_exists: bool) -> TableInfo | None:
        with self._served.lock:
            table = self._served.tables.get(name)
        if table is None:
            return None
        if if_not_exists:
            return table.info
        raise AlreadyExists(f"table {name!r} already exists")

    def define_table(
        self, name: str, schema: Schema, options: TableOptions, *, table_id: int
    ) -> None:
        """Record a table the meta service placed (catalog entry and an empty manifest)
        without opening it; what already exists is kept, so a definition its creator left
        half done (it died between the two) is completed. The owner of its shard opens it
        with :meth:`open_shard`. Conflict if the name belongs to another table id."""
        try:
            self.catalog.create(name, schema, options, table_id=table_id)
        except AlreadyExists:
            if self.catalog.get(name).table_id != table_id:
                raise Conflict(
                    f"table {name!r} is in the catalog under another id than the meta "
                    f"service's {table_id}"
                ) from None
        with contextlib.suppress(AlreadyExists):
            self.manifest.create_table(table_id)

    def drop_table(self, name: str, *, if_exists: bool = False) -> bool:
        """Drop a table served here (NotOwner naming the owner of one served elsewhere: only
        its owner deletes its data)."""
        self._check_open()
        try:
            self.table(name)
        except NotFound:
            if if_exists:
                return False
            raise
        with self._served.lock:
            table = self._served.tables.get(name)
            if table is None:
                if if_exists:
                    return False
                raise NotFound(f"table {name!r} does not exist")
            table.guard.check()
            # Gone from routes first: no node sends it requests while its data goes.
            self._placer.unplace(name)
            table.close()
            info = self.catalog.drop(name)
            del self._served.tables[name]
            self._served.shards[table.guard.shard_id].tables.discard(name)
            compactor = self._served.compactors.pop(name)
        compactor.close()
        self.manifest.drop_table(info.table_id)
        self._served.guards.pop(info.table_id, None)
        self.revisions.forget(info.table_id)
        region = table.guard.region
        self._wal.mark_deleted(region, info.table_id, self._wal.last_seq(region, info.table_id))
        for obj in list(self._store.list(f"tables/{info.table_id}/")):
            self._store.delete(obj.key)
            self._sst_files.forget(obj.key)
        log.info("dropped table", extra={"table": name, "table_id": info.table_id})
        return True

    def describe(self, name: str, *, follower: bool = False) -> TableInfo:
        return self._copy(name, follower).info

    def _copy(self, name: str, follower: bool) -> Table:
        """The table ``name`` is described by: with ``follower``, the copy of a shard followed
        here when there is one."""
        if follower:
            with contextlib.suppress(NotOwner):
                return self.follower_table(name)
        return self.table(name)

    def _readable(self, name: str, follower: bool) -> Table:
        """The table reads of ``name`` use (see :meth:`_copy`): the leader's copy only while
        this node's lease is current; a follower read may be a moment behind by contract."""
        table = self._copy(name, follower)
        if not follower:
            table.guard.check_read()
        return table

    def stats(self) -> EngineStats:
        """Figures of every open table now (empty once the engine is closed, so a metrics
        scrape racing shutdown needs no special case)."""
        with self._served.lock:
            tables = [] if self._closed else list(self._served.tables.values())
        return EngineStats(
            tuple(sorted((t.stats() for t in tables), key=lambda s: s.name)),
            self._sst_files.decoded.stats(),
            self._sst_files.cache.stats(),
        )

    def list_tables(self, *, follower: bool = False) -> list[str]:
        """The tables served here (with ``follower``, those followed here too)."""
        self._check_open()
        with self._served.lock:
            names = set(self._served.tables)
            if follower:
                for followed in self._served.followed.values():
                    names.update(followed.by_name())
            return sorted(names)

    # -- data ------------------------------------------------------------------------------------

    def write(
        self, name: str, data: pa.RecordBatch | pa.Table, *, series: KnownSeries | None = None
    ) -> int:
        """Write rows durably (see :meth:`Table.write`); returns how many were written."""
        return self.table(name).write(data, series=series)

    def scan(
        self,
        name: str,
        *,
        columns: Sequence[str] | None = None,
        time_range: tuple[int | None, int | None] | None = None,
        predicate: pc.Expression | None = None,
        version: int | None = None,
        timestamp_ms: int | None = None,
        batch_size: int = 65_536,
        order: Order | None = None,
        limit_per_series: int | None = None,
    ) -> Iterator[pa.RecordBatch]:
        """Rows of the table as record batches; see :meth:`plan_scan`."""
        return iter(
            self.plan_scan(
                name,
                columns=columns,
                time_range=time_range,
                predicate=predicate,
                version=version,
                timestamp_ms=timestamp_ms,
                batch_size=batch_size,
                order=order,
                limit_per_series=limit_per_series,
            )
        )

    def plan_scan(
        self,
        name: str,
        *,
        columns: Sequence[str] | None = None,
        time_range: tuple[int | None, int | None] | None = None,
        predicate: pc.Expression | None = None,
        version: int | None = None,
        timestamp_ms: int | None = None,
        batch_size: int = 65_536,
        order: Order | None = None,
        limit_per_series: int | None = None,
        pinned: Pinned | None = None,
        bounds: Bounds | None = None,
        dictionary_tags: bool = False,
        follower: bool = False,
    ) -> Scan:
        """A scan over one consistent snapshot: ``columns`` (default all), rows with timestamp
        in ``time_range`` = [start, end) ms that match ``predicate``; with ``version`` or
        ``timestamp_ms``, the flushed data of that manifest version (time travel). Iterate it
        for batches; its ``stats`` tell what was pruned.

        Rows come unordered unless ``order`` is given: "asc" is primary-key order (each
        series' rows by ascending time, series by key), "desc" its exact reverse (each
        series newest first). ``limit_per_series`` keeps the first n rows of each series in
        that order (default "desc": its latest n rows). Both stream from the merge without
        sorting the result. ``pinned`` (from :meth:`pin`) scans that snapshot instead.
        ``bounds`` are per-column conditions every wanted row meets (:mod:`node.engine.bounds`):
        they filter too, and prune cheaper than a predicate. ``dictionary_tags`` returns
        string tags dictionary encoded. ``follower``: read the copy of a shard followed here if
        there is one (a follower read: a moment behind the leader)."""
        return self.scan_for(
            ScanRequest(
                name,
                columns=columns,
                time_range=time_range,
                predicate=predicate,
                bounds=bounds,
                batch_size=batch_size,
                order=order,
                limit_per_series=limit_per_series,
                dictionary_tags=dictionary_tags,
                version=version,
                timestamp_ms=timestamp_ms,
                pinned=pinned,
            ),
            follower=follower,
        )

    def scan_for(self, request: ScanRequest, *, follower: bool = False) -> Scan:
        """The scan ``request`` asks for (see :meth:`plan_scan`, which builds one)."""
        table = self._readable(request.table, follower)
        pinned = request.pinned
        if pinned is None:
            pinned = table.pin(version=request.version, timestamp_ms=request.timestamp_ms)
        return table.scan(request, pinned)

    def pin(
        self,
        name: str,
        *,
        version: int | None = None,
        timestamp_ms: int | None = None,
        follower: bool = False,
    ) -> Pinned:
        """A snapshot of table ``name`` (the live table, or a manifest version) that several
        :meth:`plan_scan` calls can share, e.g. one per piece of :meth:`split`; with
        ``follower``, of the copy of a shard followed here if there is one."""
        return self._readable(name, follower).pin(version=version, timestamp_ms=timestamp_ms)

    def split(
        self,
        name: str,
        pinned: Pinned,
        time_range: tuple[int | None, int | None] = (None, None),
        *,
        max_splits: int,
        min_split_rows: int,
    ) -> list[tuple[int | None, int | None]]:
        """``time_range`` of the snapshot cut into contiguous pieces of about equal rows (see
        ``splits.time_splits``); scans of the pieces together read the range once."""
        # A followed copy has its leader's options: whichever this node has will do.
        seg = self._copy(name, True).info.options.segment_duration_ms
        windows = window_rows(pinned.version.files, pinned.views, seg)
        lo, hi = time_range
        return time_splits(
            windows, seg, lo, hi, max_splits=max_splits, min_split_rows=min_split_rows
        )

    def sst_columns(self, key: str) -> frozenset[str]:
        """The columns the SST ``key`` holds (from its cached footer)."""
        return self._sst_files.columns(key)

    def object_uri(self, key: str) -> str | None:
        """Where a reader with its own client finds the object ``key`` (None: the store
        gives no address)."""
        return self._store.uri(key) if isinstance(self._store, AddressedStore) else None

    def read_all(self, name: str, **kwargs: object) -> pa.Table:
        """The whole scan result as one table (convenience for small results); see
        :meth:`plan_scan`."""
        return self.plan_scan(name, **kwargs).to_table()  # type: ignore[arg-type]

    def delete_rows(self, name: str, keys: pa.Table) -> int:
        """Delete rows by full primary key; for tables with the implicit tsid key, ``keys``
        holds the tag columns and the timestamp instead (tsid is computed as on write).
        Returns how many keys were given. Durable once returned, like a write."""
        return self.table(name).delete_rows(keys)

    def delete_range(
        self,
        name: str,
        *,
        tags: Mapping[str, Any] | None = None,
        time_range: tuple[int | None, int | None] | None = None,
    ) -> None:
        """Delete every row whose tags equal ``tags`` (every series if None) and whose
        timestamp is in ``time_range`` = [start, end) ms (all time if None): a range
        tombstone, durable once returned. Rows written afterwards are not affected."""
        self.table(name).delete_range(tags, time_range)

    def alter_table(
        self,
        name: str,
        *,
        add_columns: Sequence[Column] = (),
        options: Mapping[str, str] | None = None,
    ) -> TableInfo:
        """ADD COLUMN and/or MODIFY SETTING (options as SQL strings, e.g. ``{"ttl": "7d"}``),
        recorded as the table's next schema version. Existing rows read a new column as its
        default (or null); a new ``segment_duration`` applies to data flushed from now on."""
        self._check_open()
        with self._served.lock:
            table = self.table(name)
            info = table.info
            schema = info.schema.with_columns(add_columns)
            if not add_columns:
                schema = replace(schema, version=info.schema.version + 1)
            new_options = info.options.updated(options or {})
            if new_options.update_mode is not info.options.update_mode:
                raise InvalidArgument(
                    f"table {name!r}: update_mode cannot change once the table has data"
                )
            new = replace(info, schema=schema, options=new_options)
            self.catalog.update(new)
            table.alter(new)
            log.info("altered table", extra={"table": name, "schema_version": schema.version})
            return new

    def compact(self, name: str) -> int:
        """Compact the table now (synchronously) until the picker finds nothing more; returns
        how many SSTs it merged away (files removed minus files written)."""
        self.table(name)
        return self._served.compactors[name].compact()

    def compactor(self, name: str) -> Compactor:
        """The table's compactor (plan, run and commit steps one at a time)."""
        self.table(name)
        return self._served.compactors[name]

    def wait_for_compactions(self, timeout_s: float = 60.0) -> bool:
        """Wait until background compaction is idle; False on timeout."""
        return self._scheduler.wait_idle(timeout_s)

    def gc(self, name: str | None = None) -> GcReport:
        """Expire manifest versions past retention and delete files no kept version refers to
        (including orphans of failed flushes and compactions) that are past the grace period,
        for one table or all. Also runs every ``gc_interval_s`` in the background."""
        self._check_open()
        with self._served.lock:
            tables = [self.table(name)] if name else list(self._served.tables.values())
        report = GcReport()
        now = int(time.time() * 1000)
        for t in tables:
            compactor = self._served.compactors.get(t.name)
            report.add(
                collect(
                    t.table_id,
                    t.info.options,
                    manifest=self.manifest,
                    store=self._store,
                    sst_files=self._sst_files,
                    now_ms=now,
                    grace_ms=self.config.gc_grace_ms,
                    pinned=None if compactor is None else compactor.pinned_version(),
                    held=self.leases.oldest(t.table_id),
                    staged=self.revisions.staged_paths(t.table_id),
                )
            )
        return report

    def _gc_quietly(self) -> None:
        try:
            self.revisions.sweep()
            self.gc()
        except Exception as e:  # the next round retries; nothing is lost by waiting
            log.error("garbage collection failed", extra={"error": repr(e)})

    def flush(self, name: str | None = None) -> None:
        """Flush one table (or all) synchronously."""
        tables = [self.table(name)] if name else list(self._served.tables.values())
        for t in tables:
            t.flush()

    def close(self) -> None:
        if self._closed:
            return
        self._gc.stop()
        self._compaction_check.stop()
        for shard_id in list(self._served.followed):
            self.unfollow_shard(shard_id)
        # A compaction in progress finishes (or is discarded) before its table closes.
        self._scheduler.stop()
        try:
            if self.config.flush_on_close:
                for t in list(self._served.tables.values()):
                    try:
                        t.flush()
                    except Exception as e:  # the WAL still holds the rows; next open replays
                        log.error(
                            "flush on close failed", extra={"table": t.name, "error": repr(e)}
                        )
        finally:
            self._closed = True
            for shard in self._served.shards.values():
                shard.guard.close()
            for t in self._served.tables.values():
                t.close()
            self._flusher.stop()
            self._sst_files.decoded.close()
            self._wal.close()
            self._meta.close()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
