"""Hostile HTTP requests: every /sql body, line protocol body and header set gets a clean
answer (a success, a 4xx, or 503/504 with a JSON message), never a 500, a hang or a crash."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz import strategies as fz
from tests.fuzz.conftest import FUZZ, FUZZER, assert_serving, basic
from tests.server.conftest import Running

pytestmark = pytest.mark.integration

#: Statuses a server under attack may answer: what the request got wrong, or "busy" and
#: "took too long", never an internal error.
CLEAN_ERRORS = {503, 504}


def _clean(status: int, body: bytes) -> None:
    assert status < 500 or status in CLEAN_ERRORS, (status, body[:500])
    if status >= 400 and body:
        assert "message" in json.loads(body), body[:500]


@FUZZ
@given(body=fz.sql_bodies)
def test_sql_bodies(server: Running, body: bytes) -> None:
    headers = {"Content-Type": "application/json", "Authorization": basic(*FUZZER)}
    status, _, answer = server.request("POST", "/sql", body, headers)
    _clean(status, answer)


@FUZZ
@given(text=fz.line_protocol, precision=st.sampled_from(["ms", "s", "ns", "h", "x", ""]))
def test_line_protocol(server: Running, text: str, precision: str) -> None:
    status, _, answer = server.request(
        "POST",
        f"/influxdb/v1/write?db=public&precision={precision}",
        text.encode("utf-8", "surrogatepass"),
        {"Authorization": basic(*FUZZER)},
    )
    _clean(status, answer)


@FUZZ
@given(
    headers=fz.headers,
    path=st.sampled_from(
        ["/sql", "/influxdb/v1/write?db=public", "/influxdb/v1/query", "/metrics", "/x"]
    ),
    body=st.one_of(st.just(b'{"query": "SELECT 1"}'), st.binary(max_size=64)),
)
def test_headers(server: Running, headers: dict[str, str], path: str, body: bytes) -> None:
    # A fuzzed Transfer-Encoding or Expect header is http.client's to refuse before sending.
    headers = {k: v for k, v in headers.items() if k not in ("Transfer-Encoding", "Expect")}
    status, _, answer = server.request("POST", path, body, headers)
    _clean(status, answer)


def test_still_serving(server: Running) -> None:
    assert_serving(server)
