"""The front of a WAL backend: the :class:`gnomon.wal.api.Wal` calls checked and routed to regions.

Every backend (disk, Kafka) keeps a map of open regions behind the same calls; it only says how
a region opens (and closes the WAL as a whole). The argument checks live here too, so each
backend refuses the same bad ids and payloads with the same errors.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator
from typing import Generic, Protocol, TypeVar

from gnomon.errors import Closed, Conflict, InvalidArgument, NotFound, TooLarge
from gnomon.wal.api import MAX_U64, Ticket, WalRecord


class Region(Protocol):
    """One open region of a backend: the Wal calls without the region id."""

    def append(self, table_id: int, payload: bytes) -> Ticket: ...

    def sync_to(self, ticket: Ticket) -> int: ...

    def read(self, table_id: int, from_seq: int) -> Iterator[WalRecord]: ...

    def mark_deleted(self, table_id: int, up_to_seq: int) -> None: ...

    def last_seq(self, table_id: int) -> int: ...

    def close(self) -> None: ...


R = TypeVar("R", bound=Region)


def _check_id(what: str, value: object) -> int:
    """``value`` if it is a u64 (region and table ids, seqs); InvalidArgument naming ``what``."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_U64:
        raise InvalidArgument(f"WAL {what} must be an unsigned 64-bit int, got {value!r}")
    return value


class RegionWal(ABC, Generic[R]):
    """A :class:`gnomon.wal.api.Wal` routing each call to an open region of type ``R``.

    ``where`` names the WAL in errors (``"WAL at <root>"``); ``max_payload`` is the largest
    payload a record may carry (None: no limit of its own).
    """

    #: Whether ``append`` may wait for the network or a group in flight (see gnomon.wal.api).
    append_blocks = True

    def __init__(self, where: str, *, max_payload: int | None = None) -> None:
        self._where = where
        self._max_payload = max_payload
        # Serialises open_region/close_region/close; the data path only reads _regions.
        self._open_lock = threading.Lock()
        self._regions: dict[int, R] = {}
        #: The epoch each open region was opened at.
        self._epochs: dict[int, int] = {}
        self._closed = False

    @abstractmethod
    def _open_region(self, region_id: int, epoch: int) -> R:
        """Open (creating if absent) and recover a region at ``epoch``; called with
        ``_open_lock`` held."""

    @abstractmethod
    def _region_name(self, region_id: int) -> str:
        """The region as errors name it (``"WAL region 3 at <root>"``)."""

    def open_region(self, region_id: int, epoch: int = 0) -> None:
        _check_id("region id", region_id)
        _check_id("epoch", epoch)
        with self._open_lock:
            self._check_open()
            held = self._epochs.get(region_id)
            if held is None:
                self._regions[region_id] = self._open_region(region_id, epoch)
                self._epochs[region_id] = epoch
            elif held != epoch:
                raise Conflict(
                    f"{self._region_name(region_id)} is open at epoch {held}; "
                    f"close it before opening it at epoch {epoch}"
                )

    def close_region(self, region_id: int) -> None:
        _check_id("region id", region_id)
        with self._open_lock:
            self._check_open()
            region = self._regions.pop(region_id, None)
            self._epochs.pop(region_id, None)
            # Closed under the lock so a reopen cannot race the release of the region.
            if region is not None:
                region.close()

    def append(self, region_id: int, table_id: int, payload: bytes) -> Ticket:
        _check_id("table id", table_id)
        payload = self._check_payload(table_id, payload)
        return self._region(region_id).append(table_id, payload)

    def sync_to(self, region_id: int, ticket: Ticket) -> int:
        return self._region(region_id).sync_to(ticket)

    def write(self, region_id: int, table_id: int, payload: bytes) -> int:
        ticket = self.append(region_id, table_id, payload)
        return self.sync_to(region_id, ticket)

    def read(self, region_id: int, table_id: int, from_seq: int) -> Iterator[WalRecord]:
        _check_id("table id", table_id)
        _check_id("from_seq", from_seq)
        return self._region(region_id).read(table_id, from_seq)

    def mark_deleted(self, region_id: int, table_id: int, up_to_seq: int) -> None:
        _check_id("table id", table_id)
        _check_id("up_to_seq", up_to_seq)
        self._region(region_id).mark_deleted(table_id, up_to_seq)

    def last_seq(self, region_id: int, table_id: int) -> int:
        _check_id("table id", table_id)
        return self._region(region_id).last_seq(table_id)

    def _take_regions(self) -> list[R] | None:
        """Called by ``close`` with ``_open_lock`` held: mark the WAL closed and take its open
        regions, for the caller to close; None if the WAL was closed already."""
        if self._closed:
            return None
        self._closed = True
        regions = list(self._regions.values())
        self._regions.clear()
        self._epochs.clear()
        return regions

    def _check_open(self) -> None:
        if self._closed:
            raise Closed(f"{self._where} is closed")

    def _region(self, region_id: int) -> R:
        region = self._regions.get(region_id)
        if region is None:
            self._check_open()
            _check_id("region id", region_id)
            raise NotFound(f"{self._region_name(region_id)} is not open")
        return region

    def _check_payload(self, table_id: int, payload: object) -> bytes:
        # bytearray and memoryview are copied: the caller may change them after write returns.
        if not isinstance(payload, bytes):
            if not isinstance(payload, bytearray | memoryview):
                raise InvalidArgument(
                    f"WAL payload of table {table_id} must be bytes, got {type(payload).__name__}"
                )
            payload = bytes(payload)
        if self._max_payload is not None and len(payload) > self._max_payload:
            raise TooLarge(
                f"WAL payload of table {table_id} has {len(payload)} bytes; "
                f"a record holds at most {self._max_payload}"
            )
        return payload
