"""Vector and matrix selectors: which samples each evaluation step sees. Offsets and ``@``
move the evaluation times before the scan, so only the rows they reach are read."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import promql_parser as pp

from gnomon.errors import InvalidArgument
from node.prom.labels import METRIC_NAME
from node.prom.promql.values import Floats, Mask, Vector
from node.prom.series import Matcher, MatchOp, RunSql, Series, select

#: How far back an instant selector looks for a series' latest sample (Prometheus's default).
LOOKBACK_MS = 5 * 60 * 1000
#: Prometheus's staleness marker: a NaN with this bit pattern ends a series.
STALE_BITS = np.uint64(0x7FF0000000000002)
Ints = np.ndarray[Any, np.dtype[np.int64]]


@dataclass
class Context:
    """One evaluation: where rows are read and the steps' times (milliseconds)."""

    run: RunSql
    steps: Ints
    #: The query's start and end, which ``@ start()`` and ``@ end()`` name.
    start_ms: int
    end_ms: int


def matchers(vs: pp.VectorSelector) -> list[Matcher]:
    """The selector's matchers, its metric name among them."""
    if vs.matchers.or_matchers:
        raise InvalidArgument("PromQL: 'or' inside a selector's braces is not supported")
    out = [Matcher(m.name, _match_op(m.op), m.value) for m in vs.matchers.matchers]
    if vs.name:
        out.append(Matcher(METRIC_NAME, MatchOp.EQ, vs.name))
    return out


def _match_op(op: Any) -> MatchOp:
    name = str(op).rsplit(".", 1)[-1]
    return {"Equal": MatchOp.EQ, "NotEqual": MatchOp.NEQ, "Re": MatchOp.RE, "NotRe": MatchOp.NRE}[
        name
    ]


def eval_times(ctx: Context, vs: pp.VectorSelector) -> Ints:
    """The times the selector is evaluated at: the steps', or its ``@``, less its offset."""
    at = vs.at
    if at is None:
        times = ctx.steps
    else:
        kind = str(at.type).rsplit(".", 1)[-1]
        if kind == "Start":
            fixed = ctx.start_ms
        elif kind == "End":
            fixed = ctx.end_ms
        else:
            fixed = round(at.at.timestamp() * 1000) if at.at is not None else ctx.end_ms
        times = np.full_like(ctx.steps, fixed)
    if vs.offset is not None:
        times = times - round(vs.offset.total_seconds() * 1000)
    return times


def load(ctx: Context, vs: pp.VectorSelector, times: Ints, range_ms: int) -> Series:
    return select(ctx.run, matchers(vs), int(times.min()) - range_ms, int(times.max()))


def stale(values: Floats) -> Mask:
    found: Mask = values.view(np.uint64) == STALE_BITS
    return found


def instant(ctx: Context, vs: pp.VectorSelector, *, sample_times: bool = False) -> Vector:
    """Each series' latest sample at most LOOKBACK_MS before each step, unless that sample
    is a staleness marker; with ``sample_times``, that sample's time (seconds) instead of its
    value (what timestamp() gives)."""
    times = eval_times(ctx, vs)
    series = load(ctx, vs, times, LOOKBACK_MS)
    n, k = len(series.labels), len(times)
    values = np.zeros((n, k))
    present = np.zeros((n, k), dtype=bool)
    is_stale = stale(series.values)
    for i in range(n):
        lo, hi = series.offsets[i], series.offsets[i + 1]
        ts = series.timestamps[lo:hi]
        at = np.searchsorted(ts, times, side="right") - 1
        found = at >= 0
        at = lo + np.maximum(at, 0)
        found &= series.timestamps[at] >= times - LOOKBACK_MS
        found &= ~is_stale[at]
        values[i] = series.timestamps[at] / 1000 if sample_times else series.values[at]
        present[i] = found
    return Vector(series.labels, values, present).kept()


@dataclass
class Windows:
    """A matrix selector's samples (staleness markers left out) and, per series and step,
    the window of them it sees: ``lo[i, j]:hi[i, j]`` of the flat arrays."""

    labels: list[dict[str, str]]
    timestamps: Ints
    values: Floats
    #: Where each series starts in the flat arrays.
    starts: Ints
    lo: Ints
    hi: Ints
    #: The end of each step's window and the windows' length (milliseconds).
    times: Ints
    range_ms: int

    @property
    def counts(self) -> Ints:
        return self.hi - self.lo

    def rows(self, first: int, end: int) -> Windows:
        """The windows of series ``first`` up to ``end`` alone (over the same samples)."""
        return Windows(
            self.labels[first:end],
            self.timestamps,
            self.values,
            self.starts,
            self.lo[first:end],
            self.hi[first:end],
            self.times,
            self.range_ms,
        )

    @classmethod
    def of(
        cls,
        labels: list[dict[str, str]],
        timestamps: Ints,
        values: Floats,
        starts: Ints,
        times: Ints,
        range_ms: int,
    ) -> Windows:
        """The windows [t - range_ms, t] at each of ``times`` over samples grouped by series
        (series ``i`` holds ``starts[i]:starts[i + 1]``)."""
        n, k = len(labels), len(times)
        lo = np.zeros((n, k), dtype=np.int64)
        hi = np.zeros((n, k), dtype=np.int64)
        for i in range(n):
            ts = timestamps[starts[i] : starts[i + 1]]
            lo[i] = starts[i] + np.searchsorted(ts, times - range_ms, side="left")
            hi[i] = starts[i] + np.searchsorted(ts, times, side="right")
        return cls(labels, timestamps, values, starts, lo, hi, times, range_ms)


def windows(ctx: Context, ms: pp.MatrixSelector) -> Windows:
    """Each series' samples in [t - range, t] at each evaluation time t."""
    vs = ms.vector_selector
    range_ms = round(ms.range.total_seconds() * 1000)
    times = eval_times(ctx, vs)
    series = load(ctx, vs, times, range_ms)
    keep = ~stale(series.values)
    owner = np.repeat(np.arange(len(series.labels)), np.diff(series.offsets))[keep]
    timestamps, values = series.timestamps[keep], series.values[keep]
    starts = np.searchsorted(owner, np.arange(len(series.labels) + 1)).astype(np.int64)
    return Windows.of(series.labels, timestamps, values, starts, times, range_ms)


#: A subquery's resolution when it names none (Prometheus's default evaluation interval).
SUBQUERY_STEP_MS = 60_000


def subquery_steps(ctx: Context, sq: pp.SubqueryExpr) -> tuple[Ints, Ints, int]:
    """A subquery's outer evaluation times, its inner steps and its range: the inner steps
    are the multiples of its step from the earliest window's start, as Prometheus aligns
    them."""
    if sq.at is not None:
        raise InvalidArgument("PromQL: @ on a subquery is not supported")
    offset = round(sq.offset.total_seconds() * 1000) if sq.offset is not None else 0
    span = sq.range
    if span is None:
        raise InvalidArgument("PromQL: a subquery needs a range")
    range_ms = round(span.total_seconds() * 1000)
    given = sq.step
    step = round(given.total_seconds() * 1000) if given else SUBQUERY_STEP_MS
    times = ctx.steps - offset
    first = int(times.min()) - range_ms
    start = step * (first // step)
    if start < first:
        start += step
    return times, np.arange(start, int(times.max()) + 1, step, dtype=np.int64), range_ms


def vector_windows(v: Vector, steps: Ints, times: Ints, range_ms: int) -> Windows:
    """The windows of a vector evaluated at ``steps`` (a subquery's result)."""
    rows, cols = np.nonzero(v.present)
    starts = np.searchsorted(rows, np.arange(len(v.labels) + 1)).astype(np.int64)
    return Windows.of(v.labels, steps[cols], v.values[rows, cols], starts, times, range_ms)
