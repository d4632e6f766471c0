"""Table options (the ``WITH (...)`` clause of CREATE TABLE) and their string forms.

HoraeDB's options are taken under HoraeDB's names and values: those gnomon has a meaning for
set it (segment_duration, update_mode, write_buffer_size, ttl, enable_ttl,
num_rows_per_row_group, compression, compaction_strategy and its thresholds, storage_format);
the rest (:data:`_IGNORED`: arena_block_size, memtable_type, ...) are checked and dropped.
SHOW CREATE TABLE prints HoraeDB's option set with gnomon's values (memtable_type is
gnomon's own; arena_block_size, which gnomon has no equivalent of, is left out) and
gnomon's own options only where a table sets them away from their default.
"""

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
    """The largest unit up to days that divides ``ms`` ('7d', '90m'), as HoraeDB prints."""
    for unit in ("d", "h", "m", "s"):
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


def _parse_segment_duration(value: str | int | bool) -> int:
    # HoraeDB's '' leaves the duration to the engine: gnomon's default.
    if isinstance(value, str) and not value.strip():
        return TableOptions.segment_duration_ms
    return parse_duration_ms(_str(value))


#: gnomon's compression codecs by the names HoraeDB writes (and takes) for them.
_COMPRESSION_NAMES = {
    "zstd": "ZSTD",
    "snappy": "SNAPPY",
    "lz4": "LZ4",
    "gzip": "GZIP",
    "none": "UNCOMPRESSED",
}


def _parse_compression(value: str | int | bool) -> str:
    codec = str(value).strip().lower()
    return "none" if codec == "uncompressed" else codec


def _choice(option: str, value: str | int | bool, choices: tuple[str, ...]) -> str:
    """``value``, in lower case, when it is one of ``choices`` in any case."""
    word = str(value).strip().lower()
    if word not in choices:
        raise InvalidArgument(f"unknown {option} {value!r}; expected one of {', '.join(choices)}")
    return word


def _parse_storage_format(value: str | int | bool) -> str:
    """HoraeDB's storage format hint. gnomon stores every table as columnar Parquet, which
    satisfies AUTO and COLUMNAR; HYBRID (HoraeDB's other layout, answering alike) is stored
    columnar too, and so reads COLUMNAR back."""
    hint = _choice("storage_format", value, ("auto", "columnar", "hybrid"))
    return "AUTO" if hint == "auto" else "COLUMNAR"


def _parse_compaction_strategy(value: str | int | bool) -> str:
    """HoraeDB's compaction strategy. gnomon merges files of similar size within each
    segment window, which is HoraeDB's time_window strategy (its default too); size_tiered,
    across windows, is not done, and such a table compacts by window: time_window."""
    strategy = _choice("compaction_strategy", value, ("default", "time_window", "size_tiered"))
    return "default" if strategy == "default" else "time_window"


def _parse_float(value: str | int | bool) -> float:
    try:
        return float(str(value))
    except ValueError:
        raise InvalidArgument(f"invalid number {value!r}") from None


#: HoraeDB options without a meaning in gnomon: checked as HoraeDB checks them, then dropped.
#: The memtable is columnar (Arrow batches) whatever memtable_type says, its memory is not
#: allocated from an arena, and the size-tiered bucket options apply to a strategy gnomon
#: does not run.
_IGNORED: dict[str, Callable[[Any], Any]] = {
    "arena_block_size": lambda v: parse_size(_str(v)),
    "memtable_type": lambda v: _choice("memtable_type", v, ("skiplist", "columnar")),
    "layered_enable": _parse_bool,
    "layered_mutable_switch_threshold": lambda v: parse_size(_str(v)),
    "compaction_bucket_low": _parse_float,
    "compaction_bucket_high": _parse_float,
    "compaction_min_sstable_size": lambda v: parse_size(_str(v)),
    "compaction_timestamp_resolution": str,
}

#: What SHOW CREATE TABLE prints for memtable_type: gnomon's memtable, whatever was asked.
MEMTABLE_TYPE = "columnar"


def _parse_compaction_mode(value: str | int | bool) -> str:
    mode = str(value).lower()
    if mode not in ("auto", "local", "offload"):
        raise InvalidArgument(f"invalid compaction_mode {value!r}: 'auto', 'local' or 'offload'")
    return mode


#: SQL option name -> (field, parser, formatter).
_OPTIONS: dict[str, tuple[str, Callable[[Any], Any], Callable[[Any], str]]] = {
    "segment_duration": ("segment_duration_ms", _parse_segment_duration, format_duration),
    "update_mode": ("update_mode", _parse_mode, lambda v: str(v.value)),
    "write_buffer_size": ("write_buffer_size", parse_size, str),
    "ttl": ("ttl_ms", parse_duration_ms, format_duration),
    "enable_ttl": ("enable_ttl", _parse_bool, lambda v: str(v).lower()),
    "num_rows_per_row_group": ("num_rows_per_row_group", _parse_int, str),
    "compression": ("compression", _parse_compression, _COMPRESSION_NAMES.__getitem__),
    "storage_format": ("storage_format", _parse_storage_format, str),
    "compaction_strategy": ("compaction_strategy", _parse_compaction_strategy, str),
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
    #: HoraeDB's storage format hint, AUTO or COLUMNAR (see _parse_storage_format).
    storage_format: str = "AUTO"
    #: HoraeDB's compaction strategy, default or time_window (see _parse_compaction_strategy).
    compaction_strategy: str = "default"
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
        if self.compression not in _COMPRESSION_NAMES:
            raise InvalidArgument(
                f"unknown compression {self.compression!r}: zstd, snappy, lz4, gzip or "
                "none (uncompressed)"
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
            ignored = _IGNORED.get(key.lower())
            if ignored is not None:
                ignored(value)
                continue
            spec = _OPTIONS.get(key.lower())
            if spec is None:
                known = ", ".join(sorted([*_OPTIONS, *_IGNORED]))
                raise InvalidArgument(f"unknown table option {key!r}; known: {known}")
            name, parse, _ = spec
            changes[name] = parse(value)
        return replace(self, **changes)

    def to_strings(self) -> dict[str, str]:
        """The SQL-style form, as SHOW CREATE TABLE prints it, sorted by name: HoraeDB's
        option set (:data:`_PRINTED`) with gnomon's values, and gnomon's other options
        where they differ from their default (so the statement makes the same table)."""
        out = {
            key: fmt(getattr(self, name))
            for key, (name, _, fmt) in _OPTIONS.items()
            if key in _PRINTED or getattr(self, name) != getattr(_DEFAULTS, name)
        }
        out["memtable_type"] = MEMTABLE_TYPE
        return dict(sorted(out.items()))

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> TableOptions:
        known = {f.name for f in fields(cls)}
        kwargs = {k: v for k, v in d.items() if k in known}
        if "update_mode" in kwargs:
            kwargs["update_mode"] = UpdateMode(kwargs["update_mode"])
        return cls(**kwargs)


#: The options HoraeDB's SHOW CREATE TABLE prints for every table, those gnomon has a
#: value for (arena_block_size it has not: its memtable takes no arena); memtable_type is
#: added by :meth:`TableOptions.to_strings`.
_PRINTED = frozenset(
    {
        "compaction_strategy",
        "compression",
        "enable_ttl",
        "num_rows_per_row_group",
        "segment_duration",
        "storage_format",
        "ttl",
        "update_mode",
        "write_buffer_size",
    }
)
_DEFAULTS = TableOptions()


def _str(value: str | int | bool) -> str | int:
    return value if isinstance(value, int) and not isinstance(value, bool) else str(value)
