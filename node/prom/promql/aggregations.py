"""Aggregation operators (sum, avg, count, topk, quantile, ...) with ``by`` / ``without``:
series are numbered by group, then every group and step is reduced at once."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from gnomon.errors import InvalidArgument
from node.prom.labels import LABEL_NAME, METRIC_NAME
from node.prom.promql.values import Floats, Labels, Vector, format_value

Groups = np.ndarray[Any, np.dtype[np.int64]]


def grouping(
    labels: Sequence[Labels], names: Sequence[str], *, without: bool
) -> tuple[list[Labels], Groups]:
    """Each group's labels and each series' group number."""
    keep = frozenset(names)
    keys: dict[tuple[tuple[str, str], ...], int] = {}
    out: list[Labels] = []
    index = np.zeros(len(labels), dtype=np.int64)
    for i, lb in enumerate(labels):
        if without:
            kept = {k: v for k, v in lb.items() if k not in keep and k != METRIC_NAME}
        else:
            kept = {k: v for k, v in lb.items() if k in keep}
        key = tuple(sorted(kept.items()))
        if key not in keys:
            keys[key] = len(out)
            out.append(kept)
        index[i] = keys[key]
    return out, index


def _sum(v: Vector, g: Groups, n: int) -> tuple[Floats, Floats]:
    total = np.zeros((n, v.values.shape[1]))
    count = np.zeros_like(total)
    np.add.at(total, g, np.where(v.present, v.values, 0.0))
    np.add.at(count, g, v.present.astype(np.float64))
    return total, count


def _extreme(v: Vector, g: Groups, n: int, *, largest: bool) -> Floats:
    # NaN loses to any number, as in Prometheus; a group of NaNs stays NaN.
    out = np.full((n, v.values.shape[1]), np.nan)
    pick = np.fmax if largest else np.fmin
    pick.at(out, g, np.where(v.present, v.values, np.nan))
    return out


def _variance(v: Vector, g: Groups, n: int) -> Floats:
    total, count = _sum(v, g, n)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = total / count
        square = np.zeros_like(total)
        np.add.at(square, g, np.where(v.present, (v.values - mean[g]) ** 2, 0.0))
        return square / count


def _count_values(v: Vector, names: Sequence[str], *, without: bool, label: str) -> Vector:
    """count_values: per group and step, how many series have each value, the value (as
    Prometheus prints it) in ``label``."""
    if not LABEL_NAME.fullmatch(label):
        raise InvalidArgument(f"invalid label name {label!r} in count_values()")
    by = [*names, label] if not without else [n for n in names if n != label]
    parts: list[Vector] = []
    for value in np.unique(v.values[v.present]):
        text = format_value(float(value))
        hit = v.present & (v.values == value if not np.isnan(value) else np.isnan(v.values))
        labelled = [{**lb, label: text} for lb in v.labels]
        ones = Vector(labelled, np.ones_like(v.values), hit).kept()
        parts.append(aggregate("count", ones, by, without=without, param=None))
    if not parts:
        return Vector.empty(v.values.shape[1])
    return Vector(
        [lb for p in parts for lb in p.labels],
        np.concatenate([p.values for p in parts]),
        np.concatenate([p.present for p in parts]),
    )


def aggregate(op: str, v: Vector, names: Sequence[str], *, without: bool, param: Any) -> Vector:
    if op == "count_values":
        return _count_values(v, names, without=without, label=str(param))
    groups, g = grouping(v.labels, names, without=without)
    n = len(groups)
    if op in ("topk", "bottomk"):
        return _top(v, g, n, int(param), largest=op == "topk")
    total, count = _sum(v, g, n)
    present = count > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        if op == "sum":
            values = total
        elif op == "count":
            values = count
        elif op == "avg":
            values = total / count
        elif op == "group":
            values = np.ones_like(total)
        elif op in ("min", "max"):
            values = _extreme(v, g, n, largest=op == "max")
        elif op == "stdvar":
            values = _variance(v, g, n)
        elif op == "stddev":
            values = np.sqrt(_variance(v, g, n))
        elif op == "quantile":
            values = _quantile(v, g, n, float(param))
        else:
            raise InvalidArgument(f"PromQL: aggregation {op!r} is not supported")
    return Vector(groups, values, present).kept()


def _quantile(v: Vector, g: Groups, n: int, q: float) -> Floats:
    out = np.full((n, v.values.shape[1]), np.nan)
    masked = np.where(v.present, v.values, np.nan)
    for group in range(n):
        rows = masked[g == group]
        # Steps where the group has no sample are all NaN and stay so.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            out[group] = np.nanquantile(rows, min(max(q, 0.0), 1.0), axis=0)
    if q < 0 or q > 1:
        out[:] = -np.inf if q < 0 else np.inf
    return out


def _top(v: Vector, g: Groups, n: int, k: int, *, largest: bool) -> Vector:
    """topk / bottomk: the series keep their labels and a value only at the steps where they
    rank among their group's ``k`` first."""
    keep = np.zeros_like(v.present)
    if k > 0:
        # NaN ranks last either way.
        key = np.where(v.present & ~np.isnan(v.values), -v.values if largest else v.values, np.inf)
        key = np.where(v.present & np.isnan(v.values), np.finfo(np.float64).max, key)
        for group in range(n):
            rows = np.flatnonzero(g == group)
            order = np.argsort(key[rows], axis=0, kind="stable")[:k]
            chosen = np.zeros((len(rows), v.values.shape[1]), dtype=bool)
            np.put_along_axis(chosen, order, True, axis=0)
            keep[rows] = chosen
    return Vector(v.labels, v.values, keep & v.present).kept()
