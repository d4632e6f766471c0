"""Results of one query from several systems, normalised and compared, so that no time counts
for an answer that differs.

Normal form: key columns (timestamps as integer milliseconds, named ``time``; tags by name)
and value columns (floats), rows sorted by key. Rows whose values are all null are dropped:
InfluxDB answers ``GROUP BY time`` with a row for every bucket, even empty ones. InfluxDB
names aggregate columns ``max``, ``max_1``, ... or ``last_<field>``; they are matched to the
SQL columns by name where the names agree and by position otherwise. InfluxQL's ``last(*)``
answers time 0 (a multi-field selector has no single time); then time is not compared.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

#: Relative and absolute tolerance of float values (sums and means differ in order of
#: summation between engines).
REL_TOL = 1e-6
ABS_TOL = 1e-9
#: Rows shown in a mismatch report.
SHOWN = 8


@dataclass(frozen=True)
class Normal:
    keys: list[str]
    values: list[str]
    rows: list[tuple[Any, ...]]  # key values then float values, sorted by key

    def key_of(self, row: tuple[Any, ...]) -> tuple[Any, ...]:
        return row[: len(self.keys)]


def _is_time(t: pa.DataType) -> bool:
    return bool(pa.types.is_timestamp(t) or pa.types.is_date(t))


def _is_string(t: pa.DataType) -> bool:
    if pa.types.is_dictionary(t):
        return _is_string(t.value_type)
    return bool(pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t))


def _millis(col: pa.ChunkedArray[Any]) -> list[Any]:
    if _is_time(col.type):
        return col.cast(pa.timestamp("ms")).cast(pa.int64()).to_pylist()
    return col.cast(pa.int64()).to_pylist()


def _rows(keys: list[list[Any]], values: list[list[Any]]) -> list[tuple[Any, ...]]:
    n = len(keys[0]) if keys else (len(values[0]) if values else 0)
    out = []
    for i in range(n):
        vals = tuple(None if v[i] is None else float(v[i]) for v in values)
        if vals and all(v is None for v in vals):
            continue
        out.append(tuple(k[i] for k in keys) + vals)
    out.sort(key=lambda r: tuple(r[: len(keys)]))
    return out


def normalise_sql(table: pa.Table) -> Normal:
    """A gnomon or DuckDB answer: timestamp and string columns are keys, floats values."""
    keys: list[str] = []
    key_data: list[list[Any]] = []
    values: list[str] = []
    value_data: list[list[Any]] = []
    for name, col in zip(table.column_names, table.columns, strict=True):
        if _is_time(col.type):
            keys.append("time")
            key_data.append(_millis(col))
        elif _is_string(col.type):
            keys.append(name)
            key_data.append(col.cast(pa.string()).to_pylist())
        else:
            values.append(name)
            value_data.append(col.cast(pa.float64()).to_pylist())
    return Normal(keys, values, _rows(key_data, value_data))


def normalise_influx(table: pa.Table, like: Normal) -> Normal:
    """An InfluxDB answer, its columns matched to those of the SQL answer ``like``."""
    if table.num_rows == 0:
        return Normal(like.keys, like.values, [])  # InfluxDB names no columns of no rows
    names = table.column_names
    keys = [k for k in like.keys if k == "time" or k in names]
    if "time" in keys and table.num_rows and all(t == 0 for t in table.column("time").to_pylist()):
        keys.remove("time")
    key_data = [
        _millis(table.column(k)) if k == "time" else table.column(k).to_pylist() for k in keys
    ]
    candidates = [n for n in names if n != "time" and not _is_string(table.column(n).type)]
    chosen: list[str] = []
    for i, v in enumerate(like.values):
        if v in names:
            chosen.append(v)
        elif f"last_{v}" in names:
            chosen.append(f"last_{v}")
        elif i < len(candidates):
            chosen.append(candidates[i])
        else:
            raise ValueError(f"influxdb answer has no column for {v!r} (columns: {names})")
    value_data = [table.column(c).to_pylist() for c in chosen]
    return Normal(keys, like.values, _rows(key_data, value_data))


def _project(n: Normal, keys: list[str]) -> Normal:
    """``n`` with only the key columns ``keys`` (a subset of its own)."""
    if keys == n.keys:
        return n
    idx = [n.keys.index(k) for k in keys]
    width = len(n.keys)
    rows = [tuple(r[i] for i in idx) + r[width:] for r in n.rows]
    rows.sort(key=lambda r: tuple(r[: len(keys)]))
    return Normal(keys, n.values, rows)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        if a is None or b is None:
            return a is b
        return math.isclose(a, b, rel_tol=REL_TOL, abs_tol=ABS_TOL)
    return bool(a == b)


def diff(reference: tuple[str, Normal], other: tuple[str, Normal]) -> str | None:
    """None when both answers agree; otherwise a report of how they differ."""
    (ref_name, ref), (name, got) = reference, other
    keys = [k for k in ref.keys if k in got.keys]
    ref, got = _project(ref, keys), _project(got, keys)
    problems: list[str] = []
    if len(ref.rows) != len(got.rows):
        problems.append(f"{ref_name} has {len(ref.rows)} rows, {name} has {len(got.rows)}")
    shown = 0
    for i, (a, b) in enumerate(zip(ref.rows, got.rows, strict=False)):
        if len(a) != len(b) or not all(_same(x, y) for x, y in zip(a, b, strict=True)):
            if shown < SHOWN:
                problems.append(f"row {i}: {ref_name} {a}\n{' ' * (len(str(i)) + 6)}{name} {b}")
            shown += 1
    if shown > SHOWN:
        problems.append(f"... {shown - SHOWN} more differing rows")
    if not problems:
        return None
    return f"columns {keys + ref.values}\n" + "\n".join(problems)
