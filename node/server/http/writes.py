"""Small line-protocol writes batched on the event loop: a group-commit pipeline."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import logging
from collections.abc import Callable, Mapping

from gnomon.wal.api import Ticket
from node.engine.table import Logged
from node.server.http.answers import NO_CONTENT, Response
from node.server.http.app import HttpApp

log = logging.getLogger("gnomon.http")

#: Line-protocol bodies up to this size are written in batches with the others that arrive
#: together (see Writes), each of at most WRITE_BATCH_MAX writes.
SMALL_WRITE_BYTES = 64 * 1024
WRITE_BATCH_MAX = 1024
#: Batches of small writes started on the loop and not yet answered. Writes arriving while
#: one is being synced wait and go as the next batch (one conversion, one memtable insert)
#: once it is answered: the classic group-commit pipeline. A second batch appended behind
#: the first took whatever single write came next: with 8 clients, batches of 2.2 writes on
#: average and 170 us of loop time per write, against 3.8 writes and 124 us held back.
WRITE_BATCHES_IN_FLIGHT = 1


#: What a small write's answer, or the error it earns, is handed to (on the loop).
_Answer = Callable[[Response | Exception], None]
#: Small writes queued on the loop, each with where its answer goes.
_Batch = list[tuple[bytes, Mapping[str, list[str]], _Answer]]


class Writes:
    """Small line-protocol writes, batched on the loop: those read in one pass of the loop
    go together (see :meth:`HttpApp.start_influx_writes`). The loop converts a batch, appends
    its WAL record and applies it itself, and the WAL's sync thread makes it durable while the
    loop reads the writes that form the next batch (WRITE_BATCHES_IN_FLIGHT); the whole
    batch is answered in the loop pass after that sync. A request then costs the
    loop one wake-up, where a hand-over to a pool thread and back cost two more thread
    switches, and the threads woken by dozens fought the loop for the interpreter lock.

    A batch that cannot be written without blocking (a new table or column, a table waiting
    for flushes, a WAL whose appends block, several tables, a refusal that each write must
    get alone) goes to the pool instead (:meth:`HttpApp.influx_writes`), one such batch at a
    time: measured with 8 and 64 clients, a second one beside it made both slower."""

    def __init__(
        self, app: HttpApp, pool: concurrent.futures.Executor, loop: asyncio.AbstractEventLoop
    ) -> None:
        self.app = app
        self.pool = pool
        self.loop = loop
        self.pending: _Batch = []
        self.taking = False
        self.running = False
        self.in_flight = 0

    def add(self, body: bytes, params: Mapping[str, list[str]], answer: _Answer) -> None:
        """Queue a write; ``answer`` is called on the loop once it is acknowledged or
        refused (straight from the batch's answer: a future's callbacks would cost each write
        one more pass of the loop)."""
        self.pending.append((body, params, answer))
        if not self.taking:
            # After the other requests this pass of the loop reads.
            self.taking = True
            self.loop.call_soon(self._take)

    def _take(self) -> None:
        self.taking = False
        while self.pending and self.in_flight < WRITE_BATCHES_IN_FLIGHT:
            batch = self.pending[:WRITE_BATCH_MAX]
            try:
                logged = self.app.start_influx_writes([(body, params) for body, params, _ in batch])
            except Exception as e:
                del self.pending[: len(batch)]
                _answer_all(batch, e)
                continue
            if logged is None:
                if not self.running:
                    del self.pending[: len(batch)]
                    self._send(batch)
                return
            del self.pending[: len(batch)]
            self.in_flight += 1
            logged.ticket.then(functools.partial(self._durable, batch, logged))

    def _durable(self, batch: _Batch, logged: Logged, _: Ticket) -> None:
        """On the thread that settled the ticket: answer the batch on the loop."""
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits for these
            self.loop.call_soon_threadsafe(self._answer, batch, logged)

    def _answer(self, batch: _Batch, logged: Logged) -> None:
        self.in_flight -= 1
        try:
            written = logged.finish()
        except Exception as e:
            _answer_all(batch, e)
        else:
            self.app.metrics.rows_written.inc("influxdb", amount=written)
            _answer_all(batch, NO_CONTENT)
        self._take()

    def _send(self, batch: _Batch) -> None:
        self.running = True
        job = self.loop.run_in_executor(
            self.pool, self.app.influx_writes, [(body, params) for body, params, _ in batch]
        )
        job.add_done_callback(functools.partial(self._done, batch))

    def _done(self, batch: _Batch, job: asyncio.Future[list[Response | Exception]]) -> None:
        self.running = False
        try:
            answers = job.result()
        except Exception as e:
            answers = [e] * len(batch)
        for (_, _, answer), outcome in zip(batch, answers, strict=True):
            _settle_answer(answer, outcome)
        self._take()


def _settle_answer(answer: _Answer, outcome: Response | Exception) -> None:
    # One connection's failure to answer must not keep the rest of its batch waiting.
    try:
        answer(outcome)
    except Exception:
        log.exception("answering a write failed")


def _answer_all(batch: _Batch, outcome: Response | Exception) -> None:
    for _, _, answer in batch:
        _settle_answer(answer, outcome)
