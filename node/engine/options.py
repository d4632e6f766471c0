"""Table options (the ``WITH (...)`` clause of CREATE TABLE) and their string forms."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, fields, replace
from enum import StrEnum
from typing import Any

from gnomon.errors import InvalidArgument

_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|m|h|d|w)?\s*$", re.IGNORECASE)
_DURATION_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}
_SIZE = re.compile(r"^\s*(\d+)\s*(b|kb|k|mb|m|gb|g|kib|mib|gib)?\s*$", re.IGNORECASE)
_SIZE_BYTES = {
    "b": 1,
    "k": 1024, "kb": 1024, "kib": 1024,
    "m": 1024**2, "mb": 1024**2, "mib": 1024**2,
    "g": 1024**3, "gb": 1024**3, "gib": 1024**3,
}  # fmt: skip


def parse_duration_ms(text: str | int) -> int:
    """'2h' -> 7200000; a bare number is milliseconds."""
    if isinstance(text, int):
        return text
    m = _DURATION.match(text)
    if not m:
        raise InvalidArgument(
            f"invalid duration {text!r}: expected e.g. '500ms', '30s', '2h', '7d'"
        )
    return int(m.group(1)) * _DURATION_MS[(m.group(2) or "ms").lower()]


def parse_size(text: str | int) -> int:
    """'32mb' -> 33554432; a bare number is bytes."""
    if isinstance(text, int):
        return text
    m = _SIZE.match(text)
    if not m:
        raise InvalidArgument(f"invalid size {text!r}: expected e.g. '8192', '64kb', '32mb'")
    return int(m.group(1)) * _SIZE_BYTES[(m.group(2) or "b").lower()]


def format_duration(ms: int) -> str:
    for unit in ("w", "d", "h", "m", "s"):
        if ms and ms % _DURATION_MS[unit] == 0:
            return f"{ms // _DURATION_MS[unit]}{unit}"
    return f"{ms}ms"


def _parse_bool(text: str | bool) -> bool:
    if isinstance(text, bool):
        return text
    low = text.strip().lower()
    if low in ("true", "1", "yes", "on"):
        return True
    if low in ("false", "0", "no", "off"):
        return False
    raise InvalidArgument(f"invalid boolean {text!r}: expected 'true' or 'false'")


class UpdateMode(StrEnum):
    #: A write to an existing primary key replaces the row (newest sequence wins).
    OVERWRITE = "OVERWRITE"
    #: Every row is kept, duplicates of a key included.
    APPEND = "APPEND"


def _parse_optional_duration(value: str | int | bool) -> int | None:
    if isinstance(value, str) and value.strip().lower() in ("off", "none"):
        return None
    return parse_duration_ms(_str(value))


def _format_optional_duration(ms: int | None) -> str:
    return "off" if ms is None else format_duration(ms)


def _parse_mode(value: str | int | bool) -> UpdateMode:
    try:
        return UpdateMode(str(value).upper())
    except ValueError:
        raise InvalidArgument(f"invalid update_mode {value!r}: OVERWRITE or APPEND") from None


def _parse_int(value: str | int | bool) -> int:
    try:
        return int(_str(value))
    except ValueError:
        raise InvalidArgument(f"invalid integer {value!r}") from None


def _parse_compaction_mode(value: str | int | bool) -> str:
    mode = str(value).lower()
    if mode not in ("auto", "local", "offload"):
        raise InvalidArgument(f"invalid compaction_mode {value!r}: 'auto', 'local' or 'offload'")
    return mode


#: SQL option name -> (field, parser, formatter).
_OPTIONS: dict[str, tuple[str, Callable[[Any], Any], Callable[[Any], str]]] = {
    "segment_duration": ("segment_duration_ms", parse_duration_ms, format_duration),
    "update_mode": ("update_mode", _parse_mode, lambda v: str(v.value)),
    "write_buffer_size": ("write_buffer_size", parse_size, str),
    "ttl": ("ttl_ms", parse_duration_ms, format_duration),
    "enable_ttl": ("enable_ttl", _parse_bool, lambda v: str(v).lower()),
    "num_rows_per_row_group": ("num_rows_per_row_group", _parse_int, str),
    "compression": ("compression", lambda v: str(v).lower(), str),
    "enable_compaction": ("enable_compaction", _parse_bool, lambda v: str(v).lower()),
    "compaction_min_threshold": ("compaction_min_threshold", _parse_int, str),
    "compaction_max_threshold": ("compaction_max_threshold", _parse_int, str),
    "compaction_target_size": ("compaction_target_size", parse_size, str),
    "compaction_full_after": (
        "compaction_full_after_ms",
        _parse_optional_duration,
        _format_optional_duration,
    ),
    "compaction_mode": ("compaction_mode", _parse_compaction_mode, str),
    "time_travel": ("time_travel_ms", parse_duration_ms, format_duration),
    "max_versions": ("max_versions", _parse_int, str),
}


@dataclass(frozen=True)
class TableOptions:
    segment_duration_ms: int = 2 * 3_600_000
    update_mode: UpdateMode = UpdateMode.OVERWRITE
    #: The active memtable becomes immutable and is flushed at this many bytes.
    write_buffer_size: int = 32 * 1024**2
    #: Rows older than now - ttl are invisible when enable_ttl is true, and compaction drops
    #: them.
    ttl_ms: int = 7 * 86_400_000
    enable_ttl: bool = False
    num_rows_per_row_group: int = 65_536
    compression: str = "zstd"
    #: Background compaction after flushes (``Engine.compact`` works either way).
    enable_compaction: bool = True
    #: Files of similar size in one segment window are merged once there are this many...
    compaction_min_threshold: int = 4
    #: ...and at most this many at once; a window never keeps this many small files.
    compaction_max_threshold: int = 16
    #: Compaction output files are cut at this size; files this large are left alone.
    compaction_target_size: int = 256 * 1024**2
    #: A segment window none of whose files was written for this long is cold: its files
    #: below the target size merge into one even when fewer than the threshold (as InfluxDB
    #: fully compacts cold shards). One file per window helps queries on a few series (their
    #: rows sit together) and hurts time-range scans over all of them (the file spans the
    #: whole window, its row groups too), so it is off unless asked for.
    compaction_full_after_ms: int | None = None
    #: Where merges run: 'local', 'offload' (a compaction node meta picks, merging here when
    #: that fails) or 'auto' (as the node's compaction_mode setting says).
    compaction_mode: str = "auto"
    #: Manifest versions younger than this are kept, so time travel can reach them.
    time_travel_ms: int = 3_600_000
    #: Older versions are kept up to this many (the newest ones).
    max_versions: int = 100

    def __post_init__(self) -> None:
        if self.segment_duration_ms <= 0:
            raise InvalidArgument("segment_duration must be positive")
        if self.write_buffer_size < 1024:
            raise InvalidArgument("write_buffer_size must be at least 1kb")
        if self.ttl_ms <= 0:
            raise InvalidArgument("ttl must be positive")
        if self.num_rows_per_row_group < 1:
            raise InvalidArgument("num_rows_per_row_group must be positive")
        if self.compression not in ("zstd", "snappy", "lz4", "gzip", "none"):
            raise InvalidArgument(
                f"unknown compression {self.compression!r}: zstd, snappy, lz4, gzip or none"
            )
        if self.compaction_min_threshold < 2:
            raise InvalidArgument("compaction_min_threshold must be at least 2")
        if self.compaction_max_threshold < self.compaction_min_threshold:
            raise InvalidArgument(
                "compaction_max_threshold must be at least compaction_min_threshold"
            )
        if self.compaction_target_size < 1024:
            raise InvalidArgument("compaction_target_size must be at least 1kb")
        if self.compaction_full_after_ms is not None and self.compaction_full_after_ms < 0:
            raise InvalidArgument("compaction_full_after must not be negative")
        _parse_compaction_mode(self.compaction_mode)
        if self.time_travel_ms < 0:
            raise InvalidArgument("time_travel must not be negative")
        if self.max_versions < 1:
            raise InvalidArgument("max_versions must be at least 1")

    @classmethod
    def from_strings(cls, opts: Mapping[str, str | int | bool]) -> TableOptions:
        """Options as written in SQL: ``{'segment_duration': '2h', 'ttl': '7d', ...}``."""
        return cls().updated(opts)

    def updated(self, opts: Mapping[str, str | int | bool]) -> TableOptions:
        """A copy with the given SQL-style options changed (ALTER TABLE MODIFY SETTING)."""
        changes: dict[str, Any] = {}
        for key, value in opts.items():
            spec = _OPTIONS.get(key.lower())
            if spec is None:
                raise InvalidArgument(f"unknown table option {key!r}; known: {', '.join(_OPTIONS)}")
            name, parse, _ = spec
            changes[name] = parse(value)
        return replace(self, **changes)

    def to_strings(self) -> dict[str, str]:
        """The SQL-style form, as SHOW CREATE TABLE prints it."""
        return {key: fmt(getattr(self, name)) for key, (name, _, fmt) in _OPTIONS.items()}

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> TableOptions:
        known = {f.name for f in fields(cls)}
        kwargs = {k: v for k, v in d.items() if k in known}
        if "update_mode" in kwargs:
            kwargs["update_mode"] = UpdateMode(kwargs["update_mode"])
        return cls(**kwargs)


def _str(value: str | int | bool) -> str | int:
    return value if isinstance(value, int) and not isinstance(value, bool) else str(value)
