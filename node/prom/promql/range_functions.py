"""Functions over range vectors (``rate(x[5m])``, ``*_over_time``), on all series and steps
at once: each window is a slice of the selector's flat sample arrays."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from node.prom.promql.selectors import Windows
from node.prom.promql.values import Floats, Mask, Vector, drop_name

Ints = np.ndarray[Any, np.dtype[np.int64]]


#: Most cells (series x steps x samples of the widest window) one gathered block holds
#: (64 MB of floats): wider queries are gathered a block of series at a time.
GATHER_CELLS = 8_000_000


def _blockwise(fn: Callable[[Windows], tuple[Floats, ...]], w: Windows) -> tuple[Floats, ...]:
    """``fn`` over blocks of ``w``'s series small enough to gather, its results joined."""
    width = max(int(w.counts.max(initial=0)), 1)
    per = max(1, GATHER_CELLS // max(1, w.lo.shape[1] * width))
    parts = [fn(w.rows(first, first + per)) for first in range(0, max(len(w.labels), 1), per)]
    return tuple(np.concatenate(column, axis=0) for column in zip(*parts, strict=True))


def _gathered(w: Windows, fill: float) -> tuple[Floats, Mask]:
    """Every window's values along a third axis (as wide as the widest window), ``fill``
    past each window's end."""
    width = max(int(w.counts.max(initial=0)), 1)
    index = w.lo[..., None] + np.arange(width)
    inside = index < w.hi[..., None]
    values = np.where(inside, w.values[np.minimum(index, max(len(w.values) - 1, 0))], fill)
    return values, inside


def _times_gathered(w: Windows) -> Floats:
    width = max(int(w.counts.max(initial=0)), 1)
    index = np.minimum(w.lo[..., None] + np.arange(width), max(len(w.timestamps) - 1, 0))
    seconds: Floats = w.timestamps[index].astype(np.float64) / 1000
    return seconds


def _reset_sums(w: Windows) -> Floats:
    """Per sample, what counter resets in its series up to it add back (a reset is a drop;
    the value before it is added)."""
    v = w.values
    drop = np.zeros(len(v))
    if len(v) > 1:
        drop[1:] = np.where(v[1:] < v[:-1], v[:-1], 0.0)
    drop[w.starts[:-1][w.starts[:-1] < len(v)]] = 0.0
    return np.cumsum(drop)


def _extrapolated(w: Windows, *, counter: bool, rate: bool) -> tuple[Floats, Mask]:
    """Prometheus's extrapolatedRate: the change over each window, extrapolated to the
    window's edges unless the samples stop short of them by more than 1.1 intervals."""
    n = w.counts
    ok = n >= 2
    first = np.where(ok, w.lo, 0)
    last = np.where(ok, w.hi - 1, 0)
    v = w.values if len(w.values) else np.zeros(1)
    ts = (w.timestamps if len(w.timestamps) else np.zeros(1, np.int64)).astype(np.float64) / 1000
    result = v[last] - v[first]
    if counter:
        resets = _reset_sums(w) if len(w.values) else np.zeros(1)
        result = result + resets[last] - resets[first]
    end = w.times.astype(np.float64) / 1000
    start = end - w.range_ms / 1000
    to_start = ts[first] - start
    to_end = end - ts[last]
    sampled = ts[last] - ts[first]
    with np.errstate(divide="ignore", invalid="ignore"):
        average = sampled / np.maximum(n - 1, 1)
        if counter:
            to_zero = sampled * (v[first] / result)
            clamp = (result > 0) & (v[first] >= 0) & (to_zero < to_start)
            to_start = np.where(clamp, to_zero, to_start)
        threshold = average * 1.1
        interval = (
            sampled
            + np.where(to_start < threshold, to_start, average / 2)
            + np.where(to_end < threshold, to_end, average / 2)
        )
        result = result * (interval / sampled)
    if rate:
        result = result / (w.range_ms / 1000)
    return result, ok


def _instant_change(w: Windows, *, rate: bool) -> tuple[Floats, Mask]:
    """irate / idelta: from the last two samples of each window."""
    ok = w.counts >= 2
    last = np.where(ok, w.hi - 1, 1)
    prev = last - 1
    v = w.values if len(w.values) > 1 else np.zeros(2)
    ts = w.timestamps if len(w.timestamps) > 1 else np.zeros(2, np.int64)
    change = v[last] - v[prev]
    if not rate:
        return change, ok
    change = np.where(v[last] < v[prev], v[last], change)
    dt = (ts[last] - ts[prev]).astype(np.float64) / 1000
    with np.errstate(divide="ignore", invalid="ignore"):
        return change / dt, ok & (dt != 0)


_RangeFunction = Callable[[Windows], tuple[Floats, Mask]]


def _over_time(reduce: Callable[[Floats, Mask, Ints], Floats], fill: float = 0.0) -> _RangeFunction:
    def block(w: Windows) -> tuple[Floats, ...]:
        values, inside = _gathered(w, fill)
        with np.errstate(divide="ignore", invalid="ignore"):
            return reduce(values, inside, w.counts), w.counts > 0

    def apply(w: Windows) -> tuple[Floats, Mask]:
        values, present = _blockwise(block, w)
        return values, present

    return apply


def _variance(values: Floats, inside: Mask, counts: Ints) -> Floats:
    mean = values.sum(axis=-1) / counts
    spread: Floats = np.where(inside, (values - mean[..., None]) ** 2, 0.0).sum(axis=-1)
    return spread / counts


def _last(w: Windows) -> tuple[Floats, Mask]:
    ok = w.counts > 0
    v = w.values if len(w.values) else np.zeros(1)
    return v[np.where(ok, w.hi - 1, 0)], ok


def _counted(changed: Callable[[Floats], Mask]) -> _RangeFunction:
    """changes / resets: how many neighbouring samples of each window satisfy ``changed``."""

    def apply(w: Windows) -> tuple[Floats, Mask]:
        v = w.values
        flags = np.zeros(len(v))
        if len(v) > 1:
            flags[1:] = changed(v)
        flags[w.starts[:-1][w.starts[:-1] < len(v)]] = 0.0
        total = np.concatenate([[0.0], np.cumsum(flags)])
        ok = w.counts > 0
        # Pairs inside the window: those ending at lo + 1 .. hi - 1.
        return np.where(ok, total[w.hi] - total[np.minimum(w.lo + 1, w.hi)], 0.0), ok

    return apply


def _regression(w: Windows) -> tuple[Floats, Floats, Mask]:
    """Least-squares slope and intercept of each window against time (seconds from the
    window's end), as deriv and predict_linear fit them."""
    slope, intercept, ok = _blockwise(_regression_block, w)
    return slope, intercept, ok


def _regression_block(w: Windows) -> tuple[Floats, ...]:
    values, inside = _gathered(w, 0.0)
    x = np.where(
        inside, _times_gathered(w) - (w.times.astype(np.float64) / 1000)[None, :, None], 0.0
    )
    n = w.counts.astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        sx, sy = x.sum(axis=-1), values.sum(axis=-1)
        sxy, sxx = (x * values).sum(axis=-1), (x * x).sum(axis=-1)
        slope = (n * sxy - sx * sy) / (n * sxx - sx * sx)
        intercept = sy / n - slope * sx / n
    return slope, intercept, w.counts >= 2


def _slope(w: Windows) -> tuple[Floats, Mask]:
    slope, _, ok = _regression(w)
    return slope, ok


#: Functions of one range vector: name -> (values, present) per series and step.
RANGE_FUNCTIONS: dict[str, _RangeFunction] = {
    "rate": lambda w: _extrapolated(w, counter=True, rate=True),
    "increase": lambda w: _extrapolated(w, counter=True, rate=False),
    "delta": lambda w: _extrapolated(w, counter=False, rate=False),
    "irate": lambda w: _instant_change(w, rate=True),
    "idelta": lambda w: _instant_change(w, rate=False),
    "sum_over_time": _over_time(lambda v, i, n: v.sum(axis=-1)),
    "count_over_time": _over_time(lambda v, i, n: n.astype(np.float64)),
    "avg_over_time": _over_time(lambda v, i, n: v.sum(axis=-1) / n),
    "min_over_time": _over_time(lambda v, i, n: v.min(axis=-1), np.inf),
    "max_over_time": _over_time(lambda v, i, n: v.max(axis=-1), -np.inf),
    "stdvar_over_time": _over_time(_variance),
    "stddev_over_time": _over_time(lambda v, i, n: np.sqrt(_variance(v, i, n))),
    "present_over_time": _over_time(lambda v, i, n: np.ones(n.shape)),
    "last_over_time": _last,
    "changes": _counted(lambda v: v[1:] != v[:-1]),
    "resets": _counted(lambda v: v[1:] < v[:-1]),
    "deriv": _slope,
}


def apply(name: str, w: Windows) -> Vector:
    values, present = RANGE_FUNCTIONS[name](w)
    labels = w.labels if name == "last_over_time" else [drop_name(lb) for lb in w.labels]
    return Vector(labels, values, present).kept()


def quantile_over_time(q: float, w: Windows) -> Vector:
    def block(w: Windows) -> tuple[Floats, ...]:
        values, _ = _gathered(w, np.nan)
        if not values.size:
            return (values[..., 0],)
        # Empty windows are all NaN: their steps have no sample, so the warning says nothing.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return (np.nanquantile(values, min(max(q, 0.0), 1.0), axis=-1),)

    (result,) = _blockwise(block, w)
    if q < 0 or q > 1:
        result = np.full(w.counts.shape, -np.inf if q < 0 else np.inf)
    return Vector([drop_name(lb) for lb in w.labels], result, w.counts > 0).kept()


def predict_linear(w: Windows, seconds: Floats) -> Vector:
    slope, intercept, ok = _regression(w)
    return Vector([drop_name(lb) for lb in w.labels], intercept + slope * seconds, ok).kept()
