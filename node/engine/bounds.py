"""Bounds: what a scan's filter says about single columns (a range, a set of values), in a
form the engine judges directly against file time ranges, row-group statistics and series
directories, without simplifying a filter expression per row group.

Whoever passes bounds promises that every row the scan must return satisfies them (they are a
necessary condition); the scan then also filters by them, so rows outside are never returned.
Comparisons follow pyarrow's filter semantics: a null never satisfies a bound, nor does NaN.
Timestamp bounds are integer milliseconds since the epoch.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


@dataclass(frozen=True)
class Range:
    """One column's bounds: ``lo`` (<, or <= when ``lo_inclusive``) value (<, <=) ``hi``,
    and, when ``values`` is set, one of those values. None means unbounded."""

    lo: Any = None
    lo_inclusive: bool = True
    hi: Any = None
    hi_inclusive: bool = True
    values: frozenset[Any] | None = None

    @staticmethod
    def of(op: str, value: Any) -> Range:
        """The bound ``column <op> value`` for op in =, <, <=, >, >=."""
        match op:
            case "=":
                return Range(values=frozenset([value]))
            case "<":
                return Range(hi=value, hi_inclusive=False)
            case "<=":
                return Range(hi=value)
            case ">":
                return Range(lo=value, lo_inclusive=False)
            case ">=":
                return Range(lo=value)
        raise ValueError(f"no bound for operator {op!r}")

    def intersect(self, other: Range) -> Range:
        lo, lo_inc = _tighter(self.lo, self.lo_inclusive, other.lo, other.lo_inclusive, max)
        hi, hi_inc = _tighter(self.hi, self.hi_inclusive, other.hi, other.hi_inclusive, min)
        if self.values is None or other.values is None:
            values = self.values if other.values is None else other.values
        else:
            values = self.values & other.values
        return Range(lo, lo_inc, hi, hi_inc, values)

    def admits(self, value: Any) -> bool:
        """Whether ``value`` lies within the bounds (a null does not)."""
        if value is None:
            return False
        if self.values is not None and value not in self.values:
            return False
        if self.lo is not None and (
            value < self.lo or (value == self.lo and not self.lo_inclusive)
        ):
            return False
        return not (
            self.hi is not None
            and (value > self.hi or (value == self.hi and not self.hi_inclusive))
        )

    def overlaps(self, mins: np.ndarray, maxs: np.ndarray) -> np.ndarray:
        """For value ranges [mins[i], maxs[i]] (numpy arrays of one comparable kind), whether
        each may hold a value within the bounds."""
        keep = np.ones(len(mins), dtype=bool)
        if self.lo is not None:
            keep &= maxs >= self.lo if self.lo_inclusive else maxs > self.lo
        if self.hi is not None:
            keep &= mins <= self.hi if self.hi_inclusive else mins < self.hi
        if self.values is not None:
            admitted = sorted(v for v in self.values if self.admits(v))
            if not admitted:
                return np.zeros(len(mins), dtype=bool)
            ordered = np.array(admitted, dtype=object if mins.dtype == object else None)
            first = np.searchsorted(ordered, mins, side="left")
            past = np.searchsorted(ordered, maxs, side="right")
            keep &= first < past
        return keep

    def covers(self, mins: np.ndarray, maxs: np.ndarray) -> np.ndarray:
        """For value ranges [mins[i], maxs[i]], whether every value in each lies within the
        bounds (then a filter by the bounds keeps all of its non-null values)."""
        keep = np.ones(len(mins), dtype=bool)
        if self.lo is not None:
            keep &= mins >= self.lo if self.lo_inclusive else mins > self.lo
        if self.hi is not None:
            keep &= maxs <= self.hi if self.hi_inclusive else maxs < self.hi
        if self.values is not None:
            admitted = {v for v in self.values if self.admits(v)}
            keep &= (mins == maxs) & np.array([m in admitted for m in mins], dtype=bool)
        return keep

    def mask(self, array: pa.Array[Any] | pa.ChunkedArray[Any]) -> np.ndarray:
        """Per value of ``array``, whether it lies within the bounds: what :meth:`expression`
        would select, by the same kernels, without an expression engine. A dictionary array
        is judged on its dictionary (a few distinct tag values, not every row)."""
        if self.lo is None and self.hi is None and self.values is None:
            return np.ones(len(array), dtype=bool)  # no bound: nulls pass too
        if pa.types.is_dictionary(array.type):
            # Each chunk (row group) has a dictionary of its own: all of them are judged in
            # one call, then each chunk gathers its rows' answers by index.
            chunks: list[Any] = array.chunks if isinstance(array, pa.ChunkedArray) else [array]
            if not chunks:
                return np.zeros(0, dtype=bool)
            within = self.mask(pa.concat_arrays([c.dictionary for c in chunks]))
            masks: list[np.ndarray] = []
            start = 0
            for chunk in chunks:
                size = len(chunk.dictionary)
                masks.append(_gather(within[start : start + size], chunk.indices))
                start += size
            return np.concatenate(masks)
        typ = array.type
        parts: list[Any] = []
        if self.lo is not None:
            lo = _scalar(self.lo, typ)
            parts.append(
                pc.greater_equal(array, lo) if self.lo_inclusive else pc.greater(array, lo)
            )
        if self.hi is not None:
            hi = _scalar(self.hi, typ)
            parts.append(pc.less_equal(array, hi) if self.hi_inclusive else pc.less(array, hi))
        if self.values is not None:
            parts.append(pc.is_in(array, value_set=self._value_set(typ), skip_nulls=True))
        selected = parts[0]
        for p in parts[1:]:
            selected = pc.and_(selected, p)
        return np.asarray(selected.fill_null(False), dtype=np.bool_)

    def _value_set(self, typ: pa.DataType) -> pa.Array[Any]:
        values = sorted(self.values or ())
        if pa.types.is_timestamp(typ):
            return pa.array(values, pa.int64()).cast(typ)
        return pa.array(values, typ)

    def expression(self, name: str, typ: pa.DataType) -> pc.Expression:
        """The bounds as a filter on column ``name`` of type ``typ``."""
        field = pc.field(name)
        parts: list[pc.Expression] = []
        if self.lo is not None:
            lo = _scalar(self.lo, typ)
            parts.append(field >= lo if self.lo_inclusive else field > lo)
        if self.hi is not None:
            hi = _scalar(self.hi, typ)
            parts.append(field <= hi if self.hi_inclusive else field < hi)
        if self.values is not None:
            parts.append(field.isin(self._value_set(typ)))
        out = all_of(parts)
        return pc.scalar(True) if out is None else out


def _gather(within: np.ndarray, indices: pa.Array[Any]) -> np.ndarray:
    """Per index, the answer of the dictionary value it points at (a null index: False)."""
    if len(within) == 0:
        return np.zeros(len(indices), dtype=bool)
    if not indices.null_count:
        return within[indices.to_numpy()]  # type: ignore[no-any-return]
    out: np.ndarray = within[indices.fill_null(0).to_numpy()]
    out &= indices.is_valid().to_numpy(zero_copy_only=False)
    return out


def _tighter(a: Any, a_inc: bool, b: Any, b_inc: bool, pick: Any) -> tuple[Any, bool]:
    if a is None:
        return b, b_inc
    if b is None or a == b:
        return a, a_inc and (b_inc if b is not None else True)
    return (a, a_inc) if pick(a, b) == a else (b, b_inc)


def _scalar(value: Any, typ: pa.DataType) -> pa.Scalar[Any]:
    # Timestamps are bounded in integer milliseconds (or the column's unit).
    return pa.scalar(int(value) if pa.types.is_timestamp(typ) else value, typ)


Bounds = Mapping[str, Range]


def intersect_all(parts: Sequence[tuple[str, Range]]) -> dict[str, Range]:
    """Bounds per column from several ``(column, range)`` conditions that all hold."""
    out: dict[str, Range] = {}
    for name, r in parts:
        out[name] = out[name].intersect(r) if name in out else r
    return out


def time_window(r: Range) -> tuple[int | None, int | None]:
    """The [start, end) milliseconds a timestamp column's bounds allow."""
    lo: int | None = None if r.lo is None else int(r.lo) + (0 if r.lo_inclusive else 1)
    hi: int | None = None if r.hi is None else int(r.hi) + (1 if r.hi_inclusive else 0)
    if r.values is not None:
        values = [int(v) for v in r.values]
        if not values:
            return 0, 0
        lo = min(values) if lo is None else max(lo, min(values))
        hi = max(values) + 1 if hi is None else min(hi, max(values) + 1)
    return lo, hi


def bounds_expression(bounds: Bounds, schema: pa.Schema) -> pc.Expression | None:
    """All ``bounds`` as one filter over ``schema``."""
    return all_of(r.expression(name, schema.field(name).type) for name, r in sorted(bounds.items()))


def all_of(parts: Iterable[pc.Expression]) -> pc.Expression | None:
    """The conjunction of ``parts`` (None for none)."""
    out: pc.Expression | None = None
    for p in parts:
        out = p if out is None else out & p
    return out
