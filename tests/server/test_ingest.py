"""Decoding of write requests (HoraeDB WriteTableRequest, InfluxDB line protocol) and the
auto-create / add-column path into a real engine."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from gnomon.errors import InvalidArgument
from gnomon.proto import storage_pb2 as pb
from node.backends import open_standalone
from node.engine.engine import Engine
from node.engine.schema import Column, ColumnType, Schema
from node.ingest import line_protocol
from node.ingest.horaedb import decode_table_request
from node.ingest.line_uniform import parse_uniform
from node.ingest.writer import Ingestor

pytestmark = pytest.mark.unit


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    e = open_standalone(str(tmp_path / "db"), wal_sync="never")
    yield e
    e.close()


def _table_request() -> pb.WriteTableRequest:
    # Two series; name index 0 is the proto3 default, as the SDK leaves it off the wire.
    return pb.WriteTableRequest(
        table="m",
        tag_names=["host", "dc"],
        field_names=["v", "n", "s"],
        entries=[
            pb.WriteSeriesEntry(
                tags=[pb.Tag(name_index=0, value=pb.Value(string_value="a"))],
                field_groups=[
                    pb.FieldGroup(
                        timestamp=1000,
                        fields=[
                            pb.Field(name_index=0, value=pb.Value(float64_value=1.5)),
                            pb.Field(name_index=1, value=pb.Value(int64_value=7)),
                        ],
                    ),
                    pb.FieldGroup(
                        timestamp=2000,
                        fields=[pb.Field(name_index=2, value=pb.Value(string_value="x"))],
                    ),
                ],
            ),
            pb.WriteSeriesEntry(
                tags=[
                    pb.Tag(name_index=1, value=pb.Value(string_value="eu")),
                    pb.Tag(name_index=0, value=pb.Value(string_value="b")),
                ],
                field_groups=[
                    pb.FieldGroup(
                        timestamp=3000,
                        fields=[
                            pb.Field(name_index=0, value=pb.Value(float64_value=2.5)),
                            # An out-of-range field index is skipped, as HoraeDB does.
                            pb.Field(name_index=9, value=pb.Value(float64_value=9.0)),
                        ],
                    )
                ],
            ),
        ],
    )


def test_decode_table_request_is_columnar() -> None:
    rows = decode_table_request(_table_request())
    assert rows.timestamps == [1000, 2000, 3000]
    t = rows.arrow("timestamp")
    assert t.column_names == ["timestamp", "host", "v", "n", "s", "dc"]
    assert t.column("host").to_pylist() == ["a", "a", "b"]
    assert t.column("dc").to_pylist() == [None, None, "eu"]
    assert t.column("v").to_pylist() == [1.5, None, 2.5]
    assert t.column("n").type == pa.int64()
    assert t.column("s").to_pylist() == [None, "x", None]
    assert t.column("timestamp").type == pa.timestamp("ms")


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda r: r.entries[0].tags[0].value.Clear(), "value type is not supported"),
        (lambda r: setattr(r.entries[0].tags[0], "name_index", 5), "tag name index 5"),
        (lambda r: r.field_names.append("host"), "used both as tags and as fields"),
        (
            lambda r: (
                r.entries[1].field_groups[0].fields[0].value.CopyFrom(pb.Value(int64_value=1))
            ),
            "differs from double",
        ),
        (lambda r: setattr(r, "table", ""), "names no table"),
    ],
)
def test_decode_errors(mutate: object, message: str) -> None:
    req = _table_request()
    mutate(req)  # type: ignore[operator]
    with pytest.raises(InvalidArgument, match=message):
        decode_table_request(req)


def test_auto_create_and_add_columns(engine: Engine) -> None:
    ingest = Ingestor(engine)
    assert ingest.write(decode_table_request(_table_request())) == 3
    schema = engine.describe("m").schema
    # HoraeDB's layout: tsid, timestamp, then tags and fields in alphabetical order.
    assert schema.names == ["tsid", "timestamp", "dc", "host", "n", "s", "v"]
    assert schema.primary_key == ("tsid", "timestamp")
    assert schema.tags == ["dc", "host"]
    assert schema.column("n").type is ColumnType.INT64

    more = line_protocol.parse("m,host=c,zone=z v=4,flag=true 4000", precision="ms")
    assert ingest.write(more[0]) == 1
    schema = engine.describe("m").schema
    assert schema.names[-2:] == ["flag", "zone"]
    assert schema.column("zone").is_tag
    got = engine.read_all("m").sort_by("timestamp").to_pylist()
    assert [r["host"] for r in got] == ["a", "a", "b", "c"]
    assert got[-1]["flag"] is True and got[0]["flag"] is None


def test_type_and_kind_mismatches_are_rejected(engine: Engine) -> None:
    ingest = Ingestor(engine)
    ingest.write(line_protocol.parse("m,host=a v=1 1", precision="ms")[0])
    with pytest.raises(InvalidArgument, match=r"Value type is not same.*column:v"):
        ingest.write(line_protocol.parse("m,host=a v=1i 2", precision="ms")[0])
    with pytest.raises(InvalidArgument, match="'host' is a tag but was written as a field"):
        ingest.write(line_protocol.parse('m host="a" 2', precision="ms")[0])
    with pytest.raises(InvalidArgument, match="timestamp"):
        ingest.write(line_protocol.parse("m timestamp=1 2", precision="ms")[0])
    assert engine.read_all("m").num_rows == 1


def test_a_table_name_refused_creates_none_of_the_request(engine: Engine) -> None:
    tables = line_protocol.parse("first v=1 1\nsecond:bad v=2 1", precision="ms")
    with pytest.raises(InvalidArgument, match="invalid table name 'second:bad'"):
        Ingestor(engine).write_all(tables)
    assert engine.list_tables() == []


def test_existing_table_with_own_timestamp_column(engine: Engine) -> None:
    engine.create_table(
        "t",
        Schema.build(
            [
                Column("host", ColumnType.STRING, is_tag=True),
                Column("value", ColumnType.DOUBLE),
                Column("ts", ColumnType.TIMESTAMP),
            ],
            timestamp_key="ts",
        ),
    )
    Ingestor(engine).write(line_protocol.parse("t,host=a value=2 5", precision="s")[0])
    row = engine.read_all("t").to_pylist()[0]
    assert row["value"] == 2.0
    assert int(pa.scalar(row["ts"], pa.timestamp("ms")).cast(pa.int64()).as_py()) == 5000


# -- line protocol --------------------------------------------------------------------------------


def test_line_protocol_types_escapes_and_precision() -> None:
    text = "\n".join(
        [
            "# a comment",
            "",
            r"cpu\ load,host=server\ 1,dc=eu\,west "
            r'f=1.5,i=-3i,u=7u,s="say \"hi\" \\ ok",b=t 1700000000',
            'cpu\\ load,host=server\\ 1 f=2,b=FALSE,s="with space, comma=" 1700000001',
            "mem free=10i",
        ]
    )
    tables = {r.table: r for r in line_protocol.parse(text, precision="s", now_ms=lambda: 42)}
    cpu = tables["cpu load"].arrow("timestamp")
    assert cpu.column("timestamp").cast(pa.int64()).to_pylist() == [1700000000000, 1700000001000]
    assert cpu.column("host").to_pylist() == ["server 1", "server 1"]
    assert cpu.column("dc").to_pylist() == ["eu,west", None]
    assert cpu.column("f").to_pylist() == [1.5, 2.0]
    assert cpu.column("i").type == pa.int64() and cpu.column("i").to_pylist() == [-3, None]
    assert cpu.column("u").type == pa.uint64()
    assert cpu.column("s").to_pylist() == ['say "hi" \\ ok', "with space, comma="]
    assert cpu.column("b").to_pylist() == [True, False]
    mem = tables["mem"]
    assert mem.timestamps == [42]


@pytest.mark.parametrize(
    ("precision", "ts", "ms"),
    [("ns", 1_500_000_000, 1500), ("us", 1_500_000, 1500), ("ms", 1500, 1500), ("s", 2, 2000)],
)
def test_line_protocol_precision(precision: str, ts: int, ms: int) -> None:
    rows = line_protocol.parse(f"m v=1 {ts}", precision=precision)
    assert rows[0].timestamps == [ms]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("m v=1\nm", "line 2: expected a measurement and at least one field"),
        ("m v=1\n\nm v=", "line 3: field has no value"),
        ("m v=abc", "line 1: invalid field value 'abc'"),
        ('m v="open', "line 1: unterminated string"),
        ("m v=1 12x", "line 1: invalid timestamp '12x'"),
        ("m,host v=1", "line 1: invalid tag 'host'"),
        ("m v=1\nm v=1i", "line 2: .*'v': value type int64 differs from double"),
        ("m,v=a v=1", "line 1: key 'v' is both a tag and a field"),
        ("m,v=a x=1\nm v=1", "line 2: .*'v' is used both as a tag and as a field"),
        ("m,h=a,h=b v=1", "line 1: duplicate tag key 'h'"),
        ("m v=1,w=2,v=3", "line 1: duplicate field key 'v'"),
        ('m s="a",s="a"', "line 1: duplicate field key 's'"),
        ("m v=1 1 2", "line 1: too many"),
        ("m v=-1u", "line 1: unsigned integer field value '-1u' is negative"),
        ("m v=1,", "line 1: trailing ','"),
        ("m v=1 1\nm v=1 9223372036854775808", "line 2: timestamp '9223372036854775808' is out"),
    ],
)
def test_line_protocol_errors_name_the_line(text: str, message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        line_protocol.parse(text, precision="ms")


def test_line_protocol_bad_precision() -> None:
    with pytest.raises(InvalidArgument, match="invalid precision 'x'"):
        line_protocol.parse("m v=1", precision="x")


# -- the vectorised line-protocol parser ----------------------------------------------------------

UNIFORM = [
    "cpu,host=a,dc=eu f=1.5,i=-3i,u=7u,b=t 1700000001",
    "cpu,host=b,dc=us f=-2e3,i=4i,u=0u,b=FALSE 1700000999",
    "# a comment between points",
    "",
    "cpu,host=a,dc=eu f=3,i=0i,u=18446744073709551615u,b=True -1500000",
]


def _general(text: str, precision: str = "ns") -> pa.Table:
    mul, div = line_protocol.PRECISIONS[precision]
    (rows,) = line_protocol.parse_general(text, mul=mul, div=div, default_ts=42)
    return rows.arrow("timestamp")


@pytest.mark.parametrize("precision", ["ns", "us", "ms", "s"])
def test_uniform_bodies_parse_as_the_general_parser_does(precision: str) -> None:
    text = "\n".join(UNIFORM)
    mul, div = line_protocol.PRECISIONS[precision]
    rows = parse_uniform(text, mul=mul, div=div, default_ts=42)
    assert rows is not None and len(rows) == 1 and rows[0].table == "cpu"
    got = rows[0].arrow("timestamp")
    assert got.equals(_general(text, precision))
    assert got.column("u").to_pylist()[-1] == 2**64 - 1


def test_uniform_bodies_without_timestamps_or_tags() -> None:
    text = "mem free=1i,used=2i\nmem free=3i,used=4i\n"
    rows = parse_uniform(text, mul=1, div=1, default_ts=42)
    assert rows is not None and rows[0].timestamps == [42, 42]
    assert rows[0].arrow("timestamp").equals(_general(text))


@pytest.mark.parametrize(
    "text",
    [
        "cpu,host=a f=1 1\nmem,host=a f=1 1",  # two measurements
        "cpu,host=a f=1 1\ncpu,dc=a f=1 1",  # other tag keys
        "cpu,host=a f=1 1\ncpu,host=a f=1",  # a timestamp missing
        "cpu,host=a f=1 1\ncpu,host=a f=1,g=2 1",  # another field
        "cpu,host=a f=1 1\ncpu,host=a f=2i 1",  # another type
        "cpu,host=a f=1 1\ncpu,host=a f=nan 1",  # NaN is refused by the general parser
        "cpu,host=a i=1i 1\ncpu,host=a i=1.5i 1",  # not an integer
        "cpu,host=a u=1u 1\ncpu,host=a u=-1u 1",  # negative unsigned
        "cpu,host=a f=1 1\ncpu,host=a f=1 1\r",  # CRLF
        "cpu,host=a f=1 1\ncpu,host=a  f=1 1",  # two spaces
        "cpu,host=a f=1 1\ncpu host=a,f=1 1",  # separators swapped
        'cpu,host=a s="x" 1',  # strings and escapes take the general path
        r"cpu,host=a\ b f=1 1",
        "cpu,host=a,host=b f=1 1",  # a repeated tag
        "cpu,host=a host=1 1",  # a tag also a field
        "cpu,host=a=b f=1 1",
        "cpu,host=a f=1 1 2",
        "cpu,host=a f=1 1\ncpu,host=a f=1 9223372036854775808",  # out of range in ms
    ],
)
def test_bodies_of_other_shapes_are_left_to_the_general_parser(text: str) -> None:
    assert parse_uniform(text, mul=1, div=1, default_ts=42) is None


def test_uniform_bodies_with_non_ascii_names_and_loose_numbers() -> None:
    text = (
        "température,hôte=sérveur_é usage=1.5,état=+2 10\ntempérature,hôte=b usage=1.,état=3e2 20"
    )
    rows = parse_uniform(text, mul=1, div=1, default_ts=0)
    assert rows is not None
    assert rows[0].arrow("timestamp").equals(_general(text, "ms"))
