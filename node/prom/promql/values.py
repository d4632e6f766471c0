"""The values PromQL expressions evaluate to, over all the evaluation steps at once.

A vector is a matrix, one row per series and one column per step, with a mask of the steps at
which each series has a sample; a scalar is one value per step. An instant query is a range
query of one step."""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import numpy as np

from node.prom.labels import METRIC_NAME

#: Arrays of values and of booleans, of any shape (numpy's results are typed loosely).
Floats = np.ndarray[Any, Any]
Mask = np.ndarray[Any, Any]
Labels = dict[str, str]


@dataclass
class Scalar:
    values: Floats


@dataclass
class String:
    value: str


@dataclass
class Vector:
    labels: list[Labels]
    values: Floats
    present: Mask

    @classmethod
    def empty(cls, steps: int) -> Vector:
        return cls([], np.zeros((0, steps)), np.zeros((0, steps), dtype=bool))

    def kept(self) -> Vector:
        """Without the series that have no sample at any step."""
        rows: Mask = np.logical_or.reduce(self.present, axis=1)
        if rows.all():
            return self
        return Vector(
            [lb for lb, k in zip(self.labels, rows, strict=True) if k],
            self.values[rows],
            self.present[rows],
        )

    def nameless(self) -> Vector:
        """The same series without their metric name (what functions and arithmetic give)."""
        return Vector([drop_name(lb) for lb in self.labels], self.values, self.present)


@dataclass
class RangeSamples:
    """A range vector selector's raw samples at one instant (an instant query's ``x[5m]``):
    per series, its (milliseconds, value) samples."""

    labels: list[Labels]
    samples: list[tuple[np.ndarray[Any, np.dtype[np.int64]], Floats]]


Value = Scalar | String | Vector | RangeSamples


def drop_name(labels: Labels) -> Labels:
    return {k: v for k, v in labels.items() if k != METRIC_NAME}


def signature(labels: Labels, names: frozenset[str], *, on: bool) -> tuple[tuple[str, str], ...]:
    """The labels that match series: only ``names`` if ``on``, else all but ``names`` and the
    metric name."""
    if on:
        return tuple(sorted((k, v) for k, v in labels.items() if k in names))
    return tuple(sorted((k, v) for k, v in labels.items() if k not in names and k != METRIC_NAME))


def format_value(v: float) -> str:
    """A sample value as Prometheus writes it (Go's FormatFloat(v, 'f', -1, 64))."""
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    text = repr(float(v))
    if "e" in text or "E" in text:
        text = format(Decimal(text), "f")
    return text[:-2] if text.endswith(".0") else text
