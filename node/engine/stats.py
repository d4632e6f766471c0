"""Point-in-time figures of the engine and its tables, for metrics and admin endpoints.

A stats object is a copy taken under each table's lock: callers never hold engine internals,
so a metrics scrape racing a flush or a drop sees a consistent, if slightly old, picture.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TableStats:
    name: str
    table_id: int
    #: Manifest version the table reads at now.
    version: int
    #: Live data SSTs of that version and their total size in bytes and rows.
    sst_files: int
    sst_bytes: int
    sst_rows: int
    #: Rows and bytes in memtables (active and immutable), not yet in SSTs.
    memtable_rows: int
    memtable_bytes: int
    #: Immutable memtables waiting for the flusher.
    pending_flushes: int
    #: The last flush attempt failed (the flusher retries it).
    flush_failing: bool


@dataclass(frozen=True)
class CacheStats:
    """A cache with a byte budget (decoded column chunks, SST file metadata): what it holds,
    may hold, and how lookups fared since the engine opened (found: hits, made: misses)."""

    bytes: int
    capacity_bytes: int
    hits: int
    misses: int


@dataclass(frozen=True)
class EngineStats:
    tables: tuple[TableStats, ...]
    decoded_cache: CacheStats
    #: What scans derive from SST files (footers, statistics, series directories, ...).
    file_cache: CacheStats

    @property
    def memtable_rows(self) -> int:
        return sum(t.memtable_rows for t in self.tables)

    @property
    def memtable_bytes(self) -> int:
        return sum(t.memtable_bytes for t in self.tables)

    @property
    def pending_flushes(self) -> int:
        return sum(t.pending_flushes for t in self.tables)

    @property
    def flush_failing(self) -> int:
        return sum(t.flush_failing for t in self.tables)
