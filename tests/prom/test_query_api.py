"""The Prometheus HTTP query API of a real standalone gnomon: its envelope, GET and POST
forms, the label and series endpoints, and Prometheus's error types."""

from __future__ import annotations

import json
from urllib.parse import urlencode

import pytest

from tests.prom.conftest import STALE, Prom

pytestmark = pytest.mark.integration

T0 = 1_700_000_000_000
T0_S = T0 // 1000


@pytest.fixture(scope="module", autouse=True)
def samples(prom: Prom) -> None:
    series = [
        (
            {"__name__": "api_up", "job": job, "instance": inst},
            [(T0 + i * 15_000, 1.0) for i in range(8)],
        )
        for job, inst in (("node", "a"), ("node", "b"), ("db", "c"))
    ]
    series.append(({"__name__": "api_flaky"}, [(T0, 5.0), (T0 + 15_000, STALE)]))
    status, body = prom.write(series)
    assert status == 204, body


def test_query_answers_in_prometheus_envelope(prom: Prom) -> None:
    status, doc = prom.api("/api/v1/query", query='api_up{job="node"}', time=str(T0_S + 60))
    assert status == 200
    assert doc["status"] == "success"
    data = doc["data"]
    assert isinstance(data, dict) and data["resultType"] == "vector"
    assert sorted(s["metric"]["instance"] for s in data["result"]) == ["a", "b"]
    assert all(s["value"] == [T0_S + 60, "1"] for s in data["result"])


def test_query_range_and_post_form(prom: Prom) -> None:
    form = urlencode(
        {"query": "sum by (job) (api_up)", "start": T0_S, "end": T0_S + 60, "step": "30s"}
    ).encode()
    status, _, body = prom.running.request(
        "POST",
        "/api/v1/query_range",
        form,
        {"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert status == 200, body
    result = json.loads(body)["data"]["result"]
    assert {s["metric"]["job"]: s["values"] for s in result} == {
        "db": [[T0_S, "1"], [T0_S + 30, "1"], [T0_S + 60, "1"]],
        "node": [[T0_S, "2"], [T0_S + 30, "2"], [T0_S + 60, "2"]],
    }


def test_staleness_marker_ends_a_series(prom: Prom) -> None:
    _, doc = prom.api("/api/v1/query", query="api_flaky", time=str(T0_S + 10))
    assert doc["data"]["result"][0]["value"][1] == "5"  # type: ignore[index]
    _, doc = prom.api("/api/v1/query", query="api_flaky", time=str(T0_S + 20))
    assert doc["data"]["result"] == []  # type: ignore[index]


def test_labels_values_series_metadata_buildinfo(prom: Prom) -> None:
    _, doc = prom.api("/api/v1/labels")
    assert {"__name__", "instance", "job"} <= set(doc["data"])  # type: ignore[arg-type]
    _, doc = prom.api("/api/v1/label/job/values")
    assert {"db", "node"} <= set(doc["data"])  # type: ignore[arg-type]
    _, doc = prom.api("/api/v1/label/__name__/values")
    assert {"api_up", "api_flaky"} <= set(doc["data"])  # type: ignore[arg-type]
    _, doc = prom.api("/api/v1/series", **{"match[]": 'api_up{instance=~"a|c"}'})
    assert sorted(s["instance"] for s in doc["data"]) == ["a", "c"]  # type: ignore[index, union-attr]
    assert prom.api("/api/v1/metadata") == (200, {"status": "success", "data": {}})
    _, doc = prom.api("/api/v1/status/buildinfo")
    info = doc["data"]
    assert isinstance(info, dict) and "version" in info and "features" not in info


@pytest.mark.parametrize(
    ("path", "params", "status", "kind"),
    [
        ("/api/v1/query", {"query": "sum("}, 400, "bad_data"),
        ("/api/v1/query", {}, 400, "bad_data"),
        ("/api/v1/query", {"query": "up", "time": "yesterday"}, 400, "bad_data"),
        (
            "/api/v1/query_range",
            {"query": "up", "start": "1", "end": "0", "step": "1"},
            400,
            "bad_data",
        ),
        (
            "/api/v1/query_range",
            {"query": "up", "start": "0", "end": "100000", "step": "1"},
            400,
            "bad_data",
        ),
        (
            "/api/v1/query",
            {"query": "api_up + on() api_up", "time": str(T0_S + 60)},
            422,
            "execution",
        ),
        ("/api/v1/series", {}, 400, "bad_data"),
        ("/api/v1/query", {"query": "api_up", "timeout": "soon"}, 400, "bad_data"),
        ("/api/v1/query", {"query": '{__name__=~".*"}'}, 400, "bad_data"),
    ],
)
def test_errors_have_prometheus_types(
    prom: Prom, path: str, params: dict[str, str], status: int, kind: str
) -> None:
    got, doc = prom.api(path, **params)
    assert got == status, doc
    assert doc["status"] == "error" and doc["errorType"] == kind and doc["error"]
