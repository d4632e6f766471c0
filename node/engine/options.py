"""Table options (the ``WITH (...)`` clause of CREATE TABLE) and their string forms."""

from __future__ import annotations

import re
from collections.abc import Mapping
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


@dataclass(frozen=True)
class TableOptions:
    segment_duration_ms: int = 2 * 3_600_000
    update_mode: UpdateMode = UpdateMode.OVERWRITE
    #: The active memtable becomes immutable and is flushed at this many bytes.
    write_buffer_size: int = 32 * 1024**2
    #: Rows older than now - ttl are invisible when enable_ttl is true.
    ttl_ms: int = 7 * 86_400_000
    enable_ttl: bool = False
    num_rows_per_row_group: int = 65_536
    compression: str = "zstd"

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

    @classmethod
    def from_strings(cls, opts: Mapping[str, str | int | bool]) -> TableOptions:
        """Options as written in SQL: ``{'segment_duration': '2h', 'ttl': '7d', ...}``."""
        return cls().updated(opts)

    def updated(self, opts: Mapping[str, str | int | bool]) -> TableOptions:
        """A copy with the given SQL-style options changed (ALTER TABLE MODIFY SETTING)."""
        changes: dict[str, Any] = {}
        for key, value in opts.items():
            k = key.lower()
            if k == "segment_duration":
                changes["segment_duration_ms"] = parse_duration_ms(_str(value))
            elif k == "ttl":
                changes["ttl_ms"] = parse_duration_ms(_str(value))
            elif k == "enable_ttl":
                changes["enable_ttl"] = _parse_bool(
                    value if isinstance(value, bool) else str(value)
                )
            elif k == "update_mode":
                try:
                    changes["update_mode"] = UpdateMode(str(value).upper())
                except ValueError:
                    raise InvalidArgument(
                        f"invalid update_mode {value!r}: OVERWRITE or APPEND"
                    ) from None
            elif k == "write_buffer_size":
                changes["write_buffer_size"] = parse_size(_str(value))
            elif k == "num_rows_per_row_group":
                changes["num_rows_per_row_group"] = int(_str(value))
            elif k == "compression":
                changes["compression"] = str(value).lower()
            else:
                raise InvalidArgument(
                    f"unknown table option {key!r}; known: segment_duration, ttl, enable_ttl, "
                    "update_mode, write_buffer_size, num_rows_per_row_group, compression"
                )
        return replace(self, **changes)

    def to_strings(self) -> dict[str, str]:
        """The SQL-style form, as SHOW CREATE TABLE prints it."""
        return {
            "segment_duration": format_duration(self.segment_duration_ms),
            "update_mode": self.update_mode.value,
            "write_buffer_size": str(self.write_buffer_size),
            "ttl": format_duration(self.ttl_ms),
            "enable_ttl": str(self.enable_ttl).lower(),
            "num_rows_per_row_group": str(self.num_rows_per_row_group),
            "compression": self.compression,
        }

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
