"""Functions of instant vectors and scalars: math, clamping, label_replace, absent,
histogram_quantile, scalar / vector and time."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np

from gnomon.errors import InvalidArgument
from node.prom.labels import LABEL_NAME
from node.prom.promql.values import Floats, Labels, Mask, Scalar, Vector, drop_name

#: Functions applying a numpy ufunc to every value (the metric name is dropped).
MATH: dict[str, Callable[[Floats], Floats]] = {
    "abs": np.abs,
    "ceil": np.ceil,
    "floor": np.floor,
    "exp": np.exp,
    "sqrt": np.sqrt,
    "ln": np.log,
    "log2": np.log2,
    "log10": np.log10,
    "sgn": np.sign,
    "sin": np.sin,
    "cos": np.cos,
    "tan": np.tan,
    "asin": np.arcsin,
    "acos": np.arccos,
    "atan": np.arctan,
    "sinh": np.sinh,
    "cosh": np.cosh,
    "tanh": np.tanh,
    "asinh": np.arcsinh,
    "acosh": np.arccosh,
    "atanh": np.arctanh,
    "deg": np.degrees,
    "rad": np.radians,
}


def math(name: str, v: Vector) -> Vector:
    with np.errstate(all="ignore"):
        return Vector([drop_name(lb) for lb in v.labels], MATH[name](v.values), v.present)


#: Functions of a vector of Unix times (default: the evaluation time), in UTC.
CALENDAR = frozenset(
    {
        "day_of_month",
        "day_of_week",
        "day_of_year",
        "days_in_month",
        "hour",
        "minute",
        "month",
        "year",
    }
)


def calendar(name: str, v: Vector) -> Vector:
    seconds = np.where(v.present & np.isfinite(v.values), v.values, 0.0)
    moment = seconds.astype("int64").astype("datetime64[s]")
    days = moment.astype("datetime64[D]")
    months = moment.astype("datetime64[M]")
    years = moment.astype("datetime64[Y]")
    if name == "minute":
        out = (moment.astype("datetime64[m]") - moment.astype("datetime64[h]")).astype(np.int64)
    elif name == "hour":
        out = (moment.astype("datetime64[h]") - days).astype(np.int64)
    elif name == "day_of_month":
        out = (days - months).astype(np.int64) + 1
    elif name == "day_of_week":
        out = (days.astype(np.int64) + 4) % 7  # 1970-01-01 was a Thursday
    elif name == "day_of_year":
        out = (days - years).astype(np.int64) + 1
    elif name == "days_in_month":
        out = ((months + 1).astype("datetime64[D]") - months.astype("datetime64[D]")).astype(
            np.int64
        )
    elif name == "month":
        out = (months - years).astype(np.int64) + 1
    else:
        out = years.astype(np.int64) + 1970
    return Vector([drop_name(lb) for lb in v.labels], out.astype(np.float64), v.present)


def sorted_by_value(v: Vector, *, descending: bool) -> Vector:
    """The series ordered by their value at the first step (an instant query's order)."""
    if not len(v.labels):
        return v
    key = np.where(v.present[:, 0], v.values[:, 0], np.nan)
    order = np.argsort(-key if descending else key, kind="stable")
    return Vector([v.labels[i] for i in order], v.values[order], v.present[order])


def label_join(v: Vector, dst: str, separator: str, sources: list[str]) -> Vector:
    if not LABEL_NAME.fullmatch(dst):
        raise InvalidArgument(f"invalid destination label name in label_join(): {dst!r}")
    labels: list[Labels] = []
    for lb in v.labels:
        value = separator.join(lb.get(src, "") for src in sources)
        out = dict(lb)
        if value:
            out[dst] = value
        else:
            out.pop(dst, None)
        labels.append(out)
    return Vector(labels, v.values, v.present)


def rounded(v: Vector, to_nearest: Floats) -> Vector:
    # Prometheus rounds halves up (math.Floor(v*inv + 0.5) / inv).
    with np.errstate(all="ignore"):
        inverse = 1.0 / to_nearest
        values = np.floor(v.values * inverse + 0.5) / inverse
    return Vector([drop_name(lb) for lb in v.labels], values, v.present)


def clamped(v: Vector, low: Floats, high: Floats) -> Vector:
    values = np.maximum(np.minimum(v.values, high), low)
    present = v.present & ~(low > high)
    return Vector([drop_name(lb) for lb in v.labels], values, present).kept()


def scalar_of(v: Vector) -> Scalar:
    """scalar(v): the value of the one series at each step, NaN where there is not one."""
    one = v.present.sum(axis=0) == 1
    values = np.where(v.present, v.values, 0.0).sum(axis=0)
    return Scalar(np.where(one, values, np.nan))


def vector_of(s: Scalar) -> Vector:
    return Vector([{}], s.values[None, :], np.ones((1, len(s.values)), dtype=bool))


def time_of(steps_ms: np.ndarray[Any, np.dtype[np.int64]]) -> Scalar:
    return Scalar(steps_ms.astype(np.float64) / 1000)


def absent(v: Vector, labels: Labels, steps: int) -> Vector:
    """1 at the steps where ``v`` has no series, labelled with the selector's equality
    matchers."""
    missing: Mask = (
        ~np.logical_or.reduce(v.present, axis=0) if len(v.labels) else np.ones(steps, dtype=bool)
    )
    return Vector([labels], np.ones((1, steps)), missing[None, :]).kept()


_GO_GROUP = re.compile(r"\$(\d+|\{(\w+)\})")


def _python_template(replacement: str) -> str:
    """A Go regexp replacement template (``$1``, ``${name}``) in Python's syntax."""
    escaped = replacement.replace("\\", "\\\\")
    return _GO_GROUP.sub(lambda m: f"\\g<{m.group(2) or m.group(1)}>", escaped)


def label_replace(v: Vector, dst: str, replacement: str, src: str, regex: str) -> Vector:
    try:
        pattern = re.compile(f"^(?:{regex})$")
    except re.error as e:
        raise InvalidArgument(f"invalid regular expression in label_replace(): {e}") from None
    if not LABEL_NAME.fullmatch(dst):
        raise InvalidArgument(f"invalid destination label name in label_replace(): {dst!r}")
    template = _python_template(replacement)
    labels: list[Labels] = []
    for lb in v.labels:
        match = pattern.match(lb.get(src, ""))
        out = dict(lb)
        if match is not None:
            value = match.expand(template)
            if value:
                out[dst] = value
            else:
                out.pop(dst, None)
        labels.append(out)
    return Vector(labels, v.values, v.present)


def histogram_quantile(q: Floats, v: Vector) -> Vector:
    """The q-quantile of classic histograms (series with an ``le`` label), as Prometheus's
    bucketQuantile interpolates it within the bucket the rank falls in."""
    groups: dict[tuple[tuple[str, str], ...], list[tuple[float, int]]] = {}
    out_labels: dict[tuple[tuple[str, str], ...], Labels] = {}
    for i, lb in enumerate(v.labels):
        try:
            bound = float(lb["le"].replace("+Inf", "inf"))
        except (KeyError, ValueError):
            continue
        rest = {k: val for k, val in drop_name(lb).items() if k != "le"}
        key = tuple(sorted(rest.items()))
        groups.setdefault(key, []).append((bound, i))
        out_labels[key] = rest
    steps = v.values.shape[1]
    labels: list[Labels] = []
    values: list[Floats] = []
    present: list[np.ndarray[Any, np.dtype[np.bool_]]] = []
    for key, buckets in groups.items():
        buckets.sort()
        bounds = np.array([b for b, _ in buckets])
        rows = [i for _, i in buckets]
        counts = np.where(v.present[rows], v.values[rows], np.nan)
        result, ok = _bucket_quantile(q, bounds, counts, v.present[rows])
        labels.append(out_labels[key])
        values.append(result)
        present.append(ok)
    if not labels:
        return Vector.empty(steps)
    return Vector(labels, np.array(values), np.array(present)).kept()


def _bucket_quantile(
    q: Floats, bounds: Floats, counts: Floats, present: np.ndarray[Any, np.dtype[np.bool_]]
) -> tuple[Floats, np.ndarray[Any, np.dtype[np.bool_]]]:
    """bucketQuantile per step over buckets sorted by upper bound. Buckets of equal bound are
    summed; counts are made monotonic. A step where a bucket is missing is computed from the
    buckets present there."""
    steps = counts.shape[1]
    result = np.full(steps, np.nan)
    ok: Mask = np.logical_or.reduce(present, axis=0)
    patterns: dict[bytes, list[int]] = {}
    for j in np.flatnonzero(ok):
        patterns.setdefault(present[:, j].tobytes(), []).append(int(j))
    for columns in patterns.values():
        rows = present[:, columns[0]]
        b = bounds[rows]
        c = counts[rows][:, columns]
        unique, start = np.unique(b, return_index=True)
        c = np.add.reduceat(c, start, axis=0) if len(c) else c
        c = np.maximum.accumulate(c, axis=0)
        result[columns] = _quantile_at(q[columns], unique, c)
    return result, ok


def _quantile_at(q: Floats, bounds: Floats, counts: Floats) -> Floats:
    steps = counts.shape[1]
    if len(bounds) < 2 or not np.isinf(bounds[-1]):
        return np.full(steps, np.nan)
    total = counts[-1]
    rank = q * total
    # The first bucket whose count reaches the rank.
    b = (counts < rank[None, :]).sum(axis=0)
    b = np.minimum(b, len(bounds) - 1)
    cols = np.arange(steps)
    start = np.where(b > 0, bounds[np.maximum(b - 1, 0)], 0.0)
    end = bounds[b]
    below = np.where(b > 0, counts[np.maximum(b - 1, 0), cols], 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        inner = start + (end - start) * ((rank - below) / (counts[b, cols] - below))
    out = np.where(b == len(bounds) - 1, bounds[-2], inner)
    out = np.where((b == 0) & (bounds[0] <= 0), bounds[0], out)
    out = np.where(total == 0, np.nan, out)
    out = np.where(q < 0, -np.inf, np.where(q > 1, np.inf, out))
    return np.where(np.isnan(q), np.nan, out)
