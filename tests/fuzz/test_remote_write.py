"""Hostile Prometheus remote writes: bodies with invalid series (labels unsorted, repeated or
badly named, no or a bad metric name, label values too long, too many labels) beside valid
ones, protobuf that is no WriteRequest, snappy that is not snappy, and random bytes. Each is
refused whole, 400 with a reason (413 past the size limits), even from a superuser: no table
appears, and afterwards the server still serves and takes a valid write."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from urllib.parse import urlencode

import cramjam
import pytest
from hypothesis import example, given

from node.prom.wire import DECOMPRESSED_FACTOR, snappy
from tests.fuzz import strategies as fz
from tests.fuzz.conftest import FUZZ, ROOT, assert_serving, basic, sql_as
from tests.prom.conftest import WRITE_HEADERS, write_request
from tests.server.conftest import MAX_REQUEST_BYTES, Running

pytestmark = pytest.mark.unit

T_MS = 1_700_000_000_000
HEADERS = {**WRITE_HEADERS, "Authorization": basic(*ROOT)}
#: A label value of 10 MB: repeated, a small body that decompresses large; of hex digits
#: (which snappy hardly compresses), a body past the request size limit.
HUGE = 10 * 1024**2
HUGE_REPEATED = write_request([({"__name__": "fuzz_rw", "job": "x" * HUGE}, [(1, 1.0)])])
HUGE_HEX = write_request(
    [({"__name__": "fuzz_rw", "job": (b"\x9e\x37" * (HUGE // 4)).hex() + "0"}, [(1, 1.0)])]
)


def _tables(server: Running) -> list[str]:
    status, body = sql_as(server, basic(*ROOT), "SHOW TABLES")
    assert status == 200, body
    return sorted(row["Tables"] for row in body["rows"])


@pytest.fixture(scope="module")
def tables_before(server: Running) -> Iterator[list[str]]:
    yield _tables(server)


def _refusal(body: bytes) -> int:
    """The status a body no server may take gets: 413 if it, or what it says it decompresses
    to, is past the limits, else 400."""
    try:
        claimed = cramjam.snappy.decompress_raw_len(body)
    except cramjam.DecompressionError:
        claimed = 0
    if len(body) > MAX_REQUEST_BYTES or claimed > MAX_REQUEST_BYTES * DECOMPRESSED_FACTOR:
        return 413
    return 400


@pytest.mark.long
@FUZZ
@given(body=fz.remote_write_bodies)
@example(body=snappy(HUGE_REPEATED))
@example(body=snappy(HUGE_HEX))
def test_hostile_bodies_are_refused(server: Running, tables_before: list[str], body: bytes) -> None:
    status, _, answer = server.request("POST", "/api/v1/write", body, HEADERS)
    assert status == _refusal(body), (status, answer[:500])
    assert json.loads(answer)["message"], answer[:500]


def test_nothing_stored_and_still_serving(server: Running, tables_before: list[str]) -> None:
    assert _tables(server) == tables_before
    assert_serving(server)
    series = [({"__name__": "fuzz_rw_after", "job": "a"}, [(T_MS, math.inf)])]
    status, _, answer = server.request(
        "POST", "/api/v1/write", snappy(write_request(series)), HEADERS
    )
    assert status == 204, answer
    query = urlencode({"query": "fuzz_rw_after", "time": str(T_MS // 1000)})
    status, _, answer = server.request("GET", f"/api/v1/query?{query}", None, HEADERS)
    result = json.loads(answer)["data"]["result"]
    assert (status, result) == (
        200,
        [{"metric": {"__name__": "fuzz_rw_after", "job": "a"}, "value": [T_MS // 1000, "+Inf"]}],
    ), answer
