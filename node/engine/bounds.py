"""Bounds: what a scan's filter says about single columns (a range, a set of values), in a
form the engine judges directly against file time ranges, row-group statistics and series
directories, without simplifying a filter expression per row group.

Whoever passes bounds promises that every row the scan must return satisfies them (they are a
necessary condition); the scan then also filters by them, so rows outside are never returned.
Comparisons follow pyarrow's filter semantics: a null never satisfies a bound, nor does NaN.
Timestamp bounds are integer milliseconds since the epoch.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from node.engine.schema import ColumnType

#: Dictionaries of string tags up to this many values in all are judged value by value in
#: Python; larger ones by kernels.
MAX_PYTHON_DICTIONARY = 256

INTEGER_TYPES = frozenset(
    {
        ColumnType.INT8, ColumnType.INT16, ColumnType.INT32, ColumnType.INT64,
        ColumnType.UINT8, ColumnType.UINT16, ColumnType.UINT32, ColumnType.UINT64,
    }
)  # fmt: skip
FLOAT_TYPES = frozenset({ColumnType.DOUBLE, ColumnType.FLOAT})
#: The column types whose values bounds compare: strings, numbers, and timestamps as integer
#: milliseconds.
BOUNDED_TYPES = INTEGER_TYPES | FLOAT_TYPES | {ColumnType.STRING, ColumnType.TIMESTAMP}


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
        tests: list[np.ndarray] = []
        if self.lo is not None:
            tests.append(maxs >= self.lo if self.lo_inclusive else maxs > self.lo)
        if self.hi is not None:
            tests.append(mins <= self.hi if self.hi_inclusive else mins < self.hi)
        if self.values is not None:
            admitted = sorted(v for v in self.values if self.admits(v))
            if not admitted:
                return np.zeros(len(mins), dtype=bool)
            ordered = np.array(admitted, dtype=object if mins.dtype == object else None)
            first = np.searchsorted(ordered, mins, side="left")
            past = np.searchsorted(ordered, maxs, side="right")
            tests.append(first < past)
        return conjunction(tests, len(mins))

    def meets(self, lo: Any, hi: Any) -> bool:
        """Whether some value in [lo, hi] may lie within the bounds: :meth:`overlaps` of one
        range, in Python."""
        if self.lo is not None and (hi < self.lo or (hi == self.lo and not self.lo_inclusive)):
            return False
        if self.hi is not None and (lo > self.hi or (lo == self.hi and not self.hi_inclusive)):
            return False
        return self.values is None or any(lo <= v <= hi and self.admits(v) for v in self.values)

    def covers(self, lo: Any, hi: Any) -> bool:
        """Whether every value in [lo, hi] lies within the bounds (then a filter by the
        bounds keeps all of them): both ends do, since a range is convex, and a value set
        admits a range only of one value."""
        if self.values is not None and lo != hi:
            return False
        return self.admits(lo) and self.admits(hi)

    def mask(self, array: pa.Array[Any] | pa.ChunkedArray[Any]) -> np.ndarray:
        """Per value of ``array``, whether it lies within the bounds: what :meth:`expression`
        would select, by the same kernels, without an expression engine. A dictionary array
        is judged on its dictionary (a few distinct tag values, not every row)."""
        if self.lo is None and self.hi is None and self.values is None:
            return np.ones(len(array), dtype=bool)  # no bound: nulls pass too
        chunks: list[Any] = array.chunks if isinstance(array, pa.ChunkedArray) else [array]
        if pa.types.is_dictionary(array.type):
            # Each chunk (row group) has a dictionary of its own: all of them are judged in
            # one call, then each chunk gathers its rows' answers by index.
            if not chunks:
                return np.zeros(0, dtype=bool)
            dictionaries = [c.dictionary for c in chunks]
            if (
                pa.types.is_string(array.type.value_type)
                and self._all_strings()
                and sum(len(d) for d in dictionaries) <= MAX_PYTHON_DICTIONARY
            ):
                # A few tag values (a row group's hosts) are judged faster one by one than
                # by a kernel call's set-up. Python orders strings by code point, as Arrow
                # orders their UTF-8 bytes.
                within = np.array(
                    [self.admits(v) for d in dictionaries for v in d.to_pylist()], dtype=bool
                )
            else:
                within = self.mask(pa.concat_arrays(dictionaries))
            masks: list[np.ndarray] = []
            start = 0
            for chunk in chunks:
                size = len(chunk.dictionary)
                masks.append(_gather(within[start : start + size], chunk.indices))
                start += size
            return masks[0] if len(masks) == 1 else np.concatenate(masks)
        typ = array.type
        values = self.numeric(chunks, typ)
        if values is not None:
            return self.overlaps(values, values)  # a value is the range [v, v]
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
        if selected.null_count:
            selected = selected.fill_null(False)
        return np.asarray(selected, dtype=np.bool_)

    def _all_strings(self) -> bool:
        given = [b for b in (self.lo, self.hi) if b is not None]
        return all(type(v) is str for v in (*given, *(self.values or ())))

    def numeric(self, chunks: Sequence[pa.Array[Any]], typ: pa.DataType) -> np.ndarray | None:
        """The values of ``chunks`` (of type ``typ``) as one numpy array, where numpy compares
        them with the range as pyarrow would (None elsewhere): a range alone over null-free
        integers, timestamps (as integers of their unit) or floats. A timestamp range over a
        few row groups costs several kernel calls per bound through pyarrow, about a tenth
        of that in numpy. (NaN compares false either way.)"""
        # One comparison over all chunks: each costs its set-up, copying them costs less.
        return numpy_values(chunks, typ) if self.compared_in_numpy(typ) else None

    def compared_in_numpy(self, typ: pa.DataType) -> bool:
        """Whether numpy compares values of ``typ`` with the range as pyarrow would (see
        :meth:`numeric`)."""
        return self.values is None and _compares_in_numpy(typ, self.lo, self.hi)

    def sorted_positions(self, values: np.ndarray) -> tuple[int, int]:
        """Where the values within the range lie in ``values``, sorted ascending without
        NaN (as :meth:`numeric` gives them): positions [start, stop), by binary search."""
        start = 0
        if self.lo is not None:
            start = int(values.searchsorted(self.lo, "left" if self.lo_inclusive else "right"))
        stop = len(values)
        if self.hi is not None:
            stop = int(values.searchsorted(self.hi, "right" if self.hi_inclusive else "left"))
        return start, max(start, stop)

    def _value_set(self, typ: pa.DataType) -> pa.Array[Any]:
        return _value_set(self.values or frozenset(), typ)

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
        return within.take(indices.to_numpy())
    out: np.ndarray = within.take(indices.fill_null(0).to_numpy())
    out &= indices.is_valid().to_numpy(zero_copy_only=False)
    return out


def _compares_in_numpy(typ: pa.DataType, *bounds: Any) -> bool:
    """Whether numpy compares ``typ`` with ``bounds`` as pyarrow would: integers (and
    timestamps, bounded in integers of their unit) with integers the type holds, floats
    with numbers. (Otherwise pyarrow judges, or refuses, as it always did.)"""
    compared = _NUMPY_COMPARED.get(typ.id)
    if compared is None:
        return False
    given = [b for b in bounds if b is not None]
    if not isinstance(compared, tuple):
        return all(type(b) in (int, float) for b in given)
    lo, hi = compared
    return all(type(b) is int and lo <= b <= hi for b in given)


def numpy_values(chunks: Sequence[pa.Array[Any]], typ: pa.DataType) -> np.ndarray | None:
    """Null-free ``chunks`` of integers, floats or timestamps (of type ``typ``) as one numpy
    array, timestamps as integers of their unit (as bounds compare them); None for chunks
    of any other type or holding a null, which numpy would not hold as Arrow does."""
    if typ.id not in _NUMPY_COMPARED or any(c.null_count for c in chunks):
        return None
    if not chunks:
        return np.zeros(0, dtype=np.int64)
    parts = [c.to_numpy() for c in chunks]
    values = parts[0] if len(parts) == 1 else np.concatenate(parts)
    return values.view(np.int64) if values.dtype.kind == "M" else values


def _integer_range(typ: pa.DataType) -> tuple[int, int]:
    bits = typ.bit_width
    return (
        (0, 2**bits - 1)
        if pa.types.is_unsigned_integer(typ)
        else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    )


#: By Arrow type id, the values numpy compares as pyarrow does: an integer type's range
#: (a timestamp's, int64's: it is bounded in integers of its unit), any number for floats.
#: Looked up by id: judging a type through ``pa.types`` costs a point query's read more than
#: its binary search.
_NUMPY_COMPARED: dict[int, tuple[int, int] | type[float]] = {
    **{
        t.id: _integer_range(t)
        for t in (
            *(pa.int8(), pa.int16(), pa.int32(), pa.int64()),
            *(pa.uint8(), pa.uint16(), pa.uint32(), pa.uint64()),
        )
    },
    pa.timestamp("ms").id: _integer_range(pa.int64()),
    **{t.id: float for t in (pa.float16(), pa.float32(), pa.float64())},
}


@functools.lru_cache(maxsize=1024)
def _value_set(values: frozenset[Any], typ: pa.DataType) -> pa.Array[Any]:
    # Every row group a scan reads judges the same values again.
    ordered = sorted(values)
    if pa.types.is_timestamp(typ):
        return pa.array(ordered, pa.int64()).cast(typ)
    return pa.array(ordered, typ)


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


def conjunction(masks: Sequence[np.ndarray], size: int) -> np.ndarray:
    """Where every one of ``masks`` holds (all ``size`` places for none), combined from the
    first mask rather than an all-true start: each numpy call costs its set-up."""
    if not masks:
        return np.ones(size, dtype=bool)
    keep = masks[0]
    for m in masks[1:]:
        keep = keep & m
    return keep


def all_of(parts: Iterable[pc.Expression]) -> pc.Expression | None:
    """The conjunction of ``parts`` (None for none)."""
    out: pc.Expression | None = None
    for p in parts:
        out = p if out is None else out & p
    return out
