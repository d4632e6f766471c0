"""The engine's settings: one value the standalone server and data nodes build from their
config (``gnomon/config.py``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


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
    #: Background compaction workers (the concurrency limit); 0 disables background runs.
    compaction_threads: int = 1
    #: Every table's compaction is also looked at every this many seconds (and on open), not
    #: only after flushes: a window turns cold while nothing is written; 0 disables it.
    compaction_check_interval_s: float = 60.0
    #: Background garbage collection every this many seconds; 0 disables it.
    gc_interval_s: float = 300.0
    #: Unreferenced files younger than this are kept: a scan or an uncommitted flush or
    #: compaction may still be using them.
    gc_grace_ms: int = 600_000
    #: Memory for decoded column chunks of SSTs that scans read again without decoding (see
    #: :mod:`node.engine.sst.decoded`); 0 keeps none.
    decoded_cache_bytes: int = 512 * 1024**2
    #: Memory for what scans derive from SST files: footers, statistics, series directories,
    #: tombstones (see :mod:`node.engine.sst.cache`).
    file_cache_bytes: int = 128 * 1024**2
