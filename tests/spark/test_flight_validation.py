"""Every field of every Flight ticket, descriptor and action body is checked against a real
server: a bad one is an InvalidArgument naming the field (carried in the Flight error's
``extra_info``, rebuilt as InvalidArgument by the gnomon client), never an internal error, and
the answer carries no Python traceback."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from gnomon.errors import InvalidArgument
from gnomon.flight.client import gnomon_error
from gnomon.flight.ticket import ScanSpec

from .conftest import Node

pytestmark = pytest.mark.integration

TABLE = "vcpu"
SCHEMA = pa.schema([("host", pa.string()), ("v", pa.float64()), ("ts", pa.timestamp("ms"))])


@pytest.fixture(scope="module")
def table(node: Node) -> str:
    node.sql(
        f"CREATE TABLE {TABLE} (host string TAG, v double, ts timestamp NOT NULL, "
        "TIMESTAMP KEY(ts))"
    )
    with node.client() as c:
        rows = pa.table({"host": ["a"], "v": [1.0], "ts": pa.array([1000], pa.timestamp("ms"))})
        c.put(TABLE, rows.to_batches(), rows.schema)
    return TABLE


def _scan(**fields: Any) -> bytes:
    return json.dumps({"table": TABLE, **fields}).encode()


#: (scan request as sent, what the message must name)
BAD_SCANS = [
    (_scan(time_range=[1, 2, 3]), "time_range"),
    (_scan(time_range=5), "time_range"),
    (_scan(time_range=["a", None]), "time_range"),
    (_scan(time_range=[5, 1]), "time_range"),
    (_scan(time_range=[0, 2**70]), "time_range"),
    (_scan(scan_id={"a": 1}), "scan_id"),
    (_scan(scan_id=7), "scan_id"),
    (_scan(version="3"), "version"),
    (_scan(version=-1), "version"),
    (_scan(version=True), "version"),
    (_scan(timestamp_ms=1.5), "timestamp_ms"),
    (_scan(columns="v"), "columns"),
    (_scan(columns=["v", 3]), "columns"),
    (_scan(columns=["v", "v"]), "named more than once: v"),
    (_scan(filters=[["v", "=", {"x": 1}]]), "filters"),
    (_scan(filters=[["v", "~", 1]]), "filters"),
    (_scan(filters=[["v", "in", 1]]), "filters"),
    (_scan(filters=[["v", "is_null", 3]]), "filters"),
    (_scan(filters={"v": 1}), "filters"),
    (_scan(filters=[["ts", ">=", "yesterday"]]), "ts"),
    (_scan(filters=[["v", "=", 2**80]]), "'v'"),
    (_scan(max_splits=0), "max_splits"),
    (_scan(min_split_rows="many"), "min_split_rows"),
    (_scan(tabel="x"), "tabel"),
    (_scan(lease_ms=0), "lease_ms"),
    (_scan(lease_ms="60000"), "lease_ms"),
    (_scan(native=["file"]), "lease_ms"),
    (_scan(lease_ms=1000, native="file"), "native"),
    (_scan(lease_ms=1000, native=["FILE://"]), "native"),
    (_scan(pin=""), "pin"),
    (_scan(pin="p", version=3), "version"),
    (json.dumps({"table": 5}).encode(), "table"),
    (json.dumps({"table": ""}).encode(), "table"),
    (b"{not json", "not JSON"),
    (b"[1, 2]", "JSON object"),
]

#: (action, body as sent, what the message must name)
BAD_ACTIONS = [
    ("reserve", {"table": TABLE, "mode": "zzz"}, "mode"),
    ("reserve", {"table": TABLE, "mode": 1}, "mode"),
    ("reserve", {"table": TABLE, "lease_ms": 0}, "lease_ms"),
    ("reserve", {"table": TABLE, "lease_ms": "600000"}, "lease_ms"),
    ("reserve", {"table": TABLE, "lease_ms": 2**70}, "lease_ms"),
    ("reserve", {"table": TABLE, "mode": "overwrite", "time_range": [1, 2, 3]}, "time_range"),
    ("reserve", {"table": TABLE, "owner": ["me"]}, "owner"),
    ("reserve", {"table": None}, "table"),
    ("commit", {"table": TABLE, "revision": "1"}, "revision"),
    ("commit", {"table": TABLE, "revision": 1, "wait_s": "soon"}, "wait_s"),
    ("commit", {"table": TABLE, "revision": 1, "wait_s": -1}, "wait_s"),
    ("commit", {"table": TABLE, "revision": 1, "attempts": "a1"}, "attempts"),
    ("commit", {"table": TABLE, "revision": 1, "attempts": [""]}, "attempts"),
    ("abort", {"table": TABLE}, "revision"),
    ("heartbeat", {"table": TABLE, "revision": 1.5}, "revision"),
    ("heartbeat", {"table": TABLE, "revision": 0}, "revision"),
    ("scan_stats", {"scan_id": 5}, "scan_id"),
    ("scan_stats", {}, "scan_id"),
    ("describe", {"table": TABLE, "extra": 1}, "extra"),
    ("describe", {}, "table"),
    ("drop_everything", {"table": TABLE}, "drop_everything"),
    ("renew", {}, "pin"),
    ("release", {"pin": 5}, "pin"),
    ("route", {"table": TABLE, "pin": "x"}, "pin"),
]

BAD_PUTS = [
    (json.dumps({"table": TABLE, "revision": "1"}).encode(), "revision"),
    (json.dumps({"table": TABLE, "revision": 0}).encode(), "revision"),
    (json.dumps({"table": TABLE, "mode": "append"}).encode(), "mode"),
    (json.dumps({"revision": 1}).encode(), "table"),
    (json.dumps({"table": TABLE, "revision": 1, "attempt": ""}).encode(), "attempt"),
    (json.dumps({"table": TABLE, "attempt": "a1"}).encode(), "attempt"),
]


def _rejected(call: Callable[[], Any], field: str) -> None:
    """``call`` fails with an InvalidArgument naming ``field``, with no traceback in it."""
    with pytest.raises(flight.FlightError) as caught:
        call()
    e = caught.value
    text = str(e)
    assert "Traceback" not in text and "internal error" not in text, text
    assert json.loads(e.extra_info) == {
        "error": "InvalidArgument",
        "status": 400,
        "retryable": False,
    }
    err = gnomon_error(e)
    assert type(err) is InvalidArgument and field in err.message, err.message


def _rows(c: flight.FlightClient) -> int:
    info = c.get_flight_info(flight.FlightDescriptor.for_command(ScanSpec(TABLE).to_json()))
    return sum(c.do_get(ep.ticket).read_all().num_rows for ep in info.endpoints)


@pytest.mark.parametrize(("raw", "field"), BAD_SCANS)
def test_a_bad_ticket_is_an_invalid_argument(
    node: Node, table: str, raw: bytes, field: str
) -> None:
    with flight.connect(f"grpc+tcp://{node.flight}") as c:
        _rejected(lambda: c.do_get(flight.Ticket(raw)).read_all(), field)
        _rejected(lambda: c.get_flight_info(flight.FlightDescriptor.for_command(raw)), field)
        # get_schema names the field too, but pyarrow's get_schema callback adds a traceback
        # to every error (it does not take a FlightError apart as the other calls do).
        with pytest.raises(pa.ArrowException, match=field):
            c.get_schema(flight.FlightDescriptor.for_command(raw))
        assert _rows(c) == 1


@pytest.mark.parametrize(("kind", "body", "field"), BAD_ACTIONS)
def test_a_bad_action_is_an_invalid_argument(
    node: Node, table: str, kind: str, body: dict[str, Any], field: str
) -> None:
    with node.client() as gc:
        before = gc.reserve(table)
        gc.abort(table, before)
    with flight.connect(f"grpc+tcp://{node.flight}") as c:
        _rejected(lambda: list(c.do_action(flight.Action(kind, json.dumps(body).encode()))), field)
    with node.client() as gc:
        with pytest.raises(InvalidArgument, match=field):
            gc.action(kind, **body)
        # Nothing was reserved by the bad requests: the next revision follows the last.
        after = gc.reserve(table)
        gc.abort(table, after)
    assert after == before + 1


@pytest.mark.parametrize("body", [b"{not json", b"[1]", b"3", b"[" * 100_000, b'{"a":' * 50_000])
def test_an_action_body_that_is_no_json_object_is_an_invalid_argument(
    node: Node, table: str, body: bytes
) -> None:
    with flight.connect(f"grpc+tcp://{node.flight}") as c:
        _rejected(lambda: list(c.do_action(flight.Action("describe", body))), "JSON")


@pytest.mark.parametrize(("raw", "field"), BAD_PUTS)
def test_a_bad_put_descriptor_is_an_invalid_argument(
    node: Node, table: str, raw: bytes, field: str
) -> None:
    rows = pa.table({"host": ["b"], "v": [2.0], "ts": pa.array([2000], pa.timestamp("ms"))})

    def put() -> None:
        writer, reader = c.do_put(flight.FlightDescriptor.for_command(raw), SCHEMA)
        with writer:
            writer.write_table(rows.cast(SCHEMA))
            writer.done_writing()
            reader.read()

    with flight.connect(f"grpc+tcp://{node.flight}") as c:
        _rejected(put, field)
        assert _rows(c) == 1


def test_a_valid_request_still_works(node: Node, table: str) -> None:
    with node.client() as c:
        got = c.read_all(ScanSpec(table, filters=[("ts", ">=", 0), ("v", "in", [1.0, None])]))
        spec = ScanSpec(table, columns=["v"]).to_json()
        schema = c._client.get_schema(flight.FlightDescriptor.for_command(spec)).schema
        assert schema == pa.schema([("v", pa.float64())])
        assert got.column("v").to_pylist() == [1.0]
        rev = c.reserve(table, mode="overwrite", time_range=(0, 10_000))
        assert c.commit(table, rev, wait_s=1.0) == "latest"
