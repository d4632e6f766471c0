"""The WAL contract, shared by the disk WAL (standalone) and the Kafka WAL (cluster).

A WAL holds regions; a region holds the log records of many tables, each record a payload of
bytes for one table with a sequence number the WAL assigns. Sequence numbers are per table,
start at 1 and strictly increase in the order records are appended to the region.

A write is two steps: ``append`` assigns the record its seq and places it in the log, and the
:class:`Ticket` it returns settles once the record is durable under the WAL's sync policy (one
sync covers every record appended before it): ``sync_to`` waits for that, running the sync on the
caller's thread if none is running (the group commit's leader: whoever waits syncs, so no
thread is woken to do it for them). ``write`` is ``append`` then ``sync_to``. A record is
readable (``read``) only once durable. ``append_blocks`` tells whether ``append``
itself may wait on the network or a group in flight (Kafka: its append is the durable write,
its ticket settled when returned); the disk WAL's appends only wait on a segment roll-over.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

#: Table ids and sequence numbers are unsigned 64-bit integers.
MAX_U64 = (1 << 64) - 1


@dataclass(frozen=True)
class WalRecord:
    table_id: int
    seq: int
    payload: bytes


class Ticket:
    """A record appended to a WAL region: its ``seq`` from the start, settled once the record
    is durable (``error`` None) or once it cannot be (``error`` set; whether the record
    reached the log is then unknown)."""

    __slots__ = ("_guard", "_waiter", "error", "position", "seq", "settled")

    def __init__(self, seq: int, position: int = 0) -> None:
        self.seq = seq
        #: Where the record is among its region's appends (what a sync must cover).
        self.position = position
        self.settled = False
        self.error: BaseException | None = None
        self._guard = threading.Lock()
        #: Held until settled, made only if a thread waits (most find the ticket settled).
        self._waiter: threading.Lock | None = None

    @classmethod
    def durable(cls, seq: int) -> Ticket:
        """A ticket settled at once: its record was durable when appended."""
        ticket = cls(seq)
        ticket.settled = True
        return ticket

    def settle(self, error: BaseException | None = None) -> None:
        """Called by the WAL, once: wake the waiter."""
        with self._guard:
            self.error = error
            self.settled = True
            waiter = self._waiter
        if waiter is not None:
            waiter.release()

    def wait(self) -> int:
        """Block until settled (one thread at a time: the appender); the seq, or the error
        raised."""
        with self._guard:
            waiter = None
            if not self.settled:
                waiter = self._waiter = threading.Lock()
                waiter.acquire()
        if waiter is not None:
            waiter.acquire()
        if self.error is not None:
            raise self.error
        return self.seq


class Wal(Protocol):
    append_blocks: bool

    def open_region(self, region_id: int, epoch: int = 0) -> None:
        """Open (creating if absent) a region at ``epoch``, the shard's ownership epoch from the
        meta service (0: unfenced, as in standalone); opening an open region at the same epoch
        is a no-op, at another one ``Conflict`` (close it first). A WAL shared between nodes
        (Kafka) refuses an epoch below one the region was opened at (``Fenced``) and never
        replays records a writer of an earlier epoch appended after a later epoch opened it;
        a node-local WAL (disk) needs no fence of its own and only records the epoch."""

    def close_region(self, region_id: int) -> None:
        """Flush and close a region; its files stay."""

    def append(self, region_id: int, table_id: int, payload: bytes) -> Ticket:
        """Append one record; the ticket (with its seq) settles once it is durable, which
        the caller's ``sync_to`` of it sees to.

        Concurrent appends are group-committed: many records, one sync.
        """

    def sync_to(self, region_id: int, ticket: Ticket) -> int:
        """Wait until the ticket's record is durable (syncing here if no sync is running);
        its seq, or the WAL's error raised."""

    def write(self, region_id: int, table_id: int, payload: bytes) -> int:
        """Append one record, wait until it is durable and return its sequence number."""

    def read(self, region_id: int, table_id: int, from_seq: int) -> Iterator[WalRecord]:
        """The table's live records with ``seq >= from_seq``, in ascending sequence order."""

    def mark_deleted(self, region_id: int, table_id: int, up_to_seq: int) -> None:
        """Records of the table with ``seq <= up_to_seq`` are no longer needed; storage that
        holds only such records may be reclaimed. Later writes get sequences > up_to_seq, even
        if the WAL no longer holds any record of the table (so the engine may call this on open
        with its flushed sequence to carry the sequence across restarts)."""

    def last_seq(self, region_id: int, table_id: int) -> int:
        """The highest sequence assigned to the table (0 if none)."""

    def close(self) -> None:
        """Close every region."""


class Follower(Protocol):
    """A region read as its leader writes it (a follower shard's feed)."""

    #: Next offset to read and the log's end as last seen (their gap is the lag).
    position: int
    end: int
    #: Highest sequence applied per table.
    applied: dict[int, int]
    #: When the follower last had read up to the end it knew of (monotonic clock).
    caught_up_at: float | None

    @property
    def lag_records(self) -> int: ...

    def run(
        self,
        apply: Callable[[WalRecord], None],
        stop: threading.Event,
        tick: Callable[[], None] = ...,
    ) -> None:
        """Apply records above each table's floor until ``stop``; ``tick`` between reads."""


@runtime_checkable
class FollowableWal(Protocol):
    """A WAL other nodes can read as it is written: only a shared log (Kafka) is one."""

    def follow(self, region_id: int, floors: Mapping[int, int]) -> Follower:
        """Follow ``region_id`` from above ``floors`` (table id -> sequence in its SSTs)."""
