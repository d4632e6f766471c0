"""The engine: tables on one data directory (standalone) — catalog and manifests in SQLite,
WAL on local disk, SSTs in a local object store — behind a small Python API."""

from __future__ import annotations

import logging
import os
import shutil
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

import pyarrow as pa
import pyarrow.compute as pc

from gnomon.errors import AlreadyExists, Closed, NotFound
from gnomon.store.api import StructuredStore
from gnomon.store.sqlite import SqliteStore
from node.engine.catalog import Catalog, TableInfo
from node.engine.manifest import Manifest
from node.engine.options import TableOptions
from node.engine.scan import Scan, ScanRequest
from node.engine.schema import Schema
from node.engine.sst.reader import SstFiles
from node.engine.table import Table
from node.wal.api import Wal
from node.wal.disk import DiskWal
from objectstore.api import ObjectStore
from objectstore.local import LocalObjectStore

log = logging.getLogger("gnomon.engine")

#: Standalone mode keeps every table in one WAL region.
STANDALONE_REGION = 0


@dataclass(frozen=True)
class EngineConfig:
    data_dir: str
    wal_sync: Literal["always", "never"] = "always"
    #: Largest single write accepted, in bytes of Arrow data.
    max_write_bytes: int = 256 * 1024**2
    #: Immutable memtables a table may hold before writers wait for flushes.
    max_immutables: int = 4
    flush_threads: int = 1
    #: Flush every memtable on close, so the next open replays nothing.
    flush_on_close: bool = True


class _Flusher:
    """Background flush workers: tables ask for a flush, a worker flushes until the table has
    no immutable memtable left. A failed flush is retried with backoff; the memtable and its
    WAL records stay until it succeeds, so nothing is lost meanwhile."""

    def __init__(self, threads: int) -> None:
        self._pending: list[Table] = []
        self._cond = threading.Condition()
        self._stop = False
        self._workers = [
            threading.Thread(target=self._run, name=f"gnomon-flush-{i}", daemon=True)
            for i in range(threads)
        ]
        for w in self._workers:
            w.start()

    def request(self, table: Table) -> None:
        with self._cond:
            if table not in self._pending:
                self._pending.append(table)
            self._cond.notify()

    def _run(self) -> None:
        backoff = 0.1
        while True:
            with self._cond:
                while not self._pending and not self._stop:
                    self._cond.wait()
                if self._stop:
                    return
                table = self._pending.pop(0)
            try:
                while table.flush_next():
                    pass
                backoff = 0.1
            except Exception as e:  # keep the worker alive; the table keeps its memtable
                table.last_flush_error = e
                log.error("flush failed; will retry", extra={"table": table.name, "error": repr(e)})
                with self._cond:
                    self._cond.wait(backoff)
                    backoff = min(backoff * 2, 30.0)
                self.request(table)

    def stop(self) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        for w in self._workers:
            w.join(timeout=60)


class Engine:
    def __init__(
        self,
        config: EngineConfig,
        *,
        meta: StructuredStore,
        wal: Wal,
        store: ObjectStore,
    ) -> None:
        self.config = config
        self._meta = meta
        self._wal = wal
        self._store = store
        self._staging = os.path.join(config.data_dir, "tmp")
        shutil.rmtree(self._staging, ignore_errors=True)
        os.makedirs(self._staging, exist_ok=True)
        self._sst_files = SstFiles(store, os.path.join(config.data_dir, "cache"))
        self.catalog = Catalog(meta)
        self.manifest = Manifest(meta)
        self._flusher = _Flusher(config.flush_threads)
        self._tables: dict[str, Table] = {}
        self._lock = threading.RLock()
        self._closed = False
        wal.open_region(STANDALONE_REGION)
        for info in self.catalog.list():
            self._tables[info.name] = self._open_table(info)
        for table in self._tables.values():
            table.recover()

    @classmethod
    def open(cls, data_dir: str, **config: object) -> Engine:
        """Open (creating if needed) a standalone engine on ``data_dir``."""
        cfg = EngineConfig(data_dir=os.path.abspath(data_dir), **config)  # type: ignore[arg-type]
        os.makedirs(cfg.data_dir, exist_ok=True)
        meta = SqliteStore(os.path.join(cfg.data_dir, "meta.db"))
        wal = DiskWal(os.path.join(cfg.data_dir, "wal"), sync=cfg.wal_sync)
        store = LocalObjectStore(os.path.join(cfg.data_dir, "sst"))
        return cls(cfg, meta=meta, wal=wal, store=store)

    def _open_table(self, info: TableInfo) -> Table:
        return Table(
            info,
            wal=self._wal,
            region=STANDALONE_REGION,
            manifest=self.manifest,
            store=self._store,
            sst_files=self._sst_files,
            staging_dir=self._staging,
            request_flush=self._flusher.request,
            max_immutables=self.config.max_immutables,
            max_write_bytes=self.config.max_write_bytes,
        )

    def _check_open(self) -> None:
        if self._closed:
            raise Closed("engine is closed")

    def table(self, name: str) -> Table:
        self._check_open()
        with self._lock:
            t = self._tables.get(name)
        if t is None:
            raise NotFound(f"table {name!r} does not exist")
        return t

    # -- DDL -------------------------------------------------------------------------------------

    def create_table(
        self,
        name: str,
        schema: Schema,
        options: TableOptions | None = None,
        *,
        if_not_exists: bool = False,
    ) -> TableInfo:
        self._check_open()
        with self._lock:
            if name in self._tables:
                if if_not_exists:
                    return self._tables[name].info
                raise AlreadyExists(f"table {name!r} already exists")
            info = self.catalog.create(name, schema, options or TableOptions())
            self.manifest.create_table(info.table_id)
            self._tables[name] = self._open_table(info)
            log.info("created table", extra={"table": name, "table_id": info.table_id})
            return info

    def drop_table(self, name: str, *, if_exists: bool = False) -> bool:
        self._check_open()
        with self._lock:
            table = self._tables.get(name)
            if table is None:
                if if_exists:
                    return False
                raise NotFound(f"table {name!r} does not exist")
            table.close()
            info = self.catalog.drop(name)
            del self._tables[name]
        self.manifest.drop_table(info.table_id)
        self._wal.mark_deleted(
            STANDALONE_REGION, info.table_id, self._wal.last_seq(STANDALONE_REGION, info.table_id)
        )
        for obj in list(self._store.list(f"tables/{info.table_id}/")):
            self._store.delete(obj.key)
            self._sst_files.forget(obj.key)
        log.info("dropped table", extra={"table": name, "table_id": info.table_id})
        return True

    def describe(self, name: str) -> TableInfo:
        return self.table(name).info

    def list_tables(self) -> list[str]:
        self._check_open()
        with self._lock:
            return sorted(self._tables)

    # -- data ------------------------------------------------------------------------------------

    def write(self, name: str, data: pa.RecordBatch | pa.Table) -> int:
        """Write rows durably; returns how many were written."""
        return self.table(name).write(data)

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
    ) -> Iterator[pa.RecordBatch]:
        """Rows of the table as record batches (unordered); see :meth:`plan_scan`."""
        return iter(
            self.plan_scan(
                name,
                columns=columns,
                time_range=time_range,
                predicate=predicate,
                version=version,
                timestamp_ms=timestamp_ms,
                batch_size=batch_size,
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
    ) -> Scan:
        """A scan over one consistent snapshot: ``columns`` (default all), rows with timestamp
        in ``time_range`` = [start, end) ms that match ``predicate``; with ``version`` or
        ``timestamp_ms``, the flushed data of that manifest version (time travel). Iterate it
        for batches; its ``stats`` tell what was pruned."""
        req = ScanRequest(columns, time_range, predicate, batch_size)
        return self.table(name).scan(req, version=version, timestamp_ms=timestamp_ms)

    def read_all(self, name: str, **kwargs: object) -> pa.Table:
        """The whole scan result as one table (convenience for small results)."""
        info = self.describe(name)
        batches = list(self.scan(name, **kwargs))  # type: ignore[arg-type]
        columns = kwargs.get("columns")
        schema = info.schema.arrow()
        if columns is not None:
            schema = pa.schema([schema.field(c) for c in columns])  # type: ignore[attr-defined]
        return pa.Table.from_batches(batches, schema=schema)

    def flush(self, name: str | None = None) -> None:
        """Flush one table (or all) synchronously."""
        tables = [self.table(name)] if name else list(self._tables.values())
        for t in tables:
            t.flush()

    def close(self) -> None:
        if self._closed:
            return
        try:
            if self.config.flush_on_close:
                for t in list(self._tables.values()):
                    try:
                        t.flush()
                    except Exception as e:  # the WAL still holds the rows; next open replays
                        log.error(
                            "flush on close failed", extra={"table": t.name, "error": repr(e)}
                        )
        finally:
            self._closed = True
            for t in self._tables.values():
                t.close()
            self._flusher.stop()
            self._wal.close()
            self._meta.close()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
