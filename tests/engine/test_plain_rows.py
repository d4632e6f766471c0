"""Small writes held as Python values (node/engine/plain.py): read, replayed and refused as the
same writes made as Arrow; their WAL records replay beside the Arrow ones, also after SIGKILL."""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa
import pytest

from gnomon.errors import Corrupted, InvalidArgument
from node.backends import open_standalone
from node.engine import plain
from node.engine.batch import conform
from node.engine.engine import Engine
from node.engine.memtable import PENDING_MAX_ROWS, Memtable
from node.engine.options import UpdateMode
from node.engine.plain import PlainRows, conform_values
from node.engine.schema import SEQ, TSID_ZERO_UNTAGGED, Column, ColumnType, Schema
from node.engine.table import RecordOp, decode_record
from node.ingest import line_protocol
from node.ingest.writer import Ingestor

from .killed_writer import assert_each_once, kill_repeatedly
from .plain_crash_writer import HOSTS, IDS

pytestmark = pytest.mark.integration

KILLS = 8


def _body(measurement: str, at: int) -> str:
    """Every type line protocol writes, nulls (fields a line leaves out), escapes, the ends of
    the integer ranges and floats that only round-trip exactly; at times ``at`` + 1 .. 4."""
    return "\n".join(
        [
            rf"{measurement},host=a\ b,dc=x\,y i=-9223372036854775808i,u=18446744073709551615u,"
            rf'f=0.1,s="q\"t",b=t {at + 1}',
            f"{measurement},host=a i=9223372036854775807i,f=-1e-300 {at + 2}",
            f"{measurement},dc=y f=1.7976931348623157e308,b=false {at + 3}",
            f'{measurement} s="",u=0u {at + 4}',
        ]
    )


def _write_both_ways(engine: Engine) -> None:
    """The body, twice, to table ``plain`` and to table ``arrow``: first through the ingestor
    (which creates the table), then through the plain path or as Arrow."""
    ingestor = Ingestor(engine)
    for name in ("plain", "arrow"):
        ingestor.write_all(line_protocol.parse(_body(name, 100), precision="ms"))
    (rows,) = line_protocol.parse(_body("plain", 0), precision="ms")
    plain_rows = rows.plain("timestamp")
    assert plain_rows is not None
    logged = engine.table("plain").start_write_rows(plain_rows)
    assert logged is not None
    assert logged.wait() == 4
    (rows,) = line_protocol.parse(_body("arrow", 0), precision="ms")
    assert engine.table("arrow").write(rows.arrow("timestamp")) == 4


def _contents(engine: Engine, name: str) -> list[tuple[object, ...]]:
    table = engine.read_all(name)
    return sorted(zip(*(c.to_pylist() for c in table.columns), strict=True), key=repr)


def test_plain_rows_read_and_replay_as_arrow_rows(tmp_path: Path) -> None:
    data_dir = str(tmp_path / "db")
    engine = open_standalone(data_dir, flush_on_close=False)
    try:
        _write_both_ways(engine)
        plain_rows, arrow_rows = _contents(engine, "plain"), _contents(engine, "arrow")
        assert plain_rows == arrow_rows
        assert len(plain_rows) == 8
    finally:
        engine.close()
    # Not flushed: the rows come back from the WAL, plain and Arrow records both.
    engine = open_standalone(data_dir)
    try:
        assert _contents(engine, "plain") == plain_rows
        assert _contents(engine, "arrow") == arrow_rows
    finally:
        engine.close()


def test_plain_record_decodes_to_the_rows_written() -> None:
    rows = PlainRows.of(
        [
            ("ts", ColumnType.TIMESTAMP, [1, 2]),
            ("f", ColumnType.DOUBLE, [0.1, None]),
            ("s", ColumnType.STRING, ["é\n", None]),
        ]
    )
    assert rows is not None
    op, batch = decode_record(rows.encode())
    assert op is RecordOp.PUT
    assert batch.equals(rows.arrow())
    assert batch.to_pydict() == {
        "ts": batch.column(0).to_pylist(),
        "f": [0.1, None],
        "s": ["é\n", None],
    }
    with pytest.raises(Corrupted, match="plain rows"):
        decode_record(plain.MAGIC + b'[["ts"],["timestamp"]')


@pytest.mark.parametrize(
    "column",
    [
        ("i", ColumnType.INT64, [2**63]),
        ("i", ColumnType.INT64, [True]),
        ("u", ColumnType.UINT64, [-1]),
        ("f", ColumnType.DOUBLE, [1]),
        ("s", ColumnType.STRING, [b"x"]),
        ("d", ColumnType.DATE, [1]),
    ],
)
def test_values_arrow_would_convert_otherwise_are_not_plain(
    column: tuple[str, ColumnType, list[object]],
) -> None:
    assert PlainRows.of([("ts", ColumnType.TIMESTAMP, [1]), column]) is None


def test_writes_the_plain_path_cannot_take_are_refused_as_arrow_ones(engine: Engine) -> None:
    schema = Schema.build(
        [
            Column("ts", ColumnType.TIMESTAMP),
            Column("host", ColumnType.STRING, is_tag=True),
            Column("need", ColumnType.INT64, nullable=False),
            Column("dflt", ColumnType.INT64, default=7),
        ],
        timestamp_key="ts",
    )
    engine.create_table("strict", schema)
    table = engine.table("strict")
    missing = PlainRows.of([("ts", ColumnType.TIMESTAMP, [1]), ("host", ColumnType.STRING, ["a"])])
    assert missing is not None
    assert conform_values(table.info.schema, missing) is None
    with pytest.raises(InvalidArgument) as plain_error:
        table.write_rows(missing)
    with pytest.raises(InvalidArgument) as arrow_error:
        table.write(missing.arrow())
    assert plain_error.value.message == arrow_error.value.message
    assert "need" in plain_error.value.message
    # The default is filled in by the Arrow path, which the write then takes.
    given = PlainRows.of([("ts", ColumnType.TIMESTAMP, [1]), ("need", ColumnType.INT64, [3])])
    assert given is not None
    assert table.write_rows(given) == 1
    assert engine.read_all("strict", columns=["need", "dflt"]).to_pylist() == [
        {"need": 3, "dflt": 7}
    ]
    # A value of another type than the column's is refused, whichever way it comes.
    text = Ingestor(engine)
    with pytest.raises(InvalidArgument, match="Value type is not same"):
        text.write_all(line_protocol.parse("strict,host=a need=1.5 2", precision="ms"))


def test_memtable_converts_held_values_for_readers_and_when_many() -> None:
    schema = Schema.build(
        [Column("ts", ColumnType.TIMESTAMP), Column("v", ColumnType.INT64)],
        timestamp_key="ts",
        primary_key=["ts"],
    )
    memtable = Memtable(schema, UpdateMode.APPEND)
    for seq in range(1, 4):
        memtable.append_values([[seq * 10], [seq]], seq)
    assert memtable.rows == 3 and (memtable.min_seq, memtable.max_seq) == (1, 3)
    assert (memtable.min_ts, memtable.max_ts) == (10, 30)
    assert len(memtable.batches()) == 1  # the reader made one batch of the three writes
    kept = memtable.after(1)
    assert kept.sorted().column("v").to_pylist() == [2, 3]
    assert (kept.min_seq, kept.max_seq) == (2, 3)
    for seq in range(4, 4 + PENDING_MAX_ROWS):
        memtable.append_values([[seq * 10], [seq]], seq)
    # Enough values held make a batch without a reader; its size is the batch's own.
    assert memtable._pending_seqs == []
    assert memtable.nbytes == sum(b.get_total_buffer_size() for b in memtable.batches())
    seqs = pa.concat_arrays([b.column(SEQ) for b in memtable.batches()]).to_pylist()
    assert seqs == list(range(1, 4 + PENDING_MAX_ROWS))


def test_sigkill_loses_no_acknowledged_plain_row(tmp_path: Path) -> None:
    data_dir = str(tmp_path / "db")
    kills = kill_repeatedly(
        "tests.engine.plain_crash_writer",
        data_dir,
        KILLS,
        random.Random(20261127),
        0.5,
        lambda k: range(k * IDS, k * IDS + 1 + k % IDS),
    )
    for kill, acked in kills:
        engine = open_standalone(data_dir, flush_on_close=kill % 2 == 0)
        try:
            table = engine.read_all("crash", columns=["id", "v", "host"])
        finally:
            engine.close()
        assert_each_once(kill, table.column("id").to_pylist(), acked)
        for row in table.to_pylist():
            assert row["v"] == row["id"] / 2 and row["host"] == f"h{row['id'] % HOSTS}", row


def test_joined_plain_writes_leave_each_missing_column_null() -> None:
    a = PlainRows.of([("ts", ColumnType.TIMESTAMP, [1]), ("v", ColumnType.INT64, [5])])
    b = PlainRows.of([("ts", ColumnType.TIMESTAMP, [2, 3]), ("s", ColumnType.STRING, ["x", None])])
    assert a is not None and b is not None
    joined = PlainRows.join([a, b])
    assert joined is not None and joined.num_rows == 3
    assert joined.arrow().to_pydict() == {
        "ts": a.arrow().column(0).to_pylist() + b.arrow().column(0).to_pylist(),
        "v": [5, None, None],
        "s": [None, "x", None],
    }
    other = PlainRows.of([("ts", ColumnType.TIMESTAMP, [4]), ("v", ColumnType.DOUBLE, [0.5])])
    assert other is not None
    assert PlainRows.join([a, other]) is None  # v of two types: written one by one


def test_untagged_rows_get_the_series_id_their_table_gives(engine: Engine) -> None:
    for name in ("old", "new"):
        version = TSID_ZERO_UNTAGGED if name == "new" else 1
        engine.create_table(
            name,
            Schema.build(
                [
                    Column("ts", ColumnType.TIMESTAMP),
                    Column("host", ColumnType.STRING, is_tag=True),
                    Column("v", ColumnType.INT64),
                ],
                timestamp_key="ts",
                tsid_version=version,
            ),
        )
        table = engine.table(name)
        rows = PlainRows.of(
            [("ts", ColumnType.TIMESTAMP, [1, 2]), ("host", ColumnType.STRING, ["a", None])]
        )
        assert rows is not None
        assert table.write_rows(rows) == 2
        arrow = conform(name, table.info.schema, rows.arrow(), max_bytes=1 << 20)
        got = engine.read_all(name).sort_by("ts")
        assert got.column("tsid").to_pylist() == arrow.column("tsid").to_pylist()
        assert (got.column("tsid")[1].as_py() == 0) is (name == "new")
