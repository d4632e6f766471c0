"""The series ids of a few rows, hashed row by row, are those the vectorised hashing gives; rows
without a tag value have tsid 0 in tables made from TSID_ZERO_UNTAGGED on."""

from __future__ import annotations

import pyarrow as pa
import pytest

from gnomon.errors import SchemaMismatch
from node.engine import tsid
from node.engine.batch import conform, conform_keys
from node.engine.schema import TSID, TSID_ZERO_UNTAGGED, Column, ColumnType, Schema

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("rows", [1, 3, tsid.SMALL_ROWS])
def test_small_batches_hash_as_large_ones(rows: int, monkeypatch: pytest.MonkeyPatch) -> None:
    batch = pa.record_batch(
        {
            "host": pa.array([None if i % 3 == 0 else f"h{i % 5}" for i in range(rows)]),
            "dc": pa.array([f"dc{i % 2}" for i in range(rows)]),
            "empty": pa.array([None] * rows, pa.string()),
        }
    )
    small = tsid.compute_tsid(batch, ["host", "dc", "empty"])
    monkeypatch.setattr(tsid, "SMALL_ROWS", 0)
    assert small.equals(tsid.compute_tsid(batch, ["host", "dc", "empty"]))


@pytest.mark.parametrize("rows", [3, 40])
def test_untagged_rows_are_zero_when_asked(rows: int) -> None:
    # Rows 0, 3, ... have no tag value: the hash of nothing, or 0 (HoraeDB's) when asked.
    tags = {"host": pa.array([None if i % 3 == 0 else f"h{i % 5}" for i in range(rows)])}
    hashed = tsid.tsid_of(tags, ["host"], rows).to_pylist()
    zeroed = tsid.tsid_of(tags, ["host"], rows, untagged_zero=True).to_pylist()
    for i in range(rows):
        if i % 3 == 0:
            assert (hashed[i], zeroed[i]) == (tsid.UNTAGGED, 0)
        else:
            assert zeroed[i] == hashed[i] != 0
    assert tsid.tsid_of({}, [], rows, untagged_zero=True).to_pylist() == [0] * rows


def test_tables_made_before_keep_the_hash_of_no_tags() -> None:
    columns = [Column("ts", ColumnType.TIMESTAMP, nullable=False), Column("v", ColumnType.DOUBLE)]
    old = Schema.build(columns, timestamp_key="ts")
    new = Schema.build(columns, timestamp_key="ts", tsid_version=TSID_ZERO_UNTAGGED)
    # A schema stored before tsid_version existed reads back as version 1.
    stored = {k: v for k, v in old.to_json().items() if k != "tsid_version"}
    assert Schema.from_json(stored) == old
    assert Schema.from_json(new.to_json()) == new
    rows = pa.table({"ts": pa.array([1, 2], pa.timestamp("ms")), "v": [1.0, 2.0]})
    assert (
        conform("t", old, rows, max_bytes=1 << 20).column(TSID).to_pylist() == [tsid.UNTAGGED] * 2
    )
    assert conform("t", new, rows, max_bytes=1 << 20).column(TSID).to_pylist() == [0, 0]
    # A deletion's keys get the tsid their rows were written with.
    keys = conform_keys("t", new, rows.select(["ts"]), max_bytes=1 << 20)
    assert keys.column(TSID).to_pylist() == [0, 0]


@pytest.mark.parametrize("rows", [1, tsid.SMALL_ROWS, 40])
def test_tags_conformed_dictionary_encoded_keep_their_values_and_series_ids(rows: int) -> None:
    schema = Schema.build(
        [
            Column("host", ColumnType.STRING, is_tag=True),
            Column("dc", ColumnType.STRING, is_tag=True),
            Column("v", ColumnType.DOUBLE),
            Column("ts", ColumnType.TIMESTAMP, nullable=False),
        ],
        timestamp_key="ts",
    )
    batch = pa.record_batch(
        {
            "host": pa.array([None if i % 3 == 0 else f"h{i % 5}" for i in range(rows)]),
            "dc": pa.array([f"dc{i % 2}" for i in range(rows)]),
            "v": pa.array([float(i) for i in range(rows)]),
            "ts": pa.array(list(range(rows)), pa.timestamp("ms")),
        }
    )
    plain = conform("t", schema, batch, max_bytes=1 << 20)
    encoded = conform("t", schema, batch, max_bytes=1 << 20, dictionary=("host", "dc"))
    assert encoded.schema.field("host").type == pa.dictionary(pa.int32(), pa.string())
    assert encoded.column(TSID).equals(plain.column(TSID))
    for name in schema.names:
        assert encoded.column(name).cast(plain.schema.field(name).type).equals(plain.column(name))


def test_a_batch_only_checked_is_refused_as_a_written_one_without_its_tsid() -> None:
    schema = Schema.build(
        [
            Column("host", ColumnType.STRING, is_tag=True),
            Column("v", ColumnType.DOUBLE, nullable=False),
            Column("ts", ColumnType.TIMESTAMP, nullable=False),
        ],
        timestamp_key="ts",
    )
    ts = pa.array([1, 2], pa.timestamp("ms"))
    good = pa.record_batch({"host": pa.array(["a", "b"]), "v": pa.array([1.0, 2.0]), "ts": ts})
    checked = conform("t", schema, good, max_bytes=1 << 20, tsid=False)
    written = conform("t", schema, good, max_bytes=1 << 20)
    assert checked.column(TSID).null_count == 2 and written.column(TSID).null_count == 0
    assert checked.drop_columns([TSID]).equals(written.drop_columns([TSID]))
    bad = pa.record_batch({"host": pa.array(["a", "b"]), "v": pa.array([1.0, None]), "ts": ts})
    for tsid_too in (True, False):
        with pytest.raises(SchemaMismatch, match="NOT NULL"):
            conform("t", schema, bad, max_bytes=1 << 20, tsid=tsid_too)
