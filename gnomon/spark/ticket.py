"""The JSON forms exchanged with a node's Arrow Flight endpoint, shared by the server
(``node/server/flight.py``) and its clients (the Spark data source): scan requests (in
``get_flight_info`` descriptors and ``do_get`` tickets), filters, and ``do_put`` descriptors.

A filter is ``[column, op, value]``; a list of them is their AND. ``op`` is one of
``=, !=, <, <=, >, >=`` (value: a JSON scalar), ``in`` (value: a list), ``is_null`` and
``is_not_null`` (no value). Timestamps are integer milliseconds since the epoch, dates
``YYYY-MM-DD`` strings. This module needs only the standard library.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from gnomon.errors import InvalidArgument

COMPARISONS = ("=", "!=", "<", "<=", ">", ">=")
OPS = (*COMPARISONS, "in", "is_null", "is_not_null")

Filter = tuple[str, str, Any]


def check_filter(f: Any) -> Filter:
    if not isinstance(f, list | tuple) or len(f) not in (2, 3) or not isinstance(f[0], str):
        raise InvalidArgument(f"invalid filter {f!r}: expected [column, op, value]")
    column, op = f[0], f[1]
    value = f[2] if len(f) == 3 else None
    if op not in OPS:
        raise InvalidArgument(f"invalid filter op {op!r} on {column!r}; expected one of {OPS}")
    if op == "in":
        if not isinstance(value, list | tuple):
            raise InvalidArgument(f"filter {column!r} in: value must be a list, got {value!r}")
        value = list(value)
    if op in COMPARISONS and value is None:
        raise InvalidArgument(f"filter {column!r} {op}: value must not be null")
    return (column, op, value)


@dataclass(frozen=True)
class ScanSpec:
    """What to read: a table, its columns (None: all), filters, a [lo, hi) ms time range and
    a manifest version (or the version current at ``timestamp_ms``; neither: the live table).
    ``scan_id`` names the scan for ``scan_stats``."""

    table: str
    columns: list[str] | None = None
    filters: list[Filter] = field(default_factory=list)
    time_range: tuple[int | None, int | None] = (None, None)
    version: int | None = None
    timestamp_ms: int | None = None
    scan_id: str | None = None
    #: get_flight_info only: at most this many time splits, of about this many rows at least.
    max_splits: int = 64
    min_split_rows: int = 1_000_000

    def to_json(self) -> bytes:
        return json.dumps(asdict(self), separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> ScanSpec:
        d = _object(raw, "scan request")
        table = d.get("table")
        if not isinstance(table, str) or not table:
            raise InvalidArgument("scan request: 'table' is required")
        columns = d.get("columns")
        if columns is not None and (
            not isinstance(columns, list) or not all(isinstance(c, str) for c in columns)
        ):
            raise InvalidArgument(f"scan request: 'columns' must be a list of names: {columns!r}")
        lo, hi = d.get("time_range") or (None, None)
        return cls(
            table=table,
            columns=columns,
            filters=[check_filter(f) for f in d.get("filters") or []],
            time_range=(_opt_int(lo, "time_range"), _opt_int(hi, "time_range")),
            version=_opt_int(d.get("version"), "version"),
            timestamp_ms=_opt_int(d.get("timestamp_ms"), "timestamp_ms"),
            scan_id=d.get("scan_id"),
            max_splits=_opt_int(d.get("max_splits"), "max_splits") or 64,
            min_split_rows=_opt_int(d.get("min_split_rows"), "min_split_rows") or 1_000_000,
        )


@dataclass(frozen=True)
class PutSpec:
    """A ``do_put``: rows for ``table``, written visibly, or staged under ``revision``."""

    table: str
    revision: int | None = None

    def to_json(self) -> bytes:
        return json.dumps(asdict(self)).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> PutSpec:
        d = _object(raw, "put descriptor")
        table = d.get("table")
        if not isinstance(table, str) or not table:
            raise InvalidArgument("put descriptor: 'table' is required")
        return cls(table=table, revision=_opt_int(d.get("revision"), "revision"))


def _object(raw: bytes, what: str) -> dict[str, Any]:
    try:
        d = json.loads(raw or b"{}")
    except ValueError as e:
        raise InvalidArgument(f"{what} is not JSON: {e}") from None
    if not isinstance(d, dict):
        raise InvalidArgument(f"{what} must be a JSON object")
    return d


def _opt_int(v: Any, what: str) -> int | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise InvalidArgument(f"{what} must be an integer, got {v!r}")
    return v
