"""Remote-write bodies that are not valid are refused with 400 and a reason, and nothing of
them is stored."""

from __future__ import annotations

import json

import pytest

from node.prom.wire import snappy
from tests.prom.conftest import Prom, write_request

pytestmark = pytest.mark.integration

T0 = 1_700_000_000_000
GOOD = ({"__name__": "bad_body", "job": "a"}, [(T0, 1.0)])


def _refused(prom: Prom, body: bytes, reason: str) -> None:
    status, text = prom.write_raw(body)
    assert status == 400, text
    assert reason in json.loads(text)["message"]
    status, doc = prom.running.sql("SELECT count(*) AS n FROM bad_body")
    # Nothing was stored: the table was not even created.
    assert status == 404, doc


def test_bad_snappy(prom: Prom) -> None:
    _refused(prom, b"\xff\xff\xff\xff\xff not snappy", "snappy")


def test_bad_protobuf(prom: Prom) -> None:
    _refused(prom, snappy(b"\x0a\xff\xff\xff\x0f garbage"), "WriteRequest")


@pytest.mark.parametrize(
    ("labels", "reason"),
    [
        ([("job", "a"), ("__name__", "bad_body")], "not sorted"),
        ([("__name__", "bad_body"), ("job", "a"), ("job", "b")], "repeated"),
        ([("__name__", ""), ("job", "a")], "no metric name"),
        ([("job", "a")], "no metric name"),
        ([("__name__", "bad_body"), ("job", "x" * 10 * 1024**2)], "longer than"),
        ([("__name__", "bad_body"), ("timestamp", "1")], "reserved"),
        ([("__name__", "bad-body")], "invalid metric name"),
        # A valid metric name that is no table name.
        ([("__name__", "bad_body:rate5m")], "invalid table name"),
    ],
)
def test_bad_series_refuse_the_whole_request(
    prom: Prom, labels: list[tuple[str, str]], reason: str
) -> None:
    body = write_request([GOOD, (labels, [(T0, 2.0)])])
    _refused(prom, snappy(body), reason)


def test_nan_values_are_stored(prom: Prom) -> None:
    assert prom.write([({"__name__": "nan_ok"}, [(T0, float("nan"))])])[0] == 204
    assert prom.running.sql("SELECT count(*) AS n FROM nan_ok")[1]["rows"] == [{"n": 1}]


def test_only_post(prom: Prom) -> None:
    status, headers, _ = prom.running.request("GET", "/api/v1/write")
    assert status == 405 and headers["Allow"] == "POST"
