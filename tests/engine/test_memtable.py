"""The memtable's cached views (node/engine/memtable.py): sorted, then split by window."""

from __future__ import annotations

import pyarrow as pa
import pytest

from node.engine.memtable import Memtable
from node.engine.options import UpdateMode
from node.engine.schema import DELETE, KIND, PUT
from node.engine.tsid import compute_tsid

from .conftest import CPU, cpu_batch, rows

pytestmark = pytest.mark.unit

HOUR = 3_600_000


def _batch(hosts: list[str], ts: list[int], usage: list[float]) -> pa.RecordBatch:
    batch = cpu_batch(hosts, ts, usage).to_batches()[0]
    tsid = compute_tsid(batch, CPU.tags)
    table = pa.table([tsid, *batch.columns], names=["tsid", *batch.schema.names])
    return table.cast(CPU.arrow()).to_batches()[0]


def _memtable() -> Memtable:
    m = Memtable(CPU, UpdateMode.OVERWRITE)
    ts = [0, 3 * HOUR, HOUR, 5 * HOUR, 2 * HOUR + 1, 4 * HOUR]
    m.append(_batch(["b", "a", "a", "b", "c", "c"], ts, [1.0] * 6), seq=1)
    return m


def test_windows_hold_each_row_once_in_key_order() -> None:
    m = _memtable()
    windows = m.windows(2 * HOUR)
    assert [(w.min_ts, w.max_ts) for w in windows] == [
        (0, HOUR),
        (2 * HOUR + 1, 3 * HOUR),
        (4 * HOUR, 5 * HOUR),
    ]
    for w in windows:
        keys = list(zip(*(w.rows.column(c).to_pylist() for c in CPU.primary_key), strict=True))
        assert keys == sorted(keys)
        assert not w.deletes
    together = pa.concat_tables(w.rows for w in windows)
    assert rows(together) == rows(m.sorted())


def test_windows_follow_new_batches_and_flag_deletions() -> None:
    m = _memtable()
    view = m.view()
    before = view.windows(2 * HOUR)
    assert m.windows(2 * HOUR) is before  # cached
    m.append(_batch(["a"], [3 * HOUR], [0.0]), seq=2, kind=DELETE)
    after = m.windows(2 * HOUR)
    assert [w.deletes for w in after] == [False, True, False]
    assert DELETE in after[1].rows.column(KIND).to_pylist()
    # The older view still sees what it saw.
    assert [w.rows.num_rows for w in view.windows(2 * HOUR)] == [w.rows.num_rows for w in before]
    assert all(k == PUT for w in view.windows(2 * HOUR) for k in w.rows.column(KIND).to_pylist())


def test_an_empty_memtable_has_no_windows() -> None:
    assert Memtable(CPU, UpdateMode.APPEND).windows(HOUR) == []
