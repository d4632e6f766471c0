"""Writing one SST: a Parquet file of rows sorted by (primary key, seq) of one segment window.

Tags get dictionary encoding (few distinct values, long runs once sorted by series), floats
BYTE_STREAM_SPLIT, timestamps and sequences delta encoding; every column carries min/max
statistics per row group, which the read path prunes with. The file's key-value metadata names
the table, schema version and time/sequence ranges, so an SST can be understood on its own.
"""

from __future__ import annotations

import base64
import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from node.engine.options import TableOptions
from node.engine.schema import DELETE, KIND, SEQ, ColumnType, Schema
from node.engine.sst.meta import SstMeta

_FLOATS = {ColumnType.DOUBLE, ColumnType.FLOAT}
#: A row group holding more series than this records none (see ``SERIES_KEY``): a list that
#: long would make pruning by it cost more than it saves.
MAX_SERIES_PER_ROW_GROUP = 64
#: File metadata key of the series directory: ``{"tags": [names], "series": [[values]...],
#: "row_groups": [[series indexes] or null ...], "starts": [[row offsets] or null ...]}``, the
#: distinct tag values of the series each row group holds, so reads can skip row groups of
#: other series even where a tag's min/max spans them all (rows are sorted by tsid, a hash, not
#: by tag value). Each series is listed once per file: the directory stays small next to the
#: data. Where each series of a row group is one run of rows (every tag listed, the primary
#: key led by the series), its ``row_groups`` entry lists them in row order and ``starts``
#: gives the first row of each (a run ends where the next begins), so a read of a few series
#: slices their rows out instead of comparing tags; files written before ``starts`` existed
#: lack it.
SERIES_KEY = "gnomon.series"
#: File metadata key of the Arrow schema pyarrow stores with a file (base64 of its IPC form).
ARROW_SCHEMA_KEY = "ARROW:schema"
_DELTA = {ColumnType.TIMESTAMP, ColumnType.INT64, ColumnType.INT32}
_JSON_TAGS = {
    ColumnType.STRING, ColumnType.BOOLEAN, ColumnType.INT8, ColumnType.INT16, ColumnType.INT32,
    ColumnType.INT64, ColumnType.UINT8, ColumnType.UINT16, ColumnType.UINT32, ColumnType.UINT64,
}  # fmt: skip


def _writer_options(schema: Schema, options: TableOptions) -> dict[str, object]:
    dictionary = [
        c.name
        for c in schema.columns
        if c.is_tag or c.type in (ColumnType.STRING, ColumnType.VARBINARY)
    ]
    # Almost every row is a put: a dictionary of one value, run-length encoded, costs nothing.
    dictionary.append(KIND)
    encoding: dict[str, str] = {SEQ: "DELTA_BINARY_PACKED"}
    for c in schema.columns:
        if c.name in dictionary:
            continue
        if c.type in _FLOATS:
            encoding[c.name] = "BYTE_STREAM_SPLIT"
        elif c.type in _DELTA:
            encoding[c.name] = "DELTA_BINARY_PACKED"
    return {
        "compression": options.compression,
        "use_dictionary": dictionary,
        "column_encoding": encoding,
        "write_statistics": True,
        "write_page_index": True,
    }


@dataclass(frozen=True)
class RowGroupSeries:
    """The distinct tag values of one row group's series and, when each series is one run of
    rows, the first row of each (``series`` then in row order)."""

    series: list[tuple[object, ...]]
    starts: list[int] | None


def _series_of(rows: pa.Table, tags: list[str]) -> RowGroupSeries | None:
    """The series of ``rows`` (one row group), or None when there are too many or a tag is
    null (an equality guarantee cannot say "null")."""
    if any(rows.column(t).null_count for t in tags):
        return None
    # Rows are sorted by the primary key: with the series id first, each series is one run,
    # and the runs are found where some tag changes from one row to the next.
    n = rows.num_rows
    changes = np.zeros(n, dtype=bool)
    changes[:1] = True
    for t in tags:
        column: Any = rows.column(t)
        if pa.types.is_dictionary(column.type) and column.num_chunks == 1:
            # One dictionary of distinct values: rows differ where their indices do.
            column = pa.chunked_array([column.chunk(0).indices])
        changes[1:] |= pc.not_equal(column.slice(1), column.slice(0, n - 1)).to_numpy()
    starts = changes.nonzero()[0]
    if len(starts) <= MAX_SERIES_PER_ROW_GROUP:
        firsts = rows.select(tags).take(starts)
        runs = list(zip(*(firsts.column(t).to_pylist() for t in tags), strict=True))
        if len(set(runs)) == len(runs):
            return RowGroupSeries(runs, starts.tolist())
        # A series in several runs (an explicit primary key not led by the tags).
        return RowGroupSeries(list(dict.fromkeys(runs)), None)
    distinct = rows.select(tags).group_by(tags, use_threads=False).aggregate([])
    if distinct.num_rows > MAX_SERIES_PER_ROW_GROUP:
        return None
    columns = [distinct.column(t).to_pylist() for t in tags]
    return RowGroupSeries(list(zip(*columns, strict=True)), None)


class SstWriter:
    """Writes one SST from sorted tables handed over in order, buffering up to a row group, so
    a writer fed by a streaming merge holds at most one row group of rows."""

    def __init__(
        self,
        *,
        table_id: int,
        schema: Schema,
        options: TableOptions,
        local_path: str,
        key: str,
        applied_seq: int | None = None,
        dictionary: Sequence[str] = (),
    ) -> None:
        self._table_id = table_id
        self._schema = schema
        self._row_group = options.num_rows_per_row_group
        self._local_path = local_path
        self._key = key
        self._applied_seq = applied_seq
        storage = schema.storage_arrow()
        self._dictionary = tuple(dictionary)
        # String columns handed over dictionary encoded (``dictionary``) are written from
        # their dictionaries, which Parquet's dictionary encoding takes as they are instead of
        # hashing every value. The file says it holds plain strings, as any SST does.
        self._writer = pq.ParquetWriter(
            local_path,
            schema.storage_projection(tuple(storage.names), self._dictionary),
            store_schema=not self._dictionary,
            **_writer_options(schema, options),  # type: ignore[arg-type]
        )
        if self._dictionary:
            self._writer.add_key_value_metadata(
                {ARROW_SCHEMA_KEY: base64.b64encode(storage.serialize().to_pybytes()).decode()}
            )
        self._buffer: list[pa.Table] = []
        self._buffered = 0
        self.rows = 0
        self._deletes = 0
        self._ts: list[int] = []
        self._seq: list[int] = []
        # Tags whose values JSON holds exactly (not binaries, timestamps or dates).
        self._tags = [c.name for c in schema.columns if c.is_tag and c.type in _JSON_TAGS]
        self._series: list[RowGroupSeries | None] = []

    def write(self, rows: pa.Table) -> None:
        """Append ``rows`` (storage schema, sorted after everything written before)."""
        if rows.num_rows == 0:
            return
        ts = rows.column(self._schema.timestamp_key).cast(pa.int64())
        self._ts.extend(v.as_py() for v in pc.min_max(ts).values())
        self._seq.extend(v.as_py() for v in pc.min_max(rows.column(SEQ)).values())
        kinds = rows.column(KIND).to_numpy()
        self._deletes += int(np.count_nonzero(kinds == DELETE))
        self.rows += rows.num_rows
        self._buffer.append(rows)
        self._buffered += rows.num_rows
        if self._buffered >= self._row_group:
            self._drain(final=False)

    def _drain(self, *, final: bool) -> None:
        table = pa.concat_tables(self._buffer).combine_chunks()
        full = table.num_rows if final else table.num_rows // self._row_group * self._row_group
        if full:
            written = table.slice(0, full)
            self._writer.write_table(written, row_group_size=self._row_group)
            if self._tags:
                for start in range(0, full, self._row_group):
                    self._series.append(
                        _series_of(written.slice(start, self._row_group), self._tags)
                    )
        rest = table.slice(full)
        self._buffer = [rest] if rest.num_rows else []
        self._buffered = rest.num_rows

    @property
    def bytes_written(self) -> int:
        """Bytes of completed row groups on disk (what the file holds before its footer)."""
        return os.path.getsize(self._local_path)

    def close(self) -> SstMeta:
        """Finish the file and describe it; the writer must have been given rows."""
        if self._buffer:
            self._drain(final=True)
        min_ts, max_ts, min_seq, max_seq = (
            min(self._ts),
            max(self._ts),
            min(self._seq),
            max(self._seq),
        )
        self._writer.add_key_value_metadata(
            {
                "gnomon.table_id": str(self._table_id),
                "gnomon.schema_version": str(self._schema.version),
                "gnomon.schema": json.dumps(self._schema.to_json()),
                "gnomon.min_ts": str(min_ts),
                "gnomon.max_ts": str(max_ts),
                "gnomon.min_seq": str(min_seq),
                "gnomon.max_seq": str(max_seq),
                **({SERIES_KEY: directory} if (directory := self._series_directory()) else {}),
            }
        )
        self._writer.close()
        return SstMeta(
            path=self._key,
            size=os.path.getsize(self._local_path),
            rows=self.rows,
            min_ts=min_ts,
            max_ts=max_ts,
            min_seq=min_seq,
            max_seq=max_seq,
            schema_version=self._schema.version,
            deletes=self._deletes,
            applied_seq=self._applied_seq,
            created_ms=int(time.time() * 1000),
        )

    def _series_directory(self) -> str | None:
        """The directory as JSON, or None when it could serve no read: no tags, a row group
        it cannot list, or, without runs to slice, some row group holding over a quarter of
        the file's series (it could not rule out most row groups of any query; it would
        only make the footer larger). With runs it serves a read of a few series however
        few the file holds (a sub-table of a partition table holds a share of them): their
        rows are sliced out, not compared."""
        index: dict[tuple[object, ...], int] = {}
        groups = [
            None if held is None else [index.setdefault(v, len(index)) for v in held.series]
            for held in self._series
        ]
        if not index or any(g is None for g in groups):
            return None
        starts = [None if held is None else held.starts for held in self._series]
        # A run is one series only where the directory names every tag.
        sliced = len(self._tags) == len(self._schema.tags) and any(s is not None for s in starts)
        if not sliced and any(g is not None and len(g) * 4 > len(index) for g in groups):
            return None
        directory: dict[str, object] = {
            "tags": self._tags,
            "series": [list(k) for k in index],
            "row_groups": groups,
        }
        if sliced:
            directory["starts"] = starts
        return json.dumps(directory, separators=(",", ":"))

    def abort(self) -> None:
        self._writer.close()


def write_sst(
    rows: pa.Table,
    *,
    table_id: int,
    schema: Schema,
    options: TableOptions,
    local_path: str,
    key: str,
) -> SstMeta:
    """Write ``rows`` (storage schema, already sorted; string columns may come dictionary
    encoded) to ``local_path``; the returned meta names ``key``, where the caller will
    store the file."""
    writer = SstWriter(
        table_id=table_id,
        schema=schema,
        options=options,
        local_path=local_path,
        key=key,
        dictionary=[f.name for f in rows.schema if pa.types.is_dictionary(f.type)],
    )
    try:
        writer.write(rows)
        return writer.close()
    except BaseException:
        writer.abort()
        raise
