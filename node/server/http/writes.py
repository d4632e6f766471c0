"""Small line-protocol writes batched on the event loop: a group commit the loop leads."""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import logging
from collections.abc import Callable, Mapping

from node.server.http.answers import NO_CONTENT, Response
from node.server.http.app import HttpApp

log = logging.getLogger("gnomon.http")

#: Line-protocol bodies up to this size are written in batches with the others that arrive
#: together (see Writes), each of at most WRITE_BATCH_MAX writes.
SMALL_WRITE_BYTES = 64 * 1024
WRITE_BATCH_MAX = 1024

#: What a small write's answer, or the error it earns, is handed to (on the loop).
_Answer = Callable[[Response | Exception], None]
#: Small writes queued on the loop, each with where its answer goes.
_Batch = list[tuple[bytes, Mapping[str, list[str]], _Answer]]


class Writes:
    """Small line-protocol writes, batched on the loop: those read in one pass of the loop
    go together (see :meth:`HttpApp.start_influx_writes`). The loop converts a batch, appends
    its WAL record, applies it and syncs the WAL itself (the ``fdatasync`` releases the
    interpreter lock), then answers the whole batch; the writes that arrived meanwhile wait in
    the socket buffers and form the next batch: a group commit with no thread hand-off.
    Handing the sync to a thread and the answer back to the loop cost each write two thread
    switches, more than overlapping the sync with reading the next batch won
    (bench/small_writes.py: 1.3x the rows/s with 8 clients, 1.1x with one, the same with
    64). The
    price is that anything else on the loop waits for a sync in progress (one
    ``fdatasync``, about 0.1 ms on a local SSD).

    A batch that cannot be written so (a new table or column, a table waiting for flushes, a
    WAL whose appends block, several tables, a refusal that each write must get alone) goes
    to the pool instead (:meth:`HttpApp.influx_writes`), one such batch at a time: measured
    with 8 and 64 clients, a second one beside it made both slower."""

    def __init__(
        self, app: HttpApp, pool: concurrent.futures.Executor, loop: asyncio.AbstractEventLoop
    ) -> None:
        self.app = app
        self.pool = pool
        self.loop = loop
        self.pending: _Batch = []
        self.taking = False
        self.running = False

    def add(self, body: bytes, params: Mapping[str, list[str]], answer: _Answer) -> None:
        """Queue a write; ``answer`` is called on the loop once it is acknowledged or
        refused."""
        self.pending.append((body, params, answer))
        if not self.taking:
            # After the other requests this pass of the loop reads.
            self.taking = True
            self.loop.call_soon(self._take)

    def _take(self) -> None:
        self.taking = False
        while self.pending:
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
            try:
                written = logged.wait()
            except Exception as e:
                _answer_all(batch, e)
            else:
                self.app.metrics.rows_written.inc("influxdb", amount=written)
                _answer_all(batch, NO_CONTENT)

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
