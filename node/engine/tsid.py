"""The series id: a 64-bit hash of a row's tag values, computed column-wise.

Each tag column is dictionary-encoded, only its distinct values are hashed (a series count, not
a row count), and the per-column hashes are mixed into the row hash with numpy. A null tag leaves
the hash unchanged, so adding a nullable tag column later keeps the ids of existing series.

A row without any tag value hashes to :data:`UNTAGGED`, the hash of nothing; with
``untagged_zero`` (tables made from ``TSID_ZERO_UNTAGGED`` on) it has tsid 0 instead, as in
HoraeDB. Only such rows hash to ``UNTAGGED`` short of a collision, which they would share
with it anyway, so the swap adds no collision of its own.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_SEED = np.uint64(0x9E3779B97F4A7C15)
_MUL = np.uint64(0xBF58476D1CE4E5B9)
_MASK = (1 << 64) - 1
#: The tsid of a row without any tag value under the hash (the seed, avalanched).
UNTAGGED = int(_SEED) ^ (int(_SEED) >> 31)


def _value_bytes(v: object) -> bytes:
    if isinstance(v, bytes):
        return v
    if isinstance(v, str):
        return v.encode()
    return repr(v).encode()


#: Hashes of tag values seen recently, per column: series repeat from write to write, so most
#: values are looked up rather than hashed again. Bounded by clearing when full.
_CACHE: dict[tuple[str, object], int] = {}
_CACHE_MAX = 1 << 20


def _hash_value(column: str, v: object) -> int:
    key = (column, v)
    h = _CACHE.get(key)
    if h is None:
        digest = hashlib.blake2b(column.encode() + b"\x00" + _value_bytes(v), digest_size=8)
        h = int.from_bytes(digest.digest(), "little")
        if len(_CACHE) >= _CACHE_MAX:
            _CACHE.clear()
        _CACHE[key] = h
    return h


def _hash_values(column: str, values: pa.Array[Any]) -> np.ndarray[Any, np.dtype[np.uint64]]:
    return np.fromiter(
        (_hash_value(column, v) for v in values.to_pylist()), dtype=np.uint64, count=len(values)
    )


#: Batches of up to this many rows are hashed row by row in Python: the vectorised way costs a
#: fixed 20-odd microseconds in Arrow and numpy calls, most of a one-row write's conversion.
SMALL_ROWS = 16


def tsid_values(
    columns: Mapping[str, Sequence[Any]], tags: Sequence[str], n: int, *, untagged_zero: bool
) -> list[int]:
    """:func:`tsid_of` for rows held as Python values (a few rows: the same arithmetic on
    Python ints, without Arrow or numpy calls)."""
    untagged = 0 if untagged_zero else UNTAGGED
    mul = int(_MUL)
    hashes = [int(_SEED)] * n
    for name in tags:
        for row, v in enumerate(columns[name]):
            if v is not None:
                hashes[row] = ((hashes[row] ^ _hash_value(name, v)) * mul) & _MASK
    final = (h ^ (h >> 31) for h in hashes)
    return [untagged if h == UNTAGGED else h for h in final]


class KnownSeries(Protocol):
    """The series of a batch's rows, numbered by their writer, which holds each series' tag
    values: the rows' tsids are their series', each hashed once (:func:`tsid_of` over one row
    per series) rather than once per row."""

    def tsids(self, tags: Sequence[str], *, untagged_zero: bool) -> pa.Array[Any]:
        """The tsid of every row, as :func:`tsid_of` gives it for the rows' ``tags``."""


def compute_tsid(batch: pa.RecordBatch, tags: Sequence[str]) -> pa.Array[Any]:
    """The tsid of every row of ``batch`` from its ``tags`` columns (in schema order)."""
    return tsid_of({name: batch.column(name) for name in tags}, tags, batch.num_rows)


def tsid_of(
    columns: Mapping[str, pa.Array[Any]],
    tags: Sequence[str],
    n: int,
    *,
    untagged_zero: bool = False,
) -> pa.Array[Any]:
    """The tsid of each of ``n`` rows from the arrays of its ``tags`` in ``columns`` (a
    batch being built need not exist as one first); with ``untagged_zero``, 0 for a row
    without any tag value."""
    if n <= SMALL_ROWS:
        values = {name: columns[name].to_pylist() for name in tags}
        return pa.array(tsid_values(values, tags, n, untagged_zero=untagged_zero), pa.uint64())
    h = np.full(n, _SEED, dtype=np.uint64)
    for name in tags:
        encoded: Any = pc.dictionary_encode(columns[name])
        if len(encoded.dictionary) == 0:
            continue  # all null: the hash stays as it is
        uniq = _hash_values(name, encoded.dictionary)
        indices = encoded.indices
        if indices.null_count:
            valid = pc.is_valid(indices).to_numpy(zero_copy_only=False)
            idx = indices.fill_null(0).to_numpy(zero_copy_only=False)
            mixed = (h ^ uniq[idx]) * _MUL
            h = np.where(valid, mixed, h)
        else:
            h = (h ^ uniq[indices.to_numpy(zero_copy_only=False)]) * _MUL
    # A final avalanche so that series differing in one tag spread over the whole key space.
    h ^= h >> np.uint64(31)
    if untagged_zero:
        h[h == np.uint64(UNTAGGED)] = 0
    return pa.array(h, type=pa.uint64())
