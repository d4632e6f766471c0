"""The series ids of a few rows, hashed row by row, are those the vectorised hashing gives."""

from __future__ import annotations

import pyarrow as pa
import pytest

from node.engine import tsid


@pytest.mark.parametrize("rows", [1, 3, tsid.SMALL_ROWS])
def test_small_batches_hash_as_large_ones(rows: int, monkeypatch: pytest.MonkeyPatch) -> None:
    batch = pa.record_batch(
        {
            "host": pa.array([None if i % 3 == 0 else f"h{i % 5}" for i in range(rows)]),
            "dc": pa.array([f"dc{i % 2}" for i in range(rows)]),
            "empty": pa.array([None] * rows, pa.string()),
        }
    )
    small = tsid.compute_tsid(batch, ["host", "dc", "empty"])
    monkeypatch.setattr(tsid, "SMALL_ROWS", 0)
    assert small.equals(tsid.compute_tsid(batch, ["host", "dc", "empty"]))
