"""What to compact: a pure function from a table's SST metas (and the range tombstones of its
tombstone files) plus its options to a plan.

- Files wholly older than the TTL floor are removed without being read.
- Data files are grouped by segment window (of their first row, under the current
  ``segment_duration``); only files of one window are merged together.
- Inside a window, files smaller than ``compaction_target_size`` are bucketed by size
  (size-tiered: a file joins a bucket while it is at most 1.5x the bucket's mean). The first
  bucket, smallest sizes first, with ``compaction_min_threshold`` files is merged, at most
  ``compaction_max_threshold`` of them. A window whose small files reach
  ``compaction_max_threshold`` without forming such a bucket merges its smallest ones anyway,
  so a window at rest keeps fewer than ``compaction_max_threshold`` small files.
- A cold window (no file written for ``compaction_full_after``) merges its small files into
  one however few they are: a window at rest is then read from one file.
- A window that holds deletion markers it could purge, or rows a range tombstone may shadow
  that were not rewritten since, is compacted whole ("cleanup"), so deletes do not linger.
- Tombstone files none of whose tombstones can shadow a live row any more are dropped.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from node.engine.options import TableOptions
from node.engine.sst.meta import SstMeta
from node.engine.tombstones import RangeTombstone

#: A file joins a size bucket while it is at most this many times the bucket's mean size.
BUCKET_RATIO = 1.5


@dataclass(frozen=True)
class WindowPick:
    window_start_ms: int
    inputs: tuple[SstMeta, ...]
    #: No live file outside the inputs holds rows their deletion markers shadow.
    purge_deletes: bool
    reason: str


@dataclass(frozen=True)
class Plan:
    #: Files (data or tombstones) wholly older than the TTL floor.
    expired: tuple[SstMeta, ...] = ()
    picks: tuple[WindowPick, ...] = ()
    #: Tombstone files whose tombstones shadow nothing any more.
    dead_tombstones: tuple[SstMeta, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.expired or self.picks or self.dead_tombstones)


def ttl_floor(options: TableOptions, now_ms: int) -> int | None:
    return now_ms - options.ttl_ms if options.enable_ttl else None


def pick(
    files: Sequence[SstMeta],
    tombstones: Mapping[str, Sequence[RangeTombstone]],
    options: TableOptions,
    *,
    now_ms: int,
    busy: Collection[str] = (),
) -> Plan:
    """Plan compaction of ``files`` (a version's live SSTs); ``tombstones`` maps each
    tombstone file's path to its contents; ``busy`` paths belong to running tasks and are
    neither picked nor dropped."""
    floor = ttl_floor(options, now_ms)
    expired = tuple(
        f for f in files if floor is not None and f.max_ts < floor and f.path not in busy
    )
    gone = {f.path for f in expired}
    data = [f for f in files if f.is_data and f.path not in gone]
    ranges = [t for f in files if not f.is_data and f.path not in gone for t in tombstones[f.path]]

    windows: dict[int, list[SstMeta]] = defaultdict(list)
    for f in data:
        if f.path not in busy:
            windows[f.min_ts // options.segment_duration_ms].append(f)
    picks = [
        p
        for w, members in sorted(windows.items())
        if (
            p := _pick_window(
                w * options.segment_duration_ms, members, data, ranges, options, now_ms
            )
        )
    ]
    dead = tuple(
        f
        for f in files
        if not f.is_data
        and f.path not in gone
        and f.path not in busy
        and all(_purgeable(t, data) for t in tombstones[f.path])
    )
    return Plan(expired, tuple(picks), dead)


def _pick_window(
    start: int,
    members: list[SstMeta],
    data: Sequence[SstMeta],
    ranges: Sequence[RangeTombstone],
    options: TableOptions,
    now_ms: int,
) -> WindowPick | None:
    whole = can_purge(members, data)
    unapplied = any(_unapplied(t, f) for f in members for t in ranges)
    if unapplied or (whole and any(f.deletes for f in members)):
        return WindowPick(start, tuple(members), whole, "cleanup")
    small = sorted(
        (f for f in members if f.size < options.compaction_target_size), key=lambda f: f.size
    )
    chosen: list[SstMeta] = []
    reason = ""
    for bucket in _buckets(small):
        if len(bucket) >= options.compaction_min_threshold:
            chosen, reason = bucket[: options.compaction_max_threshold], "size-tiered"
            break
    if not chosen and len(small) >= options.compaction_max_threshold:
        chosen, reason = small[: options.compaction_max_threshold], "file count"
    if not chosen and len(small) >= 2 and _cold(members, options, now_ms):
        chosen, reason = small[: options.compaction_max_threshold], "cold window"
    if not chosen:
        return None
    return WindowPick(start, tuple(chosen), can_purge(chosen, data), reason)


def _cold(members: Sequence[SstMeta], options: TableOptions, now_ms: int) -> bool:
    """No file of the window was written within ``compaction_full_after`` (files of unknown
    age count as old)."""
    after = options.compaction_full_after_ms
    return after is not None and all((f.created_ms or 0) + after <= now_ms for f in members)


def _buckets(by_size: Sequence[SstMeta]) -> list[list[SstMeta]]:
    buckets: list[list[SstMeta]] = []
    total = 0
    for f in by_size:
        if buckets and f.size <= BUCKET_RATIO * total / len(buckets[-1]):
            buckets[-1].append(f)
            total += f.size
        else:
            buckets.append([f])
            total = f.size
    return buckets


def can_purge(inputs: Sequence[SstMeta], data: Sequence[SstMeta]) -> bool:
    """Whether every live data file that may hold rows older than the inputs' deletion markers
    (overlapping their time range, with an older sequence) is among the inputs."""
    if not inputs:
        return False
    lo = min(f.min_ts for f in inputs)
    hi = max(f.max_ts for f in inputs)
    newest = max(f.max_seq for f in inputs)
    chosen = {f.path for f in inputs}
    return all(
        f.path in chosen or f.max_ts < lo or f.min_ts > hi or f.min_seq >= newest for f in data
    )


def _unapplied(t: RangeTombstone, f: SstMeta) -> bool:
    return f.tombstones_applied < t.seq and t.may_shadow(f.min_ts, f.max_ts, f.min_seq)


def _purgeable(t: RangeTombstone, data: Sequence[SstMeta]) -> bool:
    return not any(_unapplied(t, f) for f in data)
