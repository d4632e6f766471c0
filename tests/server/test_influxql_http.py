"""The InfluxQL query API (/influxdb/v1/query) of a real standalone gnomon, called as its
users call it: InfluxDB 1.x's Python client, and plain GET and form POST requests."""

from __future__ import annotations

import json
import urllib.parse

import pytest
from influxdb import InfluxDBClient

from tests.server.conftest import Running

pytestmark = pytest.mark.integration

LINES = (
    "iq_cpu,host=a usage=10.5,n=1i 1700000000000\n"
    "iq_cpu,host=a usage=20.5,n=2i 1700000060000\n"
    "iq_cpu,host=b usage=30.0,n=3i 1700000000000\n"
)


def _write(gnomon: Running) -> None:
    status, _, _ = gnomon.request(
        "POST", "/influxdb/v1/write?db=public&precision=ms", LINES.encode(), {}
    )
    assert status == 204


def test_the_influxdb_client_reads_what_line_protocol_wrote(gnomon: Running) -> None:
    _write(gnomon)
    client = InfluxDBClient(
        "127.0.0.1", gnomon.http_port, database="public", path="influxdb/v1", timeout=30
    )
    try:
        result = client.query("SELECT mean(usage), count(n) FROM iq_cpu GROUP BY host")
        assert list(result.get_points(tags={"host": "a"})) == [
            {"time": "1970-01-01T00:00:00Z", "mean": 15.5, "count": 2}
        ]
        assert list(result.get_points(tags={"host": "b"})) == [
            {"time": "1970-01-01T00:00:00Z", "mean": 30.0, "count": 1}
        ]
        raw = client.query("SELECT usage FROM iq_cpu WHERE host = 'a'", epoch="ms")
        assert list(raw.get_points()) == [
            {"time": 1700000000000, "usage": 10.5},
            {"time": 1700000060000, "usage": 20.5},
        ]
        assert {"name": "iq_cpu"} in client.get_list_measurements()
    finally:
        client.close()


def test_get_and_form_post_answer_alike(gnomon: Running) -> None:
    _write(gnomon)
    params = {"q": "SELECT max(usage) FROM iq_cpu WHERE time >= 1700000000000ms", "epoch": "ms"}
    status, headers, got = gnomon.request(
        "GET", f"/influxdb/v1/query?{urllib.parse.urlencode(params)}"
    )
    assert status == 200
    assert headers["Content-Type"].startswith("application/json")
    expected = {
        "results": [
            {
                "statement_id": 0,
                "series": [
                    {
                        "name": "iq_cpu",
                        "columns": ["time", "max"],
                        "values": [[1700000000000, 30.0]],
                    }
                ],
            }
        ]
    }
    assert json.loads(got) == expected
    status, _, posted = gnomon.request(
        "POST",
        "/influxdb/v1/query",
        urllib.parse.urlencode(params).encode(),
        {"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert (status, json.loads(posted)) == (200, expected)


def test_refusals(gnomon: Running) -> None:
    status, _, body = gnomon.request("GET", "/influxdb/v1/query?q=SELEC+x&db=public")
    assert status == 400 and b"expected SELECT or SHOW" in body
    status, _, body = gnomon.request("GET", "/influxdb/v1/query?q=SHOW+MEASUREMENTS&db=other")
    assert status == 400 and b"'other' does not exist" in body
    status, _, body = gnomon.request("DELETE", "/influxdb/v1/query?q=SHOW+MEASUREMENTS")
    assert status == 405
