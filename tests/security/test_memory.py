"""The server's memory budget as an object: a query's DataFusion pool and the scan batches it
hands on share it, a reservation past it fails for that query alone with a clear error, and
every reservation is given back when the query ends."""

from __future__ import annotations

import pyarrow as pa
import pytest

from gnomon.errors import TooLarge, Unavailable
from node.security.memory import MemoryBudget
from node.sql.cancel import Queries, QueryLimits

pytestmark = pytest.mark.unit

MIB = 1024**2


def _batches(count: int, rows: int) -> list[pa.RecordBatch]:
    return [pa.record_batch({"v": pa.array(range(rows), pa.int64())}) for _ in range(count)]


def test_a_scan_holds_one_batch_at_a_time() -> None:
    budget = MemoryBudget(10 * MIB)
    query = budget.query()
    batches = _batches(3, 1000)
    seen = [budget.held for _ in query.held_batches(iter(batches))]
    assert seen == [batches[0].nbytes] * 3
    assert budget.held == 0


def test_a_query_that_cannot_get_its_share_fails_and_the_others_keep_theirs() -> None:
    budget = MemoryBudget(3 * MIB)
    refused: list[str] = []
    first, second = budget.query(), budget.query(lambda: refused.append("second"))
    first.pool(2 * MIB)
    with pytest.raises(Unavailable, match=r"over the server's memory budget.*server_memory_bytes"):
        second.pool(2 * MIB)
    # A batch past what is left: refused too, and the query counted once.
    with pytest.raises(Unavailable, match="a scan batch of"):
        list(second.held_batches(iter(_batches(1, 200_000))))
    assert refused == ["second"]
    assert budget.held == 2 * MIB
    with pytest.raises(TooLarge, match="more than the whole budget"):
        second.pool(4 * MIB)
    first.release_all()
    assert budget.held == 0
    second.pool(2 * MIB)  # the memory given back is there for the next query


def test_a_query_holds_its_largest_pool_once_and_gives_all_back_when_it_ends() -> None:
    queries = Queries(limits=QueryLimits(server_memory_bytes=8 * MIB))
    with queries.running() as token:
        token.memory.pool(2 * MIB)
        token.memory.pool(2 * MIB)  # a second statement of the same query
        token.memory.pool(3 * MIB)
        scan = token.memory.held_batches(iter(_batches(2, 1000)))
        next(scan)  # a scan DataFusion has not finished when the query ends
        assert queries.memory.held == 3 * MIB + 8000
    assert queries.memory.held == 0
    scan.close()  # ending late, it has nothing left to give back
    assert queries.memory.held == 0
