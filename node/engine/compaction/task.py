"""The unit of compaction work, small and serialisable so that a compaction node can run the
merge unchanged: which SSTs to merge, with which schema and options, what to drop on the way
and where to write the output."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from node.engine.options import TableOptions
from node.engine.schema import Schema
from node.engine.sst.meta import SstMeta
from node.engine.tombstones import RangeTombstone


@dataclass(frozen=True)
class CompactionTask:
    table_id: int
    schema: Schema
    options: TableOptions
    #: Data SSTs to merge, all read in primary-key order.
    inputs: tuple[SstMeta, ...]
    #: Range tombstones that may shadow rows of the inputs; shadowed rows are dropped.
    range_tombstones: tuple[RangeTombstone, ...] = ()
    #: Whether deletion markers can go: no SST outside the inputs holds older rows they shadow.
    purge_deletes: bool = False
    #: Rows older than this (TTL) are dropped; None keeps everything.
    ttl_floor_ms: int | None = None
    #: Stamped on the outputs as ``applied_seq``: every range tombstone up to it is applied.
    applied_seq: int | None = None
    #: Object-store key prefix of the outputs (``<prefix>/<window>/<uuid>.parquet``).
    output_prefix: str = ""
    batch_size: int = 65_536

    def to_json(self) -> dict[str, Any]:
        return {
            "table_id": self.table_id,
            "schema": self.schema.to_json(),
            "options": self.options.to_json(),
            "inputs": [f.to_json() for f in self.inputs],
            "range_tombstones": [t.to_json() for t in self.range_tombstones],
            "purge_deletes": self.purge_deletes,
            "ttl_floor_ms": self.ttl_floor_ms,
            "applied_seq": self.applied_seq,
            "output_prefix": self.output_prefix,
            "batch_size": self.batch_size,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> CompactionTask:
        return cls(
            table_id=int(d["table_id"]),
            schema=Schema.from_json(d["schema"]),
            options=TableOptions.from_json(d["options"]),
            inputs=tuple(SstMeta.from_json(f) for f in d["inputs"]),
            range_tombstones=tuple(RangeTombstone.from_json(t) for t in d["range_tombstones"]),
            purge_deletes=bool(d["purge_deletes"]),
            ttl_floor_ms=d["ttl_floor_ms"],
            applied_seq=d["applied_seq"],
            output_prefix=str(d["output_prefix"]),
            batch_size=int(d["batch_size"]),
        )

    def dumps(self) -> str:
        return json.dumps(self.to_json(), separators=(",", ":"))

    @classmethod
    def loads(cls, text: str) -> CompactionTask:
        return cls.from_json(json.loads(text))
