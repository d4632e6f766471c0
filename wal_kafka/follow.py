"""Following a region: a follower shard reads its leader's records as they land, never writing.

A follower starts where its tables' flushed data ends (the newest snapshot says at which offset
each table's records from a sequence on begin), then reads the data topic to its end and keeps
reading as the leader appends. It applies the replay rule exactly as recovery does (markers
raise the fence; a deposed owner's late records are skipped; fragments are joined), so what it
applies is what the next leader would replay. Nothing is acknowledged through a follower: a
record may reach it a moment before the leader's acknowledgement, and a record whose write
failed may reach it too, like any record that reached the log ("may or may not be stored").
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping

from confluent_kafka import KafkaException, TopicPartition

from gnomon.errors import Unavailable
from gnomon.wal.api import WalRecord

from .frame import Assembler, Fence, decode
from .kafka import unavailable, watermarks
from .region import Context, _latest_snapshot

logger = logging.getLogger("gnomon.wal.kafka.follow")

#: Records taken from the consumer at once, and the longest wait for them.
_BATCH = 1000
_WAIT_S = 0.05
#: How often the topic's end is read again while caught up (for the lag figures).
_WATERMARK_EVERY_S = 0.5


class RegionFollower:
    """Reads one region from where ``floors`` (table id -> highest sequence already in its
    SSTs) need it, handing each admitted record of a table above its floor to ``apply``."""

    def __init__(
        self,
        ctx: Context,
        region_id: int,
        data_topic: str,
        meta_topic: str,
        floors: Mapping[int, int],
    ) -> None:
        self._ctx = ctx
        self.region_id = region_id
        self._topic = data_topic
        self._floors = dict(floors)
        snapshot, _ = _latest_snapshot(ctx, region_id, meta_topic)
        consumer = ctx.clients.consumer()
        try:
            low, high = watermarks(
                consumer, data_topic, bootstrap=ctx.bootstrap, timeout_s=ctx.timeout_s
            )
        finally:
            consumer.close()
        start = low
        fence = 0
        if snapshot is not None:
            starts = [snapshot.end]
            for table_id, floor in self._floors.items():
                table = snapshot.tables.get(table_id)
                if table is not None and table.has_live_records and floor + 1 < table.next_seq_num:
                    starts.append(table.start_offset(floor + 1))
            start = max(low, min(starts))
            fence = snapshot.fence_at(start)
        #: Next offset to read, and the topic's end as last seen: their gap is the lag.
        self.position = start
        self.end = high
        #: Highest sequence applied per table (the floor until a record arrives).
        self.applied: dict[int, int] = dict(self._floors)
        #: When the follower last read everything up to the end it knew of.
        self.caught_up_at: float | None = None
        self._fence = Fence(fence)
        self._assembler = Assembler()

    @property
    def lag_records(self) -> int:
        return max(0, self.end - self.position)

    def run(
        self,
        apply: Callable[[WalRecord], None],
        stop: threading.Event,
        tick: Callable[[], None] = lambda: None,
    ) -> None:
        """Read and apply until ``stop`` is set; ``tick`` runs between reads (at least every
        few tens of milliseconds), on this thread, so it never races ``apply``."""
        consumer = self._ctx.clients.consumer()
        try:
            consumer.assign([TopicPartition(self._topic, 0, self.position)])
            checked = 0.0
            while not stop.is_set():
                try:
                    messages = consumer.consume(_BATCH, _WAIT_S)
                except KafkaException as e:
                    raise unavailable(self._ctx.bootstrap, f"cannot follow {self._topic}", e) from e
                for message in messages:
                    error = message.error()
                    if error is not None:
                        raise unavailable(
                            self._ctx.bootstrap, f"cannot follow {self._topic}", error
                        )
                    offset = message.offset()
                    if offset is None or offset < self.position:
                        continue
                    self.position = offset + 1
                    self._take(offset, message.value() or b"", apply)
                now = time.monotonic()
                if not messages and now - checked >= _WATERMARK_EVERY_S:
                    checked = now
                    self.end = self._high(consumer)
                self.end = max(self.end, self.position)
                if self.position >= self.end:
                    self.caught_up_at = now
                tick()
        finally:
            consumer.close()

    def _high(self, consumer: object) -> int:
        try:
            _, high = watermarks(
                consumer,  # type: ignore[arg-type]
                self._topic,
                bootstrap=self._ctx.bootstrap,
                timeout_s=self._ctx.timeout_s,
            )
        except Unavailable as e:
            logger.warning("cannot read the end of %s: %s", self._topic, e)
            return self.end
        return high

    def _take(self, offset: int, value: bytes, apply: Callable[[WalRecord], None]) -> None:
        record = decode(value, f"topic {self._topic} offset {offset}")
        if not self._fence.admit(record):
            return
        for fragment in record.fragments:
            entry = self._assembler.feed(offset, fragment)
            if entry is None:
                continue
            # At or below what is applied: in the SSTs already, or a duplicate (the first
            # copy in the log counts, as in recovery).
            if entry.seq <= self.applied.get(entry.table_id, 0):
                continue
            self.applied[entry.table_id] = entry.seq
            apply(WalRecord(entry.table_id, entry.seq, entry.payload))
