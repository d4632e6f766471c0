"""The server's memory budget (setting ``server_memory_bytes``): one account of what the
queries running on a server hold, shared by two kinds of holding:

- each query's DataFusion memory pool (``query_memory_bytes``), reserved whole when the
  query makes its DataFusion session: DataFusion keeps a pool per session, so the pools of
  the queries running at once can only be bounded together by reserving each one;
- the record batches the engine's scans have materialised and handed on (to DataFusion),
  each reserved before it is handed on and released when the scan is asked for the next one
  or ends (what DataFusion keeps of them, it holds in its pool);
- the query's answer, each batch reserved as DataFusion hands it over and held until the
  query ends (:mod:`node.sql.drain`).

A reservation the budget cannot hold fails at once, for that query only: ``Unavailable``
(retryable) when running queries hold the rest, ``TooLarge`` when it exceeds the whole
budget; the queries already holding memory run on. A query's reservations are released
together when it ends (:meth:`QueryMemory.release_all`), whatever way it ends.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Generator, Iterator

import pyarrow as pa

from gnomon.errors import TooLarge, Unavailable

SETTING = "server_memory_bytes"


class MemoryBudget:
    """What a server's queries hold at once, at most ``limit_bytes`` (None: no limit, the
    holdings still counted for the metric)."""

    def __init__(self, limit_bytes: int | None = None) -> None:
        if limit_bytes is not None and limit_bytes < 1:
            raise ValueError(f"{SETTING} must be positive, got {limit_bytes}")
        self.limit_bytes = limit_bytes
        self._held = 0
        self._lock = threading.Lock()

    @property
    def held(self) -> int:
        """Bytes reserved by running queries now."""
        with self._lock:
            return self._held

    def reserve(self, nbytes: int, what: str) -> None:
        """Take ``nbytes`` (for ``what``, named in the error) out of the budget, or fail."""
        with self._lock:
            limit = self.limit_bytes
            if limit is None or self._held + nbytes <= limit:
                self._held += nbytes
                return
            held = self._held
        if nbytes > limit:
            raise TooLarge(
                f"over the server's memory budget: {what} needs {nbytes} bytes, more than the "
                f"whole budget of {limit} bytes (setting {SETTING})"
            )
        raise Unavailable(
            f"over the server's memory budget: {what} needs {nbytes} bytes and running "
            f"queries hold {held} of its {limit} bytes (setting {SETTING}); try again"
        )

    def release(self, nbytes: int) -> None:
        with self._lock:
            self._held -= nbytes

    def query(self, on_refused: Callable[[], None] = lambda: None) -> QueryMemory:
        """The account of one query; ``on_refused`` is called the first time it is refused."""
        return QueryMemory(self, on_refused)


class QueryMemory:
    """What one query holds of its server's :class:`MemoryBudget`."""

    __slots__ = ("_budget", "_ended", "_held", "_lock", "_on_refused", "_pool", "_refused")

    def __init__(self, budget: MemoryBudget, on_refused: Callable[[], None]) -> None:
        self._budget = budget
        self._on_refused = on_refused
        self._held = 0
        self._pool = 0
        self._refused = False
        self._ended = False
        self._lock = threading.Lock()

    def _reserve(self, nbytes: int, what: str) -> None:
        if self._ended:
            return  # a scan DataFusion had not stopped yet when its query ended
        try:
            self._budget.reserve(nbytes, what)
        except (TooLarge, Unavailable):
            # Each scan of the query may meet the budget; the query is counted once.
            with self._lock:
                first, self._refused = not self._refused, True
            if first:
                self._on_refused()
            raise
        with self._lock:
            self._held += nbytes

    def _release(self, nbytes: int) -> None:
        with self._lock:
            # After release_all, a scan ending late has nothing left to give back.
            nbytes = min(nbytes, self._held)
            self._held -= nbytes
        self._budget.release(nbytes)

    def pool(self, nbytes: int) -> None:
        """Reserve the query's DataFusion memory pool of ``nbytes``; a query making more than
        one session (one per statement it runs) holds the largest pool once."""
        with self._lock:
            more = max(0, nbytes - self._pool)
        if more:
            self._reserve(more, "the query's DataFusion memory pool (query_memory_bytes)")
            with self._lock:
                self._pool += more

    def hold(self, nbytes: int, what: str) -> None:
        """Reserve ``nbytes`` (for ``what``, named in the error) until the query ends."""
        self._reserve(nbytes, what)

    def held_batches(
        self, batches: Iterator[pa.RecordBatch]
    ) -> Generator[pa.RecordBatch, None, None]:
        """``batches``, each reserved before it is handed on and released when the next one
        is asked for, or the iteration ends."""
        holding = 0
        try:
            for batch in batches:
                if holding:
                    self._release(holding)
                    holding = 0
                self._reserve(batch.nbytes, f"a scan batch of {batch.num_rows} rows")
                holding = batch.nbytes
                yield batch
        finally:
            if holding:
                self._release(holding)

    def release_all(self) -> None:
        """Give back everything the query holds: it ended."""
        with self._lock:
            held, self._held, self._pool, self._ended = self._held, 0, 0, True
        self._budget.release(held)
