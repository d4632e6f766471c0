"""One open region of the Kafka WAL: group commit, reads, deletion marks, recovery, cleaning.

A region is two single-partition topics: the data topic holds the log (see ``frame``), the meta
topic holds RegionMeta snapshots (see ``meta``).

A region is opened at an epoch (the shard's, from the meta service). Opening at epoch E > 0
appends an epoch marker to the data topic and recovers the log up to it, then writes a snapshot
of epoch E; data records carry their writer's epoch and replay skips those below the highest
marker before them. A writer finds out it was deposed when its records or snapshots land behind
someone else's (see ``Region._check_gap``) and stops.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from confluent_kafka import KafkaError, KafkaException, Producer

from gnomon.errors import Corrupted, Fenced, GnomonError, Unavailable
from gnomon.wal.api import WalRecord
from gnomon.wal.group_commit import GroupCommit, Pending

from .frame import (
    Assembler,
    EncodedGroup,
    Fence,
    Record,
    decode,
    encode_group,
    encode_marker,
)
from .kafka import (
    Clients,
    Delivery,
    TopicSpec,
    all_in,
    consume_range,
    unavailable,
    watermarks,
)
from .meta import RegionMeta

logger = logging.getLogger("gnomon.wal.kafka")

#: Snapshots read back from the end of the meta topic when a region opens: the newest of the
#: highest epoch among them is used. A deposed writer leaves at most one snapshot behind a
#: newer owner's (it stops at the first that lands behind one), so a few suffice.
_SNAPSHOT_WINDOW = 8


def snapshot_key(epoch: int) -> bytes:
    """The meta-topic key of snapshots of ``epoch``: one key per epoch, so compaction always
    keeps the newest snapshot of every epoch, whatever a deposed writer appends after it."""
    return b"region-meta" if epoch == 0 else b"region-meta@%d" % epoch


def _delivery_slack(timeout_s: float) -> float:
    """Beyond ``message.timeout.ms``, how long to wait for the delivery report the client
    promises by then."""
    return max(1.0, timeout_s / 2)


class Counters:
    """What a KafkaWal has produced, for monitoring (and for tests to see batching)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.records_produced = 0
        self.snapshots_written = 0

    def add(self, *, records: int = 0, snapshots: int = 0) -> None:
        with self._lock:
            self.records_produced += records
            self.snapshots_written += snapshots


@dataclass
class Context:
    """What the regions of one KafkaWal share."""

    clients: Clients
    producer: Producer
    max_record_bytes: int
    index_interval: int
    #: The producer's fatal error, if it had one: it then takes no more records.
    fatal: Callable[[], KafkaError | None]
    counters: Counters
    #: Longest a write waits for its group's acknowledgement.
    append_timeout_s: float

    @property
    def bootstrap(self) -> str:
        return self.clients.bootstrap

    @property
    def timeout_s(self) -> float:
        return self.clients.timeout_s

    def produce(self, topic: str, value: bytes, key: bytes | None = None) -> Delivery:
        fatal = self.fatal()
        if fatal is not None:
            raise Unavailable(
                f"Kafka at {self.bootstrap}: the WAL's producer failed for good ({fatal}); "
                "close the WAL and create a new one",
                retryable=False,
            )
        delivery = Delivery()
        try:
            self.producer.produce(topic, value=value, key=key, partition=0, on_delivery=delivery)
        except (BufferError, KafkaException) as e:
            raise unavailable(self.bootstrap, f"cannot produce to {topic}", e) from e
        return delivery

    @property
    def delivery_limit_s(self) -> float:
        """How long after a produce its delivery report is due at the latest."""
        return self.timeout_s + _delivery_slack(self.timeout_s)

    def delivered(self, deliveries: list[Delivery], topic: str) -> list[int]:
        """The offsets of the records, once the broker acknowledged every one of them."""
        all_in(deliveries, time.monotonic() + self.delivery_limit_s)
        return self.offsets(deliveries, topic)

    def offsets(self, deliveries: list[Delivery], topic: str) -> list[int]:
        """The offsets of the records whose delivery reports are in; ``Unavailable`` if one
        failed or is missing."""
        offsets: list[int] = []
        for delivery in deliveries:
            if not delivery.done:
                raise Unavailable(
                    f"Kafka at {self.bootstrap}: no delivery report for a record of {topic} "
                    f"within {self.delivery_limit_s}s"
                )
            if delivery.error is not None:
                raise unavailable(self.bootstrap, f"writing to {topic} failed", delivery.error)
            offsets.append(delivery.offset)
        return offsets


@dataclass(frozen=True)
class _Sent:
    """A group produced to the data topic, its delivery reports to come."""

    group: EncodedGroup
    deliveries: list[Delivery]
    #: When the last delivery report is due at the latest (monotonic clock).
    due: float


@dataclass(frozen=True)
class RecoveryInfo:
    """How ``open_region`` rebuilt the region."""

    #: The data-topic offset the snapshot covered, None without a snapshot.
    snapshot_end: int | None
    #: Data-topic records scanned after the snapshot.
    scanned_records: int
    #: Fragments of payloads that an unfinished group left behind (never acknowledged).
    orphans: int
    #: Records a deposed owner wrote after a newer epoch's marker, skipped.
    stale_records: int
    seconds: float


class Region(GroupCommit[_Sent, list[tuple[int, int]]]):
    """The open state of one region. ``_cond`` (see GroupCommit) guards every field below."""

    def __init__(
        self,
        ctx: Context,
        region_id: int,
        data_topic: str,
        meta_topic: str,
        meta: RegionMeta,
        recovery: RecoveryInfo,
        log_start: int,
        epoch: int,
        meta_next: int,
    ) -> None:
        super().__init__(
            f"WAL region {region_id} on {data_topic}",
            "Kafka",
            # Highest seq assigned per table, including writes in flight and floors.
            {table_id: table.last_seq for table_id, table in meta.tables.items()},
            logger,
            ctx.append_timeout_s,
        )
        self._ctx = ctx
        self.id = region_id
        self.data_topic = data_topic
        self.meta_topic = meta_topic
        self.recovery = recovery
        self.epoch = epoch
        #: The epoch of the newer owner found in the topics, once this writer was deposed.
        self._fenced_by: int | None = None
        #: Where this writer's next snapshot lands in the meta topic unless someone else wrote
        #: there (guarded by ``_snapshot_lock``).
        self._meta_next = meta_next
        #: Whether stale records found behind this writer's own were logged already.
        self._stale_logged = recovery.stale_records > 0
        # Held while a snapshot is taken and written, so snapshots reach the meta topic in
        # the order their states were taken: the last one in the topic is the newest.
        self._snapshot_lock = threading.Lock()
        #: ``_version`` of the state the newest durable snapshot holds.
        self._snapshot_version = -1
        #: The lowest live offset by the newest durable snapshot: the cleaner may delete
        #: below it. None until a snapshot covers the state recovery found.
        self._durable_low: int | None = None
        self._deleted_below = log_start
        #: Acknowledged state: only records whose delivery was confirmed, and floors.
        self._meta = meta
        #: Bumped on every change of ``_meta``, to tell whether a snapshot is due.
        self._version = 0
        if recovery.scanned_records == 0:
            # The newest snapshot (or, without one, the empty state) is the whole state.
            self._snapshot_version = self._version
            self._durable_low = meta.lowest_live_offset()

    @classmethod
    def open(
        cls,
        ctx: Context,
        region_id: int,
        data_topic: str,
        meta_topic: str,
        ensure_topics: Callable[[list[TopicSpec]], None],
        epoch: int,
    ) -> Region:
        """Create the region's topics if absent, then recover its state from them; at an
        epoch > 0 the data topic gets the epoch's marker first and the meta topic a snapshot
        of that epoch last. ``Fenced`` if the topics show a later epoch."""
        ensure_topics(
            [
                # Records are deleted by the cleaner only: never by age or size.
                TopicSpec(
                    data_topic,
                    {
                        "cleanup.policy": "delete",
                        "retention.ms": "-1",
                        "retention.bytes": "-1",
                        "max.message.bytes": str(ctx.max_record_bytes + 1024),
                    },
                ),
                # Every snapshot has the same key: compaction keeps the newest.
                TopicSpec(
                    meta_topic,
                    {
                        "cleanup.policy": "compact",
                        "max.message.bytes": str(ctx.max_record_bytes + 1024),
                    },
                ),
            ]
        )
        meta, recovery, log_start, meta_next = _recover(
            ctx, region_id, data_topic, meta_topic, epoch
        )
        region = cls(
            ctx, region_id, data_topic, meta_topic, meta, recovery, log_start, epoch, meta_next
        )
        if epoch:
            # The meta topic learns of the epoch too: a deposed owner's next snapshot lands
            # behind this one, which stops it (see _write_snapshot).
            with region._snapshot_lock:
                region._write_snapshot(meta.copy())
                region._snapshot_version = region._version
        return region

    # -- writes -----------------------------------------------------------------------------

    def _send(self, batch: list[Pending]) -> _Sent:
        group = encode_group(
            [(p.table_id, p.seq, p.payload) for p in batch], self._ctx.max_record_bytes, self.epoch
        )
        deliveries = [self._ctx.produce(self.data_topic, record) for record in group.records]
        return _Sent(group, deliveries, time.monotonic() + self._ctx.delivery_limit_s)

    def _wait(self, sent: _Sent, until: float | None) -> bool:
        # Past its due time a missing report is an outcome too: the write failed.
        end = sent.due if until is None else min(until, sent.due)
        return all_in(sent.deliveries, end) or time.monotonic() >= sent.due

    def _finish(self, sent: _Sent) -> list[tuple[int, int]]:
        """Per write, the offsets of the Kafka records holding its first and last fragment,
        once the broker acknowledged them all."""
        offsets = self._ctx.offsets(sent.deliveries, self.data_topic)
        self._ctx.counters.add(records=len(offsets))
        # One group in flight at a time and only this writer: the records follow the log's
        # end back to back, unless someone else wrote in between.
        expected = self._meta.end
        for offset in offsets:
            if offset > expected:
                self._check_gap(expected, offset)
            expected = offset + 1
        return [(offsets[first], offsets[last]) for first, last in sent.group.spans]

    def _check_gap(self, start: int, end: int) -> None:
        """Records ``start .. end`` of the data topic were written by someone else while this
        writer's group was on its way. A newer epoch among them means this writer was deposed
        (``Fenced``: the group is not applied, and replay skips it as stale); records of its
        own epoch mean a second writer at that epoch (``Unavailable``); lower epochs are a
        deposed owner's late records, stale by the replay rule, and only counted."""
        stale = 0
        for offset, record in self._scan(start, end):
            if record.epoch > self.epoch:
                self._fenced_by = record.epoch
                raise self._fenced_error()
            if record.epoch == self.epoch:
                raise Unavailable(
                    f"{self._where}: {self.data_topic} offset {offset} was written at this "
                    f"writer's epoch {self.epoch} by someone else (a second writer of the "
                    "region)",
                    retryable=False,
                )
            stale += not record.marker
        if stale and not self._stale_logged:
            self._stale_logged = True
            logger.warning(
                "WAL region %d: %d records of a deposed owner (epoch below %d) landed in %s "
                "before offset %d; they are never applied",
                self.id,
                stale,
                self.epoch,
                self.data_topic,
                end,
            )

    def _scan(self, start: int, end: int) -> Iterator[tuple[int, Record]]:
        consumer = self._ctx.clients.consumer()
        try:
            records = consume_range(
                consumer,
                self.data_topic,
                start,
                end,
                bootstrap=self._ctx.bootstrap,
                timeout_s=self._ctx.timeout_s,
            )
            for offset, value in records:
                yield offset, decode(value, f"topic {self.data_topic} offset {offset}")
        finally:
            consumer.close()

    def _fenced_error(self) -> Fenced:
        return Fenced(
            f"{self._where}: a newer owner opened the region at epoch {self._fenced_by} "
            f"(this writer holds epoch {self.epoch}); it takes no more writes",
            shard_id=self.id,
        )

    def _failed_error(self, failure: BaseException) -> Unavailable:
        if isinstance(failure, Fenced):
            return self._fenced_error()
        return super()._failed_error(failure)

    def _committed(self, batch: list[Pending], placed: list[tuple[int, int]] | None) -> None:
        # Applied only now, so readers never see a record before it is acknowledged.
        for pending, (first, last) in zip(batch, placed or [], strict=True):
            table = self._meta.table(pending.table_id)
            table.apply(pending.seq, first, last, self._ctx.index_interval)
            self._meta.end = max(self._meta.end, last + 1)
        self._version += 1

    # -- reads ------------------------------------------------------------------------------

    def read(self, table_id: int, from_seq: int) -> Iterator[WalRecord]:
        with self._cond:
            self._check_open()
            table = self._meta.tables.get(table_id)
            if table is None or not table.has_live_records:
                return iter(())
            low = max(from_seq, table.latest_marked_deleted + 1)
            # Bounds taken now: the read sees the table as of this call.
            last = table.next_seq_num - 1
            if low > last:
                return iter(())
            start, end = table.start_offset(low), table.high_watermark
            fence = Fence(self._meta.fence_at(start))
        return self._records(table_id, low, last, start, end, fence)

    def _records(
        self, table_id: int, low: int, last: int, start: int, end: int, fence: Fence
    ) -> Iterator[WalRecord]:
        consumer = self._ctx.clients.consumer()
        try:
            assembler = Assembler(table_id)
            records = consume_range(
                consumer,
                self.data_topic,
                start,
                end,
                bootstrap=self._ctx.bootstrap,
                timeout_s=self._ctx.timeout_s,
                check=self._check_open,
            )
            for offset, value in records:
                record = decode(value, f"topic {self.data_topic} offset {offset}")
                if not fence.admit(record):
                    continue
                for fragment in record.fragments:
                    entry = assembler.feed(offset, fragment)
                    # Below ``low``: before the range asked for, or a duplicate of a seq
                    # already handed out (the first copy in the log counts).
                    if entry is None or entry.seq < low:
                        continue
                    yield WalRecord(table_id, entry.seq, entry.payload)
                    if entry.seq >= last:
                        return
                    low = entry.seq + 1
        finally:
            consumer.close()

    # -- deletion ---------------------------------------------------------------------------

    def mark_deleted(self, table_id: int, up_to_seq: int) -> None:
        with self._snapshot_lock:
            with self._cond:
                self._check_open()
                if self._fenced_by is not None:
                    raise self._fenced_error()
                current = self._meta.tables.get(table_id)
                floor = current.latest_marked_deleted if current is not None else 0
                if up_to_seq <= floor:
                    return
                snapshot = self._meta.copy()
                version = self._version
            snapshot.table(table_id).mark_deleted(up_to_seq)
            # Durable first: the floor applies (to reads and next seqs) only once a restart
            # would find it too.
            self._write_snapshot(snapshot)
            with self._cond:
                self._meta.table(table_id).mark_deleted(up_to_seq)
                self._last[table_id] = max(self._last.get(table_id, 0), up_to_seq)
                self._version += 1
                if self._version == version + 1:
                    # Nothing else changed meanwhile: the snapshot just written is current.
                    self._snapshot_version = self._version

    def last_seq(self, table_id: int) -> int:
        with self._cond:
            self._check_open()
            return self._last.get(table_id, 0)

    def clean(self, delete_below: Callable[[str, int], bool]) -> None:
        """One round of the cleaner: snapshot the region if it changed, then have the records
        below the lowest live offset deleted (``delete_below`` says whether that happened).

        The snapshot goes first: recovery scans the data topic from the snapshot's end, so no
        record above the end of the newest snapshot may be deleted.
        """
        with self._snapshot_lock:
            with self._cond:
                if self._closed or self._fenced_by is not None:
                    return
                snapshot = self._meta.copy() if self._version != self._snapshot_version else None
                version = self._version
            if snapshot is not None:
                self._write_snapshot(snapshot)
                self._snapshot_version = version
            low = self._durable_low
        if low is not None and low > self._deleted_below and delete_below(self.data_topic, low):
            self._deleted_below = low
            logger.debug("WAL region %d: deleted %s below offset %d", self.id, self.data_topic, low)

    def _write_snapshot(self, snapshot: RegionMeta) -> None:
        """Called with ``_snapshot_lock`` held. ``Fenced`` (and the region stops) if the
        snapshot landed behind one of a newer epoch: it is then a deposed writer's, which
        recovery passes over, and the cleaner must not act on it."""
        data = snapshot.encode(self._ctx.max_record_bytes)
        delivery = self._ctx.produce(self.meta_topic, data, snapshot_key(self.epoch))
        offset = self._ctx.delivered([delivery], self.meta_topic)[0]
        self._ctx.counters.add(snapshots=1)
        if offset > self._meta_next:
            newer = _newest_epoch(self._ctx, self.id, self.meta_topic, self._meta_next, offset)
            if newer > self.epoch:
                with self._cond:
                    self._fenced_by = newer
                    self._failure = self._failure or self._fenced_error()
                raise self._fenced_error()
        self._meta_next = offset + 1
        self._durable_low = snapshot.lowest_live_offset()

    # -- life cycle -------------------------------------------------------------------------

    def close(self) -> None:
        with self._cond:
            if not self._stop_writes():
                return
            # Only to spare the next open a scan (the log alone recovers the same state), so
            # not tried where Kafka just failed a write.
            dirty = self._version != self._snapshot_version and self._failure is None
            snapshot = self._meta.copy() if dirty else None
        if snapshot is None:
            return
        with self._snapshot_lock:
            try:
                self._write_snapshot(snapshot)
            except GnomonError as e:
                logger.warning("WAL region %d: no snapshot on close: %s", self.id, e)


def _recover(
    ctx: Context, region_id: int, data_topic: str, meta_topic: str, epoch: int
) -> tuple[RegionMeta, RecoveryInfo, int, int]:
    """The region's state: the newest snapshot plus a scan of the data topic from its end (up
    to the marker of ``epoch``, appended first when ``epoch`` > 0). Also returns the data
    topic's log start offset and the meta topic's high watermark."""
    started = time.monotonic()
    bootstrap, timeout_s = ctx.bootstrap, ctx.timeout_s
    snapshot, meta_high = _latest_snapshot(ctx, region_id, meta_topic)
    snapshot_end = snapshot.end if snapshot is not None else None
    meta = snapshot if snapshot is not None else RegionMeta(region_id)
    _check_epoch(region_id, meta.epoch, epoch)
    consumer = ctx.clients.consumer()
    try:
        log_start, high = watermarks(consumer, data_topic, bootstrap=bootstrap, timeout_s=timeout_s)
        if meta.end < log_start or meta.end > high:
            raise Corrupted(
                f"WAL region {region_id}: {data_topic} holds offsets {log_start}..{high}, but "
                f"its snapshot covers it up to {meta.end}"
                + ("" if snapshot_end is not None else " (no snapshot)")
                + ": records were deleted or the topic was recreated behind the WAL's back"
            )
        if epoch:
            # The marker goes first: whatever lands after it at a lower epoch is stale, and
            # whatever landed before it is this state's, so every later replay agrees with it.
            marker = ctx.delivered([ctx.produce(data_topic, encode_marker(epoch))], data_topic)
            high = marker[0] + 1
        assembler = Assembler()
        fence = Fence(meta.epoch)
        scanned = 0
        records = consume_range(
            consumer, data_topic, meta.end, high, bootstrap=bootstrap, timeout_s=timeout_s
        )
        for offset, value in records:
            scanned += 1
            record = decode(value, f"topic {data_topic} offset {offset}")
            if record.marker:
                meta.raise_fence(offset, record.epoch)
            if not fence.admit(record):
                continue
            for fragment in record.fragments:
                entry = assembler.feed(offset, fragment)
                if entry is not None:
                    meta.table(entry.table_id).apply(
                        entry.seq, entry.first_offset, entry.last_offset, ctx.index_interval
                    )
        assembler.finish()
        meta.end = high
    finally:
        consumer.close()
    # A newer owner's marker landed before this one: this opener is deposed already.
    _check_epoch(region_id, meta.epoch, epoch)
    if assembler.orphans:
        logger.warning(
            "WAL region %d: %d fragments of payloads in %s belong to groups that were never "
            "finished (their writes were not acknowledged); they are ignored",
            region_id,
            assembler.orphans,
            data_topic,
        )
    if fence.stale:
        logger.warning(
            "WAL region %d: %d records in %s were written by deposed owners after a newer "
            "epoch's marker (never acknowledged); they are ignored",
            region_id,
            fence.stale,
            data_topic,
        )
    info = RecoveryInfo(
        snapshot_end,
        scanned,
        assembler.orphans,
        fence.stale,
        time.monotonic() - started,
    )
    logger.info(
        "WAL region %d: recovered from %s at epoch %d (snapshot end %s, %d records scanned) "
        "in %.3fs",
        region_id,
        data_topic,
        epoch,
        info.snapshot_end,
        scanned,
        info.seconds,
    )
    return meta, info, log_start, meta_high


def _check_epoch(region_id: int, held: int, epoch: int) -> None:
    if held > epoch:
        raise Fenced(
            f"WAL region {region_id} was opened at epoch {held}; it cannot be opened at the "
            f"earlier epoch {epoch}",
            shard_id=region_id,
        )


def _latest_snapshot(
    ctx: Context, region_id: int, meta_topic: str
) -> tuple[RegionMeta | None, int]:
    """The newest snapshot of the highest epoch among the last few of the meta topic (a
    deposed writer's may follow the newer owner's), and the meta topic's high watermark."""
    consumer = ctx.clients.consumer()
    try:
        low, high = watermarks(
            consumer, meta_topic, bootstrap=ctx.bootstrap, timeout_s=ctx.timeout_s
        )
        latest: RegionMeta | None = None
        # Snapshots are produced one at a time, one record per batch, so the newest ones are
        # just below ``high`` (and compaction keeps the newest record of each epoch's key).
        records = consume_range(
            consumer,
            meta_topic,
            max(low, high - _SNAPSHOT_WINDOW),
            high,
            bootstrap=ctx.bootstrap,
            timeout_s=ctx.timeout_s,
        )
        for offset, value in records:
            snapshot = RegionMeta.decode(value, region_id, f"topic {meta_topic} offset {offset}")
            if latest is None or snapshot.epoch >= latest.epoch:
                latest = snapshot
        return latest, high
    finally:
        consumer.close()


def _newest_epoch(ctx: Context, region_id: int, meta_topic: str, start: int, end: int) -> int:
    """The highest epoch of the snapshots ``start .. end`` of the meta topic."""
    consumer = ctx.clients.consumer()
    try:
        records = consume_range(
            consumer, meta_topic, start, end, bootstrap=ctx.bootstrap, timeout_s=ctx.timeout_s
        )
        epochs = (
            RegionMeta.decode(value, region_id, f"topic {meta_topic} offset {offset}").epoch
            for offset, value in records
        )
        return max(epochs, default=0)
    finally:
        consumer.close()
