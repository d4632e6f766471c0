"""Range tombstones: "every row whose tags equal these values and whose timestamp is in
[start, end), written before sequence ``seq``, is deleted".

They are few (one per DELETE of a time range), so they live apart from the rows: in the WAL as
their own record kind, in the memtable as a list, and on flush in a small Parquet file of their
own (an SST of kind ``tombstones`` in the manifest). A read loads the tombstones of its snapshot
that overlap its time range and drops, batch by batch, the rows they shadow. Row deletions by
primary key are different: there may be many, so they are rows (``__kind`` = delete) that travel
through the k-way merge with the data they shadow.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from gnomon.errors import InvalidArgument
from node.engine.schema import SEQ, ColumnType, Schema
from node.engine.sst.meta import SstKind, SstMeta

_INT64_MIN = int(np.iinfo(np.int64).min)
_INT64_MAX = int(np.iinfo(np.int64).max)

_FILE_SCHEMA = pa.schema(
    [  # type: ignore[arg-type]
        pa.field("seq", pa.uint64(), nullable=False),
        pa.field("start", pa.int64()),
        pa.field("end", pa.int64()),
        pa.field("tags", pa.string(), nullable=False),
    ]
)


@dataclass(frozen=True)
class RangeTombstone:
    seq: int
    #: [start, end) in milliseconds; None is unbounded.
    start: int | None
    end: int | None
    #: (tag, value) pairs a row must all match; empty matches every series.
    tags: tuple[tuple[str, Any], ...] = ()

    @classmethod
    def build(
        cls,
        schema: Schema,
        seq: int,
        tags: Mapping[str, Any] | None,
        time_range: tuple[int | None, int | None] | None,
    ) -> RangeTombstone:
        """A checked tombstone: ``tags`` must name tag columns with values of their type."""
        pairs: list[tuple[str, Any]] = []
        for name, value in sorted((tags or {}).items()):
            col = schema.column(name)
            if not col.is_tag:
                raise InvalidArgument(f"column {name!r} is not a tag; range deletes match tags")
            if col.type is ColumnType.VARBINARY:
                raise InvalidArgument(f"range deletes cannot match the varbinary tag {name!r}")
            try:
                scalar = pa.scalar(value).cast(col.type.arrow()) if value is not None else None
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
                raise InvalidArgument(f"tag {name!r}: value {value!r} does not fit: {e}") from None
            pairs.append((name, None if scalar is None else _json_value(scalar)))
        start, end = time_range or (None, None)
        if start is not None and end is not None and start >= end:
            raise InvalidArgument(f"empty time range [{start}, {end})")
        return cls(seq, start, end, tuple(pairs))

    @property
    def min_ts(self) -> int:
        return _INT64_MIN if self.start is None else self.start

    @property
    def max_ts(self) -> int:
        return _INT64_MAX if self.end is None else self.end - 1

    def may_shadow(self, min_ts: int, max_ts: int, min_seq: int) -> bool:
        """Whether rows in this time range, the oldest of sequence ``min_seq``, may be hit."""
        return min_seq < self.seq and self.min_ts <= max_ts and min_ts <= self.max_ts

    def to_json(self) -> dict[str, Any]:
        return {"seq": self.seq, "start": self.start, "end": self.end, "tags": dict(self.tags)}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> RangeTombstone:
        return cls(int(d["seq"]), d["start"], d["end"], tuple(sorted(d["tags"].items())))


def _json_value(scalar: pa.Scalar[Any]) -> Any:
    if pa.types.is_temporal(scalar.type):
        return scalar.cast(pa.int64() if pa.types.is_timestamp(scalar.type) else pa.int32()).as_py()
    return scalar.as_py()


def shadowed(
    data: pa.Table, tombstones: Sequence[RangeTombstone], schema: Schema
) -> pa.Array[Any] | pa.ChunkedArray[Any]:
    """A boolean mask of the rows of ``data`` (which holds the tags, timestamp and ``__seq``)
    that some tombstone deletes."""
    seq = data.column(SEQ)
    ts = data.column(schema.timestamp_key).cast(pa.int64())
    hit: Any = None
    for t in tombstones:
        m = pc.less(seq, pa.scalar(t.seq, pa.uint64()))
        if t.start is not None:
            m = pc.and_(m, pc.greater_equal(ts, pa.scalar(t.start, pa.int64())))
        if t.end is not None:
            m = pc.and_(m, pc.less(ts, pa.scalar(t.end, pa.int64())))
        for name, value in t.tags:
            col = data.column(name)
            if value is None:
                m = pc.and_(m, pc.is_null(col))
            else:
                m = pc.and_kleene(m, pc.equal(col, pa.scalar(value).cast(col.type)))
        hit = m if hit is None else pc.or_kleene(hit, m)
    if hit is None:
        return pa.array(np.zeros(data.num_rows, dtype=bool))
    filled: pa.ChunkedArray[Any] = hit.fill_null(False)
    return filled


def drop_shadowed(data: pa.Table, tombstones: Sequence[RangeTombstone], schema: Schema) -> pa.Table:
    if not tombstones or data.num_rows == 0:
        return data
    return data.filter(pc.invert(shadowed(data, tombstones, schema)))


def columns_needed(tombstones: Iterable[RangeTombstone], schema: Schema) -> set[str]:
    """Columns a batch must carry for :func:`shadowed`."""
    out = {SEQ, schema.timestamp_key}
    for t in tombstones:
        out.update(name for name, _ in t.tags)
    return out


def write_tombstone_file(
    tombstones: Sequence[RangeTombstone], *, schema_version: int, local_path: str, key: str
) -> SstMeta:
    table = pa.table(
        {
            "seq": pa.array([t.seq for t in tombstones], pa.uint64()),
            "start": pa.array([t.start for t in tombstones], pa.int64()),
            "end": pa.array([t.end for t in tombstones], pa.int64()),
            "tags": [json.dumps(dict(t.tags), sort_keys=True) for t in tombstones],
        },
        schema=_FILE_SCHEMA,
    )
    pq.write_table(table, local_path)
    return SstMeta(
        path=key,
        size=os.path.getsize(local_path),
        rows=len(tombstones),
        min_ts=min(t.min_ts for t in tombstones),
        max_ts=max(t.max_ts for t in tombstones),
        min_seq=min(t.seq for t in tombstones),
        max_seq=max(t.seq for t in tombstones),
        schema_version=schema_version,
        kind=SstKind.TOMBSTONES,
    )


def read_tombstone_file(path: str) -> list[RangeTombstone]:
    table = pq.read_table(path, schema=_FILE_SCHEMA)
    return [
        RangeTombstone(int(seq or 0), start, end, tuple(sorted(json.loads(tags or "{}").items())))
        for seq, start, end, tags in zip(
            table.column("seq").to_pylist(),
            table.column("start").to_pylist(),
            table.column("end").to_pylist(),
            table.column("tags").to_pylist(),
            strict=True,
        )
    ]
