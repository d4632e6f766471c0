"""Group commit of one WAL region's writes by a leader, as the Kafka WAL makes them durable
(the disk WAL appends and syncs apart, see node.wal.disk), and the error every WAL gives the
writers of a failed group.

Each region has a queue of pending writes and a condition variable. A writer queues its record;
the first writer that finds no commit in progress becomes the leader: it takes the whole queue,
assigns the seqs (per table, in queue order), sends the group (one Kafka record) and waits until
it is durable with the lock released, then wakes everyone. Writers arriving meanwhile form the
next group. A failed commit fails the whole group and stops the region taking writes: what
reached the log is then unknown, and only reopening the region (which re-reads the log) can tell.

A write waits at most the region's append deadline. A group still unanswered when its first
writer's deadline passes is *late*: its writers are told their records may or may not be
stored, and the group stays in flight, its seqs taken. The next leader waits for its outcome
(within its own deadline) before sending anything, so groups still reach the log one at a time
and in seq order: a late group that lands is applied like any other (its records readable, the
region's state whole), one that fails stops the region as above, and one still unanswered at
the next leader's deadline turns that leader's group away unsent.
"""

from __future__ import annotations

import logging
import threading
import time
from abc import ABC, abstractmethod
from typing import Generic, TypeVar

from gnomon.errors import Closed, InvalidArgument, Unavailable
from gnomon.wal.api import MAX_U64, Ticket

#: What a backend's send of a group hands to its wait and finish (the records in flight).
S = TypeVar("S")
#: What a backend's finish of a group hands back to apply once the group is durable.
R = TypeVar("R")


class Pending:
    """One write waiting in a region's queue; the leader fills in seq or error, then done.
    ``deadline`` is when its writer stops waiting (monotonic clock; None: never)."""

    __slots__ = ("deadline", "done", "error", "payload", "seq", "table_id")

    def __init__(self, table_id: int, payload: bytes, deadline: float | None) -> None:
        self.table_id = table_id
        self.payload = payload
        self.deadline = deadline
        self.seq = 0
        self.error: BaseException | None = None
        self.done = False


class GroupCommit(ABC, Generic[S, R]):
    """The write path of one open region; the region's backend subclasses it.

    ``_cond`` guards every field here, and the subclass's own state that writes, reads and
    deletion marks share. ``where`` names the region in errors and logs (``"WAL region 3 at
    <dir>"``), ``durable_in`` where its records go (``"the disk"``). ``last`` is the highest seq
    assigned per table (including deletion floors and writes in flight). ``deadline_s`` is the
    longest a write waits for its group (None: until the backend knows the outcome).
    """

    def __init__(
        self,
        where: str,
        durable_in: str,
        last: dict[int, int],
        log: logging.Logger,
        deadline_s: float | None = None,
    ) -> None:
        self._where = where
        self._durable_in = durable_in
        self._log = log
        self._deadline_s = deadline_s
        self._cond = threading.Condition(threading.Lock())
        self._last = last
        self._queue: list[Pending] = []
        self._leading = False
        #: A group whose writers were answered at their deadline, still in flight.
        self._late: tuple[list[Pending], S] | None = None
        self._failure: BaseException | None = None
        self._closed = False

    @abstractmethod
    def _send(self, batch: list[Pending]) -> S:
        """Start making ``batch`` (seqs assigned, never empty) durable; called without
        ``_cond``."""

    @abstractmethod
    def _wait(self, sent: S, until: float | None) -> bool:
        """Wait for the outcome of ``sent`` until the monotonic clock reaches ``until`` (None:
        as long as the backend's own bounds allow); whether it is known. Called without
        ``_cond``."""

    @abstractmethod
    def _finish(self, sent: S) -> R:
        """Once the outcome of ``sent`` is known: what ``_committed`` is handed, or the
        failure raised. Called without ``_cond``."""

    def _committed(self, batch: list[Pending], result: R | None) -> None:
        """Called with ``_cond`` held once ``batch`` is durable, before any of its writers
        returns; ``result`` is what ``_finish`` returned (None if nothing needed committing)."""

    def append(self, table_id: int, payload: bytes) -> Ticket:
        """The write itself (a Kafka record is durable once the broker acknowledges it, and
        nothing less tells its place), with its ticket settled."""
        return Ticket.durable(self.write(table_id, payload))

    def sync_to(self, ticket: Ticket) -> int:
        return ticket.wait()

    def write(self, table_id: int, payload: bytes) -> int:
        deadline = None if self._deadline_s is None else time.monotonic() + self._deadline_s
        pending = Pending(table_id, payload, deadline)
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
        """Commit everything queued as one group, once a late group before it is settled;
        called and returns with ``_cond`` held."""
        batch, self._queue = self._queue, []
        self._leading = True
        # The first writer's: the group answers none of its writers later than theirs.
        deadline = batch[0].deadline
        error: BaseException | None = None
        try:
            if self._late is not None and self._failure is None:
                self._settle(*self._late, deadline)
            if self._failure is not None:
                error = self._failed_error(self._failure)
            elif self._late is not None:
                error = self._behind_error()
            else:
                accepted = self._assign(batch)
                if accepted:
                    error = self._settle(accepted, None, deadline)
                else:
                    self._committed(accepted, None)
        except BaseException as e:
            # Interrupted (KeyboardInterrupt, ...): no writer may take its write for durable.
            error = self._failed_error(e)
            raise
        finally:
            for pending in batch:
                if pending.error is None:
                    pending.error = error
                pending.done = True
            self._leading = False
            self._cond.notify_all()

    def _assign(self, batch: list[Pending]) -> list[Pending]:
        """Give each write of ``batch`` its seq; the writes that got one."""
        accepted: list[Pending] = []
        for pending in batch:
            seq = self._last.get(pending.table_id, 0) + 1
            if seq > MAX_U64:
                # Only a floor set at the very top of the range gets here; failing the one
                # write keeps it from failing the group (and stopping the region).
                pending.error = InvalidArgument(
                    f"{self._where}: table {pending.table_id} has no seq left"
                )
                continue
            pending.seq = self._last[pending.table_id] = seq
            accepted.append(pending)
        return accepted

    def _settle(
        self, batch: list[Pending], sent: S | None, until: float | None
    ) -> Unavailable | None:
        """Send ``batch`` unless ``sent`` says it was, and wait for its outcome until
        ``until``; called with ``_cond`` held (released meanwhile). None once the group is
        applied, else what its writers are told: it is late (still in flight, kept in
        ``_late``) or it failed (kept in ``_failure``)."""
        failure: BaseException | None = None
        known = False
        result: R | None = None
        self._cond.release()
        try:
            if sent is None:
                sent = self._send(batch)
            known = self._wait(sent, until)
            if known:
                result = self._finish(sent)
        except BaseException as e:
            failure = e
        finally:
            self._cond.acquire()
        if failure is not None:
            self._late = None
            self._failure = failure
            self._log.error(
                "%s: group commit of %d records failed, region takes no more writes "
                "until reopened: %r",
                self._where,
                len(batch),
                failure,
            )
            if not isinstance(failure, Exception):
                raise failure
            return self._failed_error(failure)
        assert sent is not None
        if not known:
            if self._late is None:
                self._log.warning(
                    "%s: %s has not acknowledged a group of %d records within %ss; its writers "
                    "are told it may or may not be stored, and the next group waits for it",
                    self._where,
                    self._durable_in,
                    len(batch),
                    self._deadline_s,
                )
            self._late = (batch, sent)
            return self._late_error()
        if self._late is not None:
            self._log.info(
                "%s: %s acknowledged the late group of %d records",
                self._where,
                self._durable_in,
                len(batch),
            )
        self._late = None
        self._committed(batch, result)
        return None

    def _failed_error(self, failure: BaseException) -> Unavailable:
        return failed_error(self._where, self._durable_in, failure)

    def _late_error(self) -> Unavailable:
        return Unavailable(
            f"{self._where}: {self._durable_in} did not acknowledge the write within "
            f"{self._deadline_s}s; it may or may not be stored (it is still on its way)"
        )

    def _behind_error(self) -> Unavailable:
        return Unavailable(
            f"{self._where}: the write waited {self._deadline_s}s behind an earlier one "
            f"{self._durable_in} has not acknowledged yet; it was not stored"
        )

    def _stop_writes(self) -> bool:
        """Called with ``_cond`` held, by close: refuse new writes, let those already queued
        commit (they were accepted) and wait for the outcome of a late group (so the state
        the region closes with has it). False if the region was closed already."""
        if self._closed:
            return False
        self._closed = True
        while self._queue or self._leading:
            self._cond.wait()
        if self._late is not None and self._failure is None:
            self._leading = True
            try:
                self._settle(*self._late, None)
            finally:
                self._leading = False
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
