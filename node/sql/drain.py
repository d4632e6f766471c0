"""A DataFusion answer collected under the running query's token (:mod:`node.sql.cancel`),
batch by batch: each batch is counted against the answer limit (``max_result_bytes``) and
held in the server's memory budget (:mod:`node.security.memory`) as it arrives, so an
answer past either fails as it grows (collected whole before being measured, one cross
join's answer took a node from 442 MB to 21.7 GB), and the token is checked between
batches, so a query whose caller went away stops at its next batch. A quick answer is not
checked at all (none before the first batch, none within :data:`CHECK_S`): a client that
only half-closed its connection, which a server cannot tell from one gone, still gets it.

Between two batches DataFusion works without asking anything of Python, for as long as
the plan takes (an aggregate over a join, a recursive query, a table function). A query
that may take long so is awaited (``awaited``): its batches come through an event loop of
the calling thread, the token is checked every :data:`CHECK_S` meanwhile, and when it says
stop the stream is dropped, which aborts DataFusion's tasks where they next yield.
Awaiting costs about 0.2 ms of CPU per batch (each crosses from DataFusion's threads to the
loop), so the executor leaves it out for a single SELECT of one table, whose work is
bounded by the rows its scans hand over, each scan checking the token.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import datafusion
import pyarrow as pa

from gnomon.errors import GnomonError
from node.sql import cancel

#: Seconds between two checks of an awaited query's token.
CHECK_S = 0.05


class _Answer:
    """The batches of one answer so far, each counted and held as it is added."""

    def __init__(self, token: cancel.CancelToken) -> None:
        self.token = token
        self.batches: list[pa.RecordBatch] = []
        self.nbytes = 0

    def add(self, batch: pa.RecordBatch) -> None:
        if self.batches:
            self.token.check()  # between two batches
        self.nbytes += batch.nbytes
        self.token.check_result(self.nbytes)
        self.token.memory.hold(batch.nbytes, f"a batch of {batch.num_rows} rows of its answer")
        self.batches.append(batch)


def collect(df: datafusion.DataFrame, *, awaited: bool) -> pa.Table:
    """The answer of ``df``, collected under the running query's token (whole at once
    without one); ``awaited``: the query may work long between two batches."""
    token = cancel.current()
    if token is None:
        return df.to_arrow_table()
    # Held only here (and read without the Python wrapper, whose frames would hold it too):
    # dropping the stream aborts DataFusion's tasks, and a frame's local would keep it
    # alive for as long as a traceback through the frame lives.
    streams = [df.execute_stream().rbs]
    answer = _Answer(token)
    try:
        if awaited:
            _loop().run_until_complete(_awaited(streams, answer))
        else:
            for batch in streams[0]:
                answer.add(batch.to_pyarrow())
    finally:
        streams.clear()
    schema = answer.batches[0].schema if answer.batches else df.schema()
    return pa.Table.from_batches(answer.batches, schema=schema)


async def _awaited(streams: list[Any], answer: _Answer) -> None:
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None
    stopped: list[GnomonError] = []
    timer: list[asyncio.TimerHandle] = []

    def watch() -> None:
        try:
            answer.token.check()
        except GnomonError as e:
            stopped.append(e)
            task.cancel()  # the batch awaited is given up: DataFusion's future is dropped
            return
        timer[:] = [loop.call_later(CHECK_S, watch)]

    timer.append(loop.call_later(CHECK_S, watch))
    try:
        async for batch in streams[0]:
            answer.add(batch.to_pyarrow())
    except asyncio.CancelledError:
        if not stopped:
            raise
    finally:
        for handle in timer:
            handle.cancel()
    if stopped:
        # Raised here, not in the handler: as the cancellation's context it would keep
        # the frames awaiting DataFusion alive.
        raise stopped[0]


_LOOPS = threading.local()


def _loop() -> asyncio.AbstractEventLoop:
    """This thread's event loop for awaiting answers, made on first use."""
    loop: asyncio.AbstractEventLoop | None = getattr(_LOOPS, "loop", None)
    if loop is None:
        loop = _LOOPS.loop = asyncio.new_event_loop()
    return loop
