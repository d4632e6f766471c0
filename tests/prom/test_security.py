"""The Prometheus endpoints are authenticated and authorised as every other endpoint."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest

from node.prom.wire import snappy
from tests.prom.conftest import WRITE_HEADERS, write_request
from tests.security.conftest import READER, ROOT, Secured, basic, secured  # noqa: F401

pytestmark = pytest.mark.integration

T0 = 1_700_000_000_000
BODY = snappy(write_request([({"__name__": "sec_metric", "job": "a"}, [(T0, 1.0)])]))
QUERY = "/api/v1/query?" + urlencode({"query": "sec_metric", "time": str(T0 // 1000)})


def test_credentials_are_required(secured: Secured) -> None:  # noqa: F811
    status, headers, _ = secured.running.request("POST", "/api/v1/write", BODY, WRITE_HEADERS)
    assert status == 401 and "WWW-Authenticate" in headers
    status, _, _ = secured.running.request("GET", QUERY)
    assert status == 401


def test_writes_and_queries_run_as_their_caller(secured: Secured) -> None:  # noqa: F811
    reader = {"Authorization": f"Bearer {secured.token}"}
    status, _, _ = secured.running.request(
        "POST", "/prom/v1/write", BODY, {**WRITE_HEADERS, **reader}
    )
    assert status == 403
    root = {"Authorization": basic(*ROOT)}
    status, _, body = secured.running.request(
        "POST", "/api/v1/write", BODY, {**WRITE_HEADERS, **root}
    )
    assert status == 204, body
    status, _, body = secured.running.request("GET", QUERY, headers=root)
    assert status == 200 and b'"1"' in body, body
    status, _, body = secured.running.request(
        "GET", QUERY, headers={"Authorization": basic(*READER)}
    )
    assert status == 403 and b'"forbidden"' in body, body
