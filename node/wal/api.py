"""The WAL contract, shared by the disk WAL (standalone) and the Kafka WAL (cluster).

A WAL holds regions; a region holds the log records of many tables, each record a payload of
bytes for one table with a sequence number the WAL assigns. Sequence numbers are per table,
start at 1 and strictly increase in the order writes are acknowledged. ``write`` returns only
once the record is durable under the WAL's sync policy.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class WalRecord:
    table_id: int
    seq: int
    payload: bytes


class Wal(Protocol):
    def open_region(self, region_id: int, epoch: int = 0) -> None:
        """Open (creating if absent) a region at ``epoch``, the shard's ownership epoch from the
        meta service (0: unfenced, as in standalone); opening an open region at the same epoch
        is a no-op, at another one ``Conflict`` (close it first). A WAL shared between nodes
        (Kafka) refuses an epoch below one the region was opened at (``Fenced``) and never
        replays records a writer of an earlier epoch appended after a later epoch opened it;
        a node-local WAL (disk) needs no fence of its own and only records the epoch."""

    def close_region(self, region_id: int) -> None:
        """Flush and close a region; its files stay."""

    def write(self, region_id: int, table_id: int, payload: bytes) -> int:
        """Append one record durably and return its sequence number.

        Concurrent callers are group-committed: many records, one sync.
        """

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
