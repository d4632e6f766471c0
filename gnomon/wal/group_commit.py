"""Group commit of one WAL region's writes by a leader, as the Kafka WAL makes them durable
(the disk WAL appends and syncs apart, see node.wal.disk), and the error every WAL gives the
writers of a failed group.

Each region has a queue of pending writes and a condition variable. A writer queues its record;
the first writer that finds no commit in progress becomes the leader: it takes the whole queue,
assigns the seqs (per table, in queue order), makes the group durable with the lock released
(one sync, one Kafka record), then wakes everyone. Writers arriving meanwhile form the next
group. A failed commit fails the whole group and stops the region taking writes: what reached
the log is then unknown, and only reopening the region (which re-reads the log) can tell.
"""

from __future__ import annotations

import logging
import threading
from abc import ABC, abstractmethod
from typing import Generic, TypeVar

from gnomon.errors import Closed, InvalidArgument, Unavailable
from gnomon.wal.api import MAX_U64, Ticket

#: What a backend's commit of a group hands back to apply once the group is durable.
R = TypeVar("R")


class Pending:
    """One write waiting in a region's queue; the leader fills in seq or error, then done."""

    __slots__ = ("done", "error", "payload", "seq", "table_id")

    def __init__(self, table_id: int, payload: bytes) -> None:
        self.table_id = table_id
        self.payload = payload
        self.seq = 0
        self.error: BaseException | None = None
        self.done = False


class GroupCommit(ABC, Generic[R]):
    """The write path of one open region; the region's backend subclasses it.

    ``_cond`` guards every field here, and the subclass's own state that writes, reads and
    deletion marks share. ``where`` names the region in errors and logs (``"WAL region 3 at
    <dir>"``), ``durable_in`` where its records go (``"the disk"``). ``last`` is the highest seq
    assigned per table (including deletion floors and writes in flight).
    """

    def __init__(
        self, where: str, durable_in: str, last: dict[int, int], log: logging.Logger
    ) -> None:
        self._where = where
        self._durable_in = durable_in
        self._log = log
        self._cond = threading.Condition(threading.Lock())
        self._last = last
        self._queue: list[Pending] = []
        self._leading = False
        self._failure: BaseException | None = None
        self._closed = False

    @abstractmethod
    def _commit(self, batch: list[Pending]) -> R:
        """Make ``batch`` (seqs assigned, never empty) durable; called without ``_cond``."""

    def _committed(self, batch: list[Pending], result: R | None) -> None:
        """Called with ``_cond`` held once ``batch`` is durable, before any of its writers
        returns; ``result`` is what ``_commit`` returned (None if nothing needed committing)."""

    def append(self, table_id: int, payload: bytes) -> Ticket:
        """The write itself (a Kafka record is durable once the broker acknowledges it, and
        nothing less tells its place), with its ticket settled."""
        return Ticket.durable(self.write(table_id, payload))

    def sync_to(self, ticket: Ticket) -> int:
        return ticket.wait()

    def write(self, table_id: int, payload: bytes) -> int:
        pending = Pending(table_id, payload)
        with self._cond:
            self._check_open()
            if self._failure is not None:
                raise self._failed_error(self._failure)
            self._queue.append(pending)
            while not pending.done:
                if self._leading:
                    self._cond.wait()
                else:
                    self._lead()
        if pending.error is not None:
            raise pending.error
        return pending.seq

    def _lead(self) -> None:
        """Commit everything queued as one group; called and returns with ``_cond`` held."""
        batch, self._queue = self._queue, []
        self._leading = True
        failure: BaseException | None = None
        try:
            if self._failure is not None:
                failure = self._failure
                return
            accepted: list[Pending] = []
            for pending in batch:
                seq = self._last.get(pending.table_id, 0) + 1
                if seq > MAX_U64:
                    # Only a floor set at the very top of the range gets here; failing the
                    # one write keeps it from failing the group (and stopping the region).
                    pending.error = InvalidArgument(
                        f"{self._where}: table {pending.table_id} has no seq left"
                    )
                    continue
                pending.seq = self._last[pending.table_id] = seq
                accepted.append(pending)
            result: R | None = None
            self._cond.release()
            try:
                if accepted:
                    result = self._commit(accepted)
            except BaseException as e:
                failure = e
            finally:
                self._cond.acquire()
            if failure is None:
                self._committed(accepted, result)
            else:
                self._failure = failure
                self._log.error(
                    "%s: group commit of %d records failed, region takes no more writes "
                    "until reopened: %r",
                    self._where,
                    len(batch),
                    failure,
                )
        finally:
            for pending in batch:
                if failure is not None:
                    pending.error = self._failed_error(failure)
                pending.done = True
            self._leading = False
            self._cond.notify_all()
        if failure is not None and not isinstance(failure, Exception):
            raise failure

    def _failed_error(self, failure: BaseException) -> Unavailable:
        return failed_error(self._where, self._durable_in, failure)

    def _stop_writes(self) -> bool:
        """Called with ``_cond`` held, by close: refuse new writes and let those already queued
        commit (they were accepted). False if the region was closed already."""
        if self._closed:
            return False
        self._closed = True
        while self._queue or self._leading:
            self._cond.wait()
        return True

    def _check_open(self) -> None:
        if self._closed:
            raise Closed(f"{self._where} is closed")


def failed_error(where: str, durable_in: str, failure: BaseException) -> Unavailable:
    """What the writers of a group whose write or sync failed get, and every writer of the
    region after them, until it is reopened."""
    error = Unavailable(
        f"{where}: a write failed ({failure!r}); whether the records of that group "
        f"reached {durable_in} is unknown, and the region takes no more writes until "
        "it is closed and reopened",
        retryable=False,
    )
    error.__cause__ = failure
    return error
