"""Retention and garbage collection of one table.

Versions: the current one is always kept, and so are the newest ``max_versions`` and every
version made within ``time_travel`` (plus the one current at the start of that window, which
reads at a timestamp inside it resolve to). Older versions are expired, never one a running
compaction commits against.

Files: an object under the table's prefix that no kept version refers to is deleted once it is
older than the grace period and the oldest kept version is too. The first condition protects
files of flushes and compactions that have not committed yet; the second, scans still reading
an expired version (which stopped being current no later than the oldest kept version was
made). The same pass removes orphans of failed or killed flushes and compactions, which no
version ever referred to.
"""

from __future__ import annotations

from dataclasses import dataclass

from node.engine.manifest import Manifest
from node.engine.options import TableOptions
from node.engine.sst.reader import SstFiles
from objectstore.api import ObjectStore


@dataclass
class GcReport:
    versions_expired: int = 0
    files_deleted: int = 0
    bytes_deleted: int = 0

    def add(self, other: GcReport) -> None:
        self.versions_expired += other.versions_expired
        self.files_deleted += other.files_deleted
        self.bytes_deleted += other.bytes_deleted


def keep_from(
    versions: list[tuple[int, int]], options: TableOptions, *, now_ms: int, pinned: int | None
) -> int:
    """The oldest version to keep, of ``versions`` = [(version, timestamp_ms)] oldest first."""
    head = versions[-1][0]
    by_count = head - options.max_versions + 1
    window = now_ms - options.time_travel_ms
    # The version current at the window's start is the last one made before it.
    by_age = next((v for v, ts in reversed(versions) if ts <= window), versions[0][0])
    keep = min(by_count, by_age)
    if pinned is not None:
        keep = min(keep, pinned)
    return max(keep, versions[0][0])


def collect(
    table_id: int,
    options: TableOptions,
    *,
    manifest: Manifest,
    store: ObjectStore,
    sst_files: SstFiles,
    now_ms: int,
    grace_ms: int,
    pinned: int | None = None,
    held: int | None = None,
    staged: frozenset[str] | set[str] = frozenset(),
) -> GcReport:
    """Expire versions of the table and delete the files no kept version refers to.
    ``pinned`` is the oldest base version of a running compaction: it and later versions are
    kept, and no file is deleted meanwhile (the task's outputs are not referenced yet, and
    a long task may have written its first ones more than the grace period ago). ``held`` is
    the oldest version a reader holds (a snapshot lease): it and later versions are kept, so
    their files are too. ``staged`` are files not referenced yet but still wanted (staged
    under an open revision)."""
    report = GcReport()
    versions = [(v.version, v.timestamp_ms) for v in manifest.versions(table_id)]
    oldest = min((v for v in (pinned, held) if v is not None), default=None)
    keep = keep_from(versions, options, now_ms=now_ms, pinned=oldest)
    report.versions_expired = manifest.expire(table_id, keep)
    oldest_kept = next(ts for v, ts in versions if v >= keep)
    if pinned is not None or oldest_kept > now_ms - grace_ms:
        return report
    referenced = manifest.referenced_paths(table_id)
    for obj in list(store.list(f"tables/{table_id}/")):
        if obj.key in referenced or obj.key in staged or obj.mtime_ms > now_ms - grace_ms:
            continue
        if store.delete(obj.key):
            report.files_deleted += 1
            report.bytes_deleted += obj.size
        sst_files.forget(obj.key)
    return report
