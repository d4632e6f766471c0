"""Statement text and values in process: splitting, ``$n`` substitution, parameters as
literals, values in PostgreSQL's binary formats."""

from __future__ import annotations

import datetime as dt
import struct

import pyarrow as pa
import pytest

from gnomon.errors import InvalidArgument
from node.server.pgwire import params, statements, types
from node.sql import pg_functions

pytestmark = pytest.mark.unit


def test_split_keeps_semicolons_in_strings_and_comments() -> None:
    sql = "SELECT ';' AS a; -- x; y\nSELECT \"b;\" FROM t;; /* ; */ SELECT 3"
    assert statements.split(sql) == [
        "SELECT ';' AS a",
        ' -- x; y\nSELECT "b;" FROM t',
        " /* ; */ SELECT 3",
    ]


def test_substitute_leaves_quoted_dollars() -> None:
    sql = "SELECT '$1', $2 FROM t WHERE a = $1 -- $3"
    assert statements.count_params(sql) == 2
    got = statements.substitute(sql, lambda i: f"<{i}>")
    assert got == "SELECT '$1', <1> FROM t WHERE a = <0> -- $3"


def test_parameters_as_literals() -> None:
    assert types.literal(None, pg_functions.INT8, False) == "NULL"
    assert types.literal(b"o'k", types.UNKNOWN, False) == "'o''k'"
    assert types.literal(b"42", pg_functions.INT4, False) == "42"
    assert types.literal(struct.pack(">q", -7), pg_functions.INT8, True) == "-7"
    assert types.literal(b"\x01", pg_functions.BOOL, True) == "TRUE"
    micros = struct.pack(">q", 86_400_000_000)
    assert types.literal(micros, pg_functions.TIMESTAMP, True) == "TIMESTAMP '2000-01-02 00:00:00'"
    with pytest.raises(InvalidArgument):
        types.literal(b"1; DROP TABLE t", pg_functions.INT8, False)
    with pytest.raises(InvalidArgument):
        types.literal(b"\x00", pg_functions.INT8, True)


def test_binary_values() -> None:
    ts = types.pg_type(pa.timestamp("ms"))
    assert ts.oid == pg_functions.TIMESTAMP
    assert ts.binary(dt.datetime(2000, 1, 1, 0, 0, 1)) == struct.pack(">q", 1_000_000)
    assert ts.text(dt.datetime(2023, 11, 14, 22, 13, 20)) == b"2023-11-14 22:13:20"
    tz = types.pg_type(pa.timestamp("us", "UTC"))
    assert tz.text(dt.datetime(2000, 1, 1, tzinfo=dt.UTC)) == b"2000-01-01 00:00:00+00"
    numeric = types.pg_type(pa.uint64())
    # 2**64 - 1 = 1844 6744 0737 0955 1615 in base-10000 digits.
    assert numeric.binary(2**64 - 1) == struct.pack(
        ">hhhh5h", 5, 4, 0, 0, 1844, 6744, 737, 955, 1615
    )
    assert types.pg_type(pa.binary()).text(b"\x01\xff") == b"\\x01ff"
    assert types.pg_type(pa.float64()).text(float("nan")) == b"NaN"


def test_parameter_types_from_the_columns_compared() -> None:
    columns = {"host": "string", "cores": "bigint", "ts": "timestamp"}
    sql = 'SELECT * FROM cpu WHERE "host" = $1 AND $2 < cores AND ts >= $3 AND $4 IS NULL'
    got = params.infer(sql, [0, 0, 0, 0], columns)
    assert got == [pg_functions.TEXT, pg_functions.INT8, pg_functions.TIMESTAMP, pg_functions.TEXT]
    # What the client specified stays.
    assert params.infer(sql, [pg_functions.INT4, 0, 0, 0], columns)[0] == pg_functions.INT4
    assert params.tables_in('SELECT 1 FROM a JOIN "b" ON x = y') == ["a", "b"]
