"""What the manifest records about one SST file."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class SstMeta:
    #: Object-store key of the Parquet file.
    path: str
    size: int
    rows: int
    #: Timestamp range of the rows, milliseconds, both inclusive.
    min_ts: int
    max_ts: int
    #: Sequence range of the rows, both inclusive.
    min_seq: int
    max_seq: int
    #: Table schema version the file was written with.
    schema_version: int

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> SstMeta:
        return cls(**{k: d[k] for k in cls.__dataclass_fields__})
