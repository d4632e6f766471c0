"""Range functions that gather windows do so a block of series at a time: the answers do not
depend on the block size."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from node.prom.promql import range_functions
from node.prom.promql.selectors import Windows

pytestmark = pytest.mark.unit


def _windows() -> Windows:
    rng = np.random.default_rng(3)
    per_series = [40, 0, 25, 60, 7]
    timestamps = np.concatenate(
        [np.sort(rng.choice(600, n, replace=False)) * 1000 for n in per_series]
    )
    values = rng.normal(10, 3, len(timestamps))
    starts = np.concatenate([[0], np.cumsum(per_series)]).astype(np.int64)
    times = np.arange(60_000, 600_001, 30_000, dtype=np.int64)
    labels = [{"s": str(i)} for i in range(len(per_series))]
    return Windows.of(labels, timestamps.astype(np.int64), values, starts, times, 120_000)


@pytest.mark.parametrize(
    "name", ["sum_over_time", "stddev_over_time", "max_over_time", "deriv", "quantile"]
)
def test_blocks_give_the_same_answers(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    def run() -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
        w = _windows()
        if name == "quantile":
            v = range_functions.quantile_over_time(0.3, w)
            return v.values, v.present
        return range_functions.RANGE_FUNCTIONS[name](w)

    whole = run()
    monkeypatch.setattr(range_functions, "GATHER_CELLS", 1)
    blocks = run()
    for a, b in zip(whole, blocks, strict=True):
        # A block pads its windows to its own widest: sums may differ in the last bit.
        np.testing.assert_allclose(a, b, rtol=1e-12, equal_nan=True)
