"""Snapshots held for readers outside the node (a Spark job): a pinned manifest version and the
memtable views of the instant it was pinned, kept under a lease the reader renews.

A held snapshot is scanned by id (every task of a job sees the same rows, memtable rows
included, without forcing a flush), and garbage collection keeps its manifest version and every
file while the lease lasts (``oldest``), so neither retention nor compaction deletes a file the
job has still to read. A lease that is not renewed runs out and lets go of its snapshot.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass

from gnomon.errors import NotFound
from node.engine.table import Pinned


@dataclass
class _Lease:
    table_id: int
    pinned: Pinned
    lease_ms: int
    expires: float


class SnapshotLeases:
    """Held snapshots by id; thread safe."""

    def __init__(self) -> None:
        self._leases: dict[str, _Lease] = {}
        self._lock = threading.Lock()

    def _sweep(self, now: float) -> None:
        for key in [k for k, lease in self._leases.items() if lease.expires <= now]:
            del self._leases[key]

    def hold(self, table_id: int, pinned: Pinned, lease_ms: int) -> str:
        """Hold ``pinned`` (of table ``table_id``) for ``lease_ms``; its id."""
        key = uuid.uuid4().hex
        now = time.monotonic()
        with self._lock:
            self._sweep(now)
            self._leases[key] = _Lease(table_id, pinned, lease_ms, now + lease_ms / 1000)
        return key

    def get(self, key: str, table_id: int) -> Pinned:
        """The snapshot held as ``key`` (its lease renewed: a task reading it is the job
        running); NotFound once released or run out, or if it is another table's."""
        lease = self._renewed(key)
        if lease.table_id != table_id:
            raise NotFound(f"snapshot lease {key!r} holds another table")
        return lease.pinned

    def renew(self, key: str) -> int:
        """Extend the lease by its length again; the held manifest version."""
        return self._renewed(key).pinned.version.version

    def _renewed(self, key: str) -> _Lease:
        now = time.monotonic()
        with self._lock:
            self._sweep(now)
            lease = self._leases.get(key)
            if lease is None:
                raise NotFound(
                    f"no held snapshot {key!r}: it was released or its lease ran out "
                    "(plan the read again)"
                )
            lease.expires = now + lease.lease_ms / 1000
            return lease

    def release(self, key: str) -> bool:
        with self._lock:
            return self._leases.pop(key, None) is not None

    def oldest(self, table_id: int) -> int | None:
        """The oldest manifest version of the table a lease holds (None: none held)."""
        with self._lock:
            self._sweep(time.monotonic())
            held = [
                lease.pinned.version.version
                for lease in self._leases.values()
                if lease.table_id == table_id
            ]
        return min(held, default=None)
