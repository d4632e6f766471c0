"""What the manifest records about one SST file."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, asdict, dataclass, fields
from enum import StrEnum
from typing import Any


class SstKind(StrEnum):
    #: Rows (puts and row-deletion markers) sorted by primary key, of one segment window.
    DATA = "data"
    #: Range tombstones (tag values + time range + sequence), a few per file.
    TOMBSTONES = "tombstones"


@dataclass(frozen=True)
class SstMeta:
    #: Object-store key of the Parquet file.
    path: str
    size: int
    rows: int
    #: Timestamp range of the rows, milliseconds, both inclusive. For a tombstone file, the
    #: union of the ranges its tombstones cover.
    min_ts: int
    max_ts: int
    #: Sequence range of the rows, both inclusive.
    min_seq: int
    max_seq: int
    #: Table schema version the file was written with.
    schema_version: int
    kind: SstKind = SstKind.DATA
    #: How many of ``rows`` are row-deletion markers.
    deletes: int = 0
    #: No range tombstone with a sequence <= this shadows a row of the file (None: up to
    #: ``max_seq``, which holds for every flushed file).
    applied_seq: int | None = None
    #: When the file was written, ms since the epoch (None: written before this was kept).
    created_ms: int | None = None

    @property
    def is_data(self) -> bool:
        return self.kind is SstKind.DATA

    @property
    def tombstones_applied(self) -> int:
        return self.max_seq if self.applied_seq is None else self.applied_seq

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> SstMeta:
        # Rows written before a field existed lack it and take its default.
        kwargs = {f.name: d[f.name] for f in fields(cls) if f.name in d or f.default is MISSING}
        if "kind" in kwargs:
            kwargs["kind"] = SstKind(kwargs["kind"])
        return cls(**kwargs)
