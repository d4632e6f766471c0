"""A remote-write body's series entries read off its wire bytes in compiled loops.

Prometheus sends about one sample per series entry, so reading a body through protobuf's
message objects, or any per-entry Python loop, costs more than storing the samples. Here a
compiled walk (numba; it releases the GIL, so requests decode on every core) returns, per
entry, where its labels' bytes are and a hash of them, and per sample its entry, time and
value bits (staleness markers kept bit for bit). The caller reads the labels of each
distinct hash once. Anything not laid out as Prometheus and its peers lay a body out
(fields other than labels and samples, labels after samples, a truncated length) makes the
walk give up, and the body is read through protobuf, which also judges whether it is
malformed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import njit  # type: ignore[import-untyped]

#: Field keys (number << 3 | wire type) of the messages walked.
_TIMESERIES = 0x0A  # WriteRequest.timeseries = 1, length-delimited
_METADATA = 0x1A  # WriteRequest.metadata = 3, read through protobuf
_LABEL = 0x0A  # TimeSeries.labels = 1
_SAMPLE = 0x12  # TimeSeries.samples = 2
_VALUE = 0x09  # Sample.value = 1, 64-bit
_TIMESTAMP = 0x10  # Sample.timestamp = 2, varint
_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)

U8 = np.ndarray[Any, np.dtype[np.uint8]]
I64 = np.ndarray[Any, np.dtype[np.int64]]
U64 = np.ndarray[Any, np.dtype[np.uint64]]


@dataclass(frozen=True)
class Walked:
    """A body's entries (labels at ``data[label_start[e]:label_end[e]]``, hashed as
    ``label_hash[e]``) and samples (of entry ``sample_entry[s]``)."""

    label_start: I64
    label_end: I64
    label_hash: U64
    sample_entry: I64
    timestamps: I64
    values: np.ndarray[Any, np.dtype[np.float64]]
    #: Whether the body has metadata entries too (read through protobuf).
    has_metadata: bool


@njit(cache=True, nogil=True)  # type: ignore[untyped-decorator]
def _varint(data: U8, i: int, end: int) -> tuple[np.uint64, int]:
    """The varint at ``data[i]`` before ``end`` and the index after it; -1 if it is cut or
    longer than ten bytes."""
    value = np.uint64(0)
    shift = np.uint64(0)
    while i < end and shift < 70:
        byte = data[i]
        i += 1
        value |= np.uint64(byte & 0x7F) << shift
        if byte < 0x80:
            return value, i
        shift += np.uint64(7)
    return np.uint64(0), -1


@njit(cache=True, nogil=True)  # type: ignore[untyped-decorator]
def _length(data: U8, i: int, end: int) -> tuple[int, int]:
    """A length-delimited field's ``(start, stop)`` from its length at ``data[i]``; stop is
    -1 when it does not fit before ``end``."""
    length, start = _varint(data, i, end)
    if start < 0 or length > np.uint64(end - start):
        return 0, -1
    return start, start + int(length)


@njit(cache=True, nogil=True)  # type: ignore[untyped-decorator]
def _walk(
    data: U8,
    fill: bool,
    label_start: I64,
    label_end: I64,
    label_hash: U64,
    sample_entry: I64,
    timestamps: U64,
    values: U64,
) -> tuple[bool, int, int, bool]:
    """``(laid out as expected, entries, samples, has metadata)``; with ``fill`` the arrays
    (sized by a first call without it) are written too."""
    n = data.size
    i = 0
    entries = 0
    samples = 0
    metadata = False
    while i < n:
        key = data[i]
        start, end = _length(data, i + 1, n)
        if end < 0 or key > 0x7F:
            return False, 0, 0, False
        i = end
        if key == _METADATA:
            metadata = True
            continue
        if key != _TIMESERIES:
            return False, 0, 0, False
        j = start
        while j < end and data[j] == _LABEL:
            j = _length(data, j + 1, end)[1]
            if j < 0:
                return False, 0, 0, False
        if fill:
            h = _FNV_OFFSET
            for p in range(start, j):
                h = (h ^ np.uint64(data[p])) * _FNV_PRIME
            label_start[entries] = start
            label_end[entries] = j
            label_hash[entries] = h
        while j < end:
            if data[j] != _SAMPLE:
                return False, 0, 0, False
            p, stop = _length(data, j + 1, end)
            if stop < 0:
                return False, 0, 0, False
            stamp = np.uint64(0)  # proto3 leaves zeros out
            bits = np.uint64(0)
            while p < stop:
                field = data[p]
                if field == _VALUE and p + 9 <= stop:
                    bits = np.uint64(0)
                    for b in range(8):
                        bits |= np.uint64(data[p + 1 + b]) << np.uint64(8 * b)
                    p += 9
                elif field == _TIMESTAMP:
                    stamp, p = _varint(data, p + 1, stop)
                    if p < 0:
                        return False, 0, 0, False
                else:
                    return False, 0, 0, False
            if fill:
                sample_entry[samples] = entries
                timestamps[samples] = stamp
                values[samples] = bits
            samples += 1
            j = stop
        entries += 1
    return True, entries, samples, metadata


@njit(cache=True, nogil=True)  # type: ignore[untyped-decorator]
def _same_bytes(data: U8, start: I64, end: I64, other: I64) -> bool:
    """Whether each entry's labels are the same bytes as those of entry ``other[e]``."""
    for e in range(start.size):
        o = other[e]
        if o == e:
            continue
        length = end[e] - start[e]
        if end[o] - start[o] != length:
            return False
        for p in range(length):
            if data[start[e] + p] != data[start[o] + p]:
                return False
    return True


def walk(data: bytes) -> Walked | None:
    """The entries and samples of a WriteRequest's bytes; None if it is not laid out as
    this walk reads it (or is malformed)."""
    view = np.frombuffer(data, dtype=np.uint8)
    empty_i = np.empty(0, np.int64)
    empty_u = np.empty(0, np.uint64)
    usual, entries, samples, metadata = _walk(
        view, False, empty_i, empty_i, empty_u, empty_i, empty_u, empty_u
    )
    if not usual:
        return None
    walked = Walked(
        label_start=np.empty(entries, np.int64),
        label_end=np.empty(entries, np.int64),
        label_hash=np.empty(entries, np.uint64),
        sample_entry=np.empty(samples, np.int64),
        timestamps=np.empty(samples, np.int64),
        values=np.empty(samples, np.float64),
        has_metadata=metadata,
    )
    _walk(
        view,
        True,
        walked.label_start,
        walked.label_end,
        walked.label_hash,
        walked.sample_entry,
        walked.timestamps.view(np.uint64),
        walked.values.view(np.uint64),
    )
    return walked


def same_labels(data: bytes, walked: Walked, other: I64) -> bool:
    """Whether every entry's labels are the bytes of entry ``other[e]``'s (equal hashes are
    not taken on trust)."""
    view = np.frombuffer(data, dtype=np.uint8)
    return bool(_same_bytes(view, walked.label_start, walked.label_end, other))
