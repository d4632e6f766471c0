"""A scan request's one wire form (node/engine/scan/wire.py): what is encoded decodes to the
same request, tickets as the Spark data source writes them (filters, no bounds) still decode,
and what cannot travel is refused or kept with the sender."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from gnomon.errors import InvalidArgument
from gnomon.flight.ticket import ScanSpec
from node.engine.bounds import Range
from node.engine.scan import ScanRequest
from node.engine.scan.wire import decode, encode
from node.engine.schema import Column, ColumnType, Schema

pytestmark = pytest.mark.unit

SCHEMA = Schema.build(
    [
        Column("host", ColumnType.STRING, is_tag=True),
        Column("v", ColumnType.DOUBLE),
        Column("n", ColumnType.INT64),
        Column("ok", ColumnType.BOOLEAN),
        Column("at", ColumnType.TIMESTAMP),
        Column("ts", ColumnType.TIMESTAMP, nullable=False),
    ],
    timestamp_key="ts",
)
ROWS = pa.table(
    {
        "host": ["a", "b", "c", None],
        "v": [1.0, 2.5, -1.0, 4.0],
        "n": [1, None, 3, 4],
        "ok": [True, False, None, True],
        "at": pa.array([10, 20, 30, 40], pa.timestamp("ms")),
        "ts": pa.array([1000, 2000, 3000, 4000], pa.timestamp("ms")),
    }
)


def _over_wire(request: ScanRequest) -> ScanRequest:
    sent = encode(request, SCHEMA, scan_id="s1")
    assert sent.local is None
    spec = ScanSpec.from_json(sent.spec.to_json())
    assert spec.scan_id == "s1"
    return decode(spec, SCHEMA).request


def test_a_request_round_trips() -> None:
    request = ScanRequest(
        "t",
        columns=["host", "v"],
        time_range=(1000, 5000),
        bounds={
            "host": Range(values=frozenset({"a", "c"})),
            "v": Range(lo=0.0, lo_inclusive=False, hi=3.0),
            "n": Range(lo=1, hi=4, hi_inclusive=False, values=frozenset({1, 3})),
            "at": Range(lo=15),
        },
        version=7,
    )
    back = _over_wire(request)
    assert back == request


def test_timestamp_key_bounds_narrow_the_time_range() -> None:
    request = ScanRequest(
        "t", time_range=(None, 5000), bounds={"ts": Range(lo=2000, lo_inclusive=False)}
    )
    back = _over_wire(request)
    assert back.time_range == (2001, 5000)
    assert back.bounds is None


def test_a_predicate_travels_and_keeps_the_same_rows() -> None:
    predicate = (pc.field("v") > 0.0) & pc.field("host").is_valid()
    sent = encode(ScanRequest("t", columns=["ts"], predicate=predicate), SCHEMA)
    assert sent.local is None and sent.spec.predicate is not None
    received = decode(ScanSpec.from_json(sent.spec.to_json()), SCHEMA)
    read = received.request.columns
    assert read is not None and "ts" in read
    batches = received.answer(ROWS.select(read).to_batches())
    got = pa.Table.from_batches(list(batches))
    assert got.column_names == ["ts"]
    assert got.column("ts").to_pylist() == ROWS.filter(predicate).column("ts").to_pylist()


def test_a_predicate_that_cannot_travel_stays_with_the_sender() -> None:
    predicate = pc.utf8_length(pc.field("host")) > 0
    sent = encode(ScanRequest("t", columns=["ts"], predicate=predicate), SCHEMA)
    assert sent.spec.predicate is None and sent.local is not None
    assert sent.spec.columns == ["ts", "host"]
    got = pa.Table.from_batches(list(sent.answer(ROWS.select(["ts", "host"]).to_batches())))
    assert got.column_names == ["ts"] and got.num_rows == 3


def test_spark_filters_decode_as_bounds_where_bounds_hold_them() -> None:
    """A ticket as the Spark data source writes it: its comparisons prune as bounds, what
    bounds cannot say stays a predicate, and both keep the rows the filters keep."""
    raw = (
        b'{"table":"t","columns":["ts"],"filters":[["host","in",["a","b",null]],'
        b'["v",">=",1],["n","!=",2],["ok","=",true],["ts","<",3500],["at","in",[10,40]]]}'
    )
    request = decode(ScanSpec.from_json(raw), SCHEMA).request
    assert request.time_range == (None, 3500)
    assert request.bounds == {"v": Range(lo=1.0), "at": Range(values=frozenset({10, 40}))}
    assert request.predicate is not None
    rows = ROWS.filter(request.predicate)
    at, ts = (rows.column(c).cast(pa.int64()).to_pylist() for c in ("at", "ts"))
    v, bounds = rows.column("v").to_pylist(), request.bounds
    kept = [
        host
        for host, *row in zip(rows.column("host").to_pylist(), v, at, ts, strict=True)
        if bounds["v"].admits(row[0])
        and bounds["at"].admits(row[1])
        and Range(hi=3499).admits(row[2])
    ]
    assert kept == ["a"]


def test_an_old_ticket_without_bounds_decodes() -> None:
    raw = b'{"table":"t","columns":["host"],"time_range":[null,2000],"version":3}'
    request = decode(ScanSpec.from_json(raw), SCHEMA).request
    assert request == ScanRequest("t", columns=["host"], time_range=(None, 2000), version=3)


def test_what_does_not_travel_is_refused() -> None:
    with pytest.raises(InvalidArgument, match="ordered"):
        encode(ScanRequest("t", order="asc"), SCHEMA)
    with pytest.raises(InvalidArgument, match="no column"):
        decode(ScanSpec("t", columns=["nope"]), SCHEMA)
    with pytest.raises(InvalidArgument, match="does not fit"):
        decode(ScanSpec("t", filters=[("n", "=", "x")]), SCHEMA)
