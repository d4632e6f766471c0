"""The Arrow form one table's part of a line-protocol write travels in to the table's owner:
tags, fields of every type, nulls and the timestamps come back as they were decoded, from
both line-protocol parsers; what is not of that form is refused, naming the problem."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from gnomon.errors import InvalidArgument
from node.cluster import rows_wire
from node.engine.schema import ColumnType
from node.ingest import line_protocol
from node.ingest.rows import TableRows

pytestmark = pytest.mark.unit

#: A value of each column type, for one row (None: a null).
VALUES: dict[ColumnType, Any] = {
    ColumnType.DOUBLE: 1.5,
    ColumnType.FLOAT: 2.5,
    ColumnType.STRING: "x y",
    ColumnType.VARBINARY: b"\x00\xff",
    ColumnType.BOOLEAN: True,
    ColumnType.DATE: 19000,
    ColumnType.INT8: -8,
    ColumnType.INT16: -16,
    ColumnType.INT32: -32,
    ColumnType.INT64: -(2**62),
    ColumnType.UINT8: 8,
    ColumnType.UINT16: 16,
    ColumnType.UINT32: 32,
    ColumnType.UINT64: 2**63 + 1,
    ColumnType.TIMESTAMP: 1700000000123,
}


def _round_trip(rows: TableRows) -> TableRows:
    # Through the IPC stream a Flight put sends, as the owner reads it.
    sink = pa.BufferOutputStream()
    data = rows_wire.encode(rows)
    with pa.ipc.new_stream(sink, data.schema) as writer:
        writer.write_table(data, max_chunksize=2)
    return rows_wire.decode(rows.table, pa.ipc.open_stream(sink.getvalue()).read_all())


def _described(rows: TableRows) -> tuple[list[int], dict[str, tuple[bool, ColumnType, list[Any]]]]:
    n = rows.num_rows
    return list(rows.timestamps), {
        name: (c.is_tag, c.type, c.array(n).to_pylist()) for name, c in rows.columns.items()
    }


def test_every_type_tags_fields_and_nulls_come_back() -> None:
    rows = TableRows("m")
    rows.timestamps = [1, 2, 3]
    rows.column("host", is_tag=True, type=ColumnType.STRING).put(0, "a")
    rows.column("dc", is_tag=True, type=ColumnType.STRING).put(2, "eu")
    rows.column("n", is_tag=True, type=ColumnType.INT64).put(1, 7)
    for typ, value in VALUES.items():
        rows.column(f"f_{typ.value}", is_tag=False, type=typ).put(1, value)
    back = _round_trip(rows)
    assert back.table == "m"
    assert _described(back) == _described(rows)
    assert back.columns["host"].array(3).to_pylist() == ["a", None, None]
    assert back.columns["f_uint64"].array(3).to_pylist() == [None, 2**63 + 1, None]


def test_rows_of_both_line_protocol_parsers_come_back() -> None:
    general = 'cpu,host=a,dc=eu usage=1.5,n=3i,u=4u,ok=true,msg="hi" 1000\ncpu,host=b v=2 2000'
    lines = [f"disk,host=h{i % 3} used={i}.5,free={i}i {i * 1_000_000}" for i in range(60)]
    uniform = line_protocol.parse("\n".join(lines))
    assert any(c.built is not None for c in uniform[0].columns.values())
    for tables in (line_protocol.parse(general), uniform):
        for rows in tables:
            assert _described(_round_trip(rows)) == _described(rows)


def test_a_row_set_without_columns_or_rows_comes_back() -> None:
    empty = TableRows("e")
    assert _described(_round_trip(empty)) == ([], {})


def test_a_value_that_does_not_fit_its_type_names_table_and_column() -> None:
    rows = TableRows("m")
    rows.timestamps = [1]
    rows.column("v", is_tag=False, type=ColumnType.INT8).put(0, 1000)
    with pytest.raises(InvalidArgument, match="table 'm', column 'v'"):
        rows_wire.encode(rows)


def _table(fields: list[pa.Field[Any]], arrays: list[pa.Array[Any]]) -> pa.Table:
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


TS = pa.field("t", pa.timestamp("ms"), metadata={rows_wire.KIND: rows_wire.TIMESTAMPS})


def _meta(kind: bytes, typ: bytes) -> dict[bytes, bytes]:
    return {rows_wire.KIND: kind, rows_wire.TYPE: typ}


@pytest.mark.parametrize(
    ("fields", "arrays", "problem"),
    [
        ([pa.field("t", pa.int64())], [pa.array([1])], "start with the timestamps"),
        ([TS.with_type(pa.timestamp("s"))], [pa.array([1], pa.timestamp("s"))], "timestamps must"),
        ([TS], [pa.array([1, None], pa.timestamp("ms"))], "1 rows have no timestamp"),
        (
            [TS, pa.field("v", pa.float64())],
            [pa.array([1], pa.timestamp("ms")), pa.array([1.0])],
            "gnomon.kind must be tag or field",
        ),
        (
            [TS, pa.field("v", pa.float64(), metadata=_meta(b"field", b"real-ish"))],
            [pa.array([1], pa.timestamp("ms")), pa.array([1.0])],
            "gnomon.type names no column type",
        ),
        (
            [TS, pa.field("v", pa.int32(), metadata=_meta(b"field", b"double"))],
            [pa.array([1], pa.timestamp("ms")), pa.array([1], pa.int32())],
            "values are int32, not the double",
        ),
        (
            [
                TS,
                pa.field("v", pa.float64(), metadata=_meta(b"field", b"double")),
                pa.field("v", pa.float64(), metadata=_meta(b"field", b"double")),
            ],
            [pa.array([1], pa.timestamp("ms")), pa.array([1.0]), pa.array([2.0])],
            "'v' is given twice",
        ),
    ],
)
def test_what_is_not_of_the_form_is_refused(
    fields: list[pa.Field[Any]], arrays: list[pa.Array[Any]], problem: str
) -> None:
    with pytest.raises(InvalidArgument, match=problem):
        rows_wire.decode("m", _table(fields, arrays))
