"""Binary operators: arithmetic, comparisons (filtering or ``bool``) and set operators, between
scalars and vectors, with Prometheus's vector matching (``on`` / ``ignoring``,
``group_left`` / ``group_right``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from gnomon.errors import InvalidArgument
from node.prom.promql.values import Floats, Labels, Mask, Scalar, Vector, drop_name, signature


class ExecutionError(InvalidArgument):
    """A query that parses but cannot be answered over these series (Prometheus's execution
    errors, such as many-to-many matching): the same query fails again on the same data."""


def _pow(a: Floats, b: Floats) -> Floats:
    return np.power(a, b)


def _mod(a: Floats, b: Floats) -> Floats:
    return np.fmod(a, b)


def _atan2(a: Floats, b: Floats) -> Floats:
    return np.arctan2(a, b)


ARITHMETIC: dict[str, Callable[[Floats, Floats], Floats]] = {
    "+": np.add,
    "-": np.subtract,
    "*": np.multiply,
    "/": np.divide,
    "%": _mod,
    "^": _pow,
    "atan2": _atan2,
}
COMPARISON: dict[str, Callable[[Floats, Floats], Mask]] = {
    "==": np.equal,
    "!=": np.not_equal,
    ">": np.greater,
    "<": np.less,
    ">=": np.greater_equal,
    "<=": np.less_equal,
}
SET_OPERATORS = frozenset({"and", "or", "unless"})


@dataclass(frozen=True)
class Matching:
    """How a binary operator matches series."""

    on: bool = False
    labels: frozenset[str] = frozenset()
    #: "one", "left" (group_left: many on the left) or "right".
    card: str = "one"
    include: tuple[str, ...] = ()
    bool: bool = False


def _compute(op: str, a: Floats, b: Floats, *, bool_: bool) -> tuple[Floats, Mask]:
    """The values of ``a op b`` and where they are kept."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if op in ARITHMETIC:
            return ARITHMETIC[op](a, b), np.ones(np.broadcast(a, b).shape, dtype=bool)
        hit = COMPARISON[op](a, b)
    if bool_:
        return hit.astype(np.float64), np.ones(hit.shape, dtype=bool)
    return np.broadcast_to(a, hit.shape).copy(), hit


def scalars(op: str, a: Scalar, b: Scalar, *, bool_: bool) -> Scalar:
    if op in COMPARISON and not bool_:
        raise InvalidArgument("PromQL: comparisons between scalars must use BOOL")
    values, _ = _compute(op, a.values, b.values, bool_=True)
    return Scalar(values)


def vector_scalar(op: str, v: Vector, s: Scalar, *, swap: bool, bool_: bool) -> Vector:
    """``v op s`` (or ``s op v`` if ``swap``); a comparison keeps the vector's value."""
    a, b = (s.values[None, :], v.values) if swap else (v.values, s.values[None, :])
    values, keep = _compute(op, a, b, bool_=bool_)
    if op in COMPARISON and not bool_:
        values = v.values
    labels = v.labels if op in COMPARISON and not bool_ else [drop_name(lb) for lb in v.labels]
    return Vector(labels, values, v.present & keep).kept()


def _index(labels: Sequence[Labels], m: Matching) -> dict[tuple[tuple[str, str], ...], list[int]]:
    out: dict[tuple[tuple[str, str], ...], list[int]] = {}
    for i, lb in enumerate(labels):
        out.setdefault(signature(lb, m.labels, on=m.on), []).append(i)
    return out


def _merged(v: Vector, rows: list[int], side: str) -> tuple[Floats, Mask]:
    """The one value per step of the series ``rows`` share a match group with; an error if
    two of them have a sample at the same step."""
    present = v.present[rows]
    if (present.sum(axis=0) > 1).any():
        raise ExecutionError(
            f"found duplicate series for the match group on the {side} hand-side of the "
            "operation: many-to-many matching not allowed: matching labels must be unique on "
            "one side"
        )
    values: Floats = np.where(present, v.values[rows], 0.0).sum(axis=0)
    found: Mask = np.logical_or.reduce(present, axis=0)
    return values, found


def _result_labels(lb: Labels, op: str, m: Matching, other: Labels | None) -> Labels:
    out = dict(lb) if op in COMPARISON and not m.bool else drop_name(lb)
    if m.card == "one":
        if m.on:
            out = {k: v for k, v in out.items() if k in m.labels}
        else:
            out = {k: v for k, v in out.items() if k not in m.labels}
    elif other is not None:
        for name in m.include:
            if other.get(name):
                out[name] = other[name]
            else:
                out.pop(name, None)
    return out


def vectors(op: str, lhs: Vector, rhs: Vector, m: Matching) -> Vector:
    if op in SET_OPERATORS:
        return _set_operation(op, lhs, rhs, m)
    # With group_right the right side is the "many" side: evaluate it as the left one.
    many, one = (rhs, lhs) if m.card == "right" else (lhs, rhs)
    one_index = _index(one.labels, m)
    if m.card == "one":
        many_index = _index(many.labels, m)
        for key, rows in many_index.items():
            if key in one_index:
                _merged(many, rows, "left")
    labels: list[Labels] = []
    values: list[Floats] = []
    present: list[Mask] = []
    for i, lb in enumerate(many.labels):
        matched = one_index.get(signature(lb, m.labels, on=m.on))
        if matched is None:
            continue
        rows = matched
        other, other_present = _merged(one, rows, "right" if m.card != "right" else "left")
        a, b = (other, many.values[i]) if m.card == "right" else (many.values[i], other)
        value, keep = _compute(op, a, b, bool_=m.bool)
        if op in COMPARISON and not m.bool:
            value = many.values[i] if m.card != "right" else other
        labels.append(_result_labels(lb, op, m, one.labels[rows[0]]))
        values.append(value)
        present.append(many.present[i] & other_present & keep)
    if not labels:
        return Vector.empty(lhs.values.shape[1])
    return Vector(labels, np.array(values), np.array(present)).kept()


def _set_operation(op: str, lhs: Vector, rhs: Vector, m: Matching) -> Vector:
    steps = lhs.values.shape[1]
    rhs_index = _index(rhs.labels, m)

    def covered(
        labels: Sequence[Labels], index: dict[tuple[tuple[str, str], ...], list[int]], v: Vector
    ) -> Mask:
        out = np.zeros((len(labels), steps), dtype=bool)
        for i, lb in enumerate(labels):
            rows = index.get(signature(lb, m.labels, on=m.on))
            if rows:
                out[i] = v.present[rows].any(axis=0)
        return out

    if op == "and":
        return Vector(
            lhs.labels, lhs.values, lhs.present & covered(lhs.labels, rhs_index, rhs)
        ).kept()
    if op == "unless":
        return Vector(
            lhs.labels, lhs.values, lhs.present & ~covered(lhs.labels, rhs_index, rhs)
        ).kept()
    lhs_index = _index(lhs.labels, m)
    rhs_kept = rhs.present & ~covered(rhs.labels, lhs_index, lhs)
    return Vector(
        lhs.labels + rhs.labels,
        np.concatenate([lhs.values, rhs.values]),
        np.concatenate([lhs.present, rhs_kept]),
    ).kept()
