"""The same samples given to a real Prometheus 2.42 (backfilled with promtool) and to gnomon
(remote write); the same PromQL queries must get the same series and values from both."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from testkit import prometheus as prom_server
from tests.prom.conftest import Prom
from tests.prom.samples import T0, openmetrics, series

pytestmark = pytest.mark.integration

REL_TOL = 1e-6
#: Instant queries are asked at these times (seconds), one not on a sample's time.
TIMES = (T0 + 30 * 60 + 7, T0 + 45 * 60)
#: Range queries span this, at this step.
RANGE = {"start": str(T0 + 10 * 60), "end": str(T0 + 50 * 60), "step": "60"}

QUERIES = [
    "http_requests_total",
    'http_requests_total{job="api",code!="500"}',
    'http_requests_total{instance=~"a.*|c.*"}',
    'http_requests_total{instance!~"a.*"}',
    'count by (__name__) ({__name__=~"http_.*|temp.*"})',
    'sum by (__name__, job) ({job="api"})',
    '{__name__=~"temp.*", room="r1"}',
    'count({__name__!="temperature", job="db"})',
    "rate(http_requests_total[5m])",
    "irate(http_requests_total[1m])",
    "increase(http_requests_total[10m])",
    "resets(http_requests_total[1h])",
    "rate(http_requests_total[5m] offset 10m)",
    "sum by (job) (rate(http_requests_total[5m]))",
    "sum without (instance) (rate(http_requests_total[5m]))",
    'sum by (job) (rate(http_requests_total{code="500"}[5m]))'
    " / sum by (job) (rate(http_requests_total[5m]))",
    "rate(http_requests_total[5m]) * on (instance) group_left (version) info_metric",
    "info_metric * on (instance) group_right (version) rate(http_requests_total[5m])",
    "rate(http_requests_total[5m]) / ignoring (code) group_left"
    " sum without (code) (rate(http_requests_total[5m]))",
    'http_requests_total{code="200"} > ignoring (code) http_requests_total{code="500"}',
    'http_requests_total{code="200"} >= bool ignoring (code) http_requests_total{code="500"}',
    'temperature{room="r1"} - ignoring (room) temperature{room="r2"}',
    'http_requests_total and on (instance) info_metric{version="2"}',
    'http_requests_total unless on (instance) info_metric{version="2"}',
    'temperature{room="r1"} or temperature{room="r2"}',
    "avg(temperature)",
    "max by (room) (temperature)",
    "min(temperature)",
    "count(temperature)",
    "stddev(temperature)",
    "stdvar(temperature)",
    "quantile(0.75, temperature)",
    "group(temperature)",
    "topk(2, temperature)",
    "bottomk(1, temperature)",
    "avg_over_time(temperature[10m])",
    "min_over_time(temperature[10m])",
    "max_over_time(temperature[10m])",
    "sum_over_time(temperature[10m])",
    "count_over_time(temperature[10m])",
    "stddev_over_time(temperature[10m])",
    "last_over_time(temperature[10m])",
    "present_over_time(temperature[10m])",
    "quantile_over_time(0.9, temperature[10m])",
    "delta(temperature[10m])",
    "idelta(temperature[5m])",
    "changes(temperature[10m])",
    "deriv(temperature[10m])",
    "predict_linear(temperature[10m], 600)",
    "temperature > 20",
    "temperature > bool 20",
    "20 < temperature",
    "2 * temperature + 1",
    "temperature % 7",
    "temperature ^ 2",
    "-temperature",
    "sum by (room) (temperature) > 20",
    "histogram_quantile(0.9, sum by (le) (rate(latency_seconds_bucket[5m])))",
    "histogram_quantile(0.5, rate(latency_seconds_bucket[5m]))",
    'label_replace(temperature, "floor", "f$1", "room", "r(.*)")',
    "abs(delta(temperature[5m]))",
    "ceil(temperature)",
    "floor(temperature)",
    "sqrt(temperature)",
    "exp(temperature / 10)",
    "ln(temperature)",
    "round(temperature, 0.5)",
    "clamp(temperature, 19, 21)",
    "clamp_min(temperature, 20)",
    "clamp_max(temperature, 20)",
    'absent(temperature{room="nowhere"})',
    "absent(temperature)",
    "scalar(sum(temperature))",
    "vector(1)",
    "time()",
    "temperature offset 5m",
    "gone",
    "1 + 2 * 3",
    'count_values("v", ceil(temperature))',
    'count_values by (room) ("v", floor(temperature))',
    'count_values("code", http_requests_total > 100000)',
    "timestamp(temperature)",
    "timestamp(sum(temperature))",
    'label_join(temperature, "x", "-", "room", "__name__")',
    "absent_over_time(temperature[5m])",
    'absent_over_time(nope{job="x"}[5m])',
    "sort_desc(temperature)",
    "sort(temperature)",
    "hour()",
    "minute(timestamp(temperature))",
    "day_of_week()",
    "day_of_month()",
    "day_of_year()",
    "days_in_month()",
    "month(vector(1700000000))",
    "year()",
    "max_over_time(rate(http_requests_total[5m])[30m:1m])",
    "avg_over_time(temperature[10m:])",
    "min_over_time(sum by (job) (rate(http_requests_total[2m]))[15m:30s] offset 5m)",
    "rate(http_requests_total[10m:15s])",
]


#: Queries a range query refuses (a range vector, a fixed time).
INSTANT_ONLY = ["temperature[5m:1m]", "temperature[2m]", f"temperature @ {T0 + 1000}"]


@pytest.fixture(scope="module")
def prometheus(
    tmp_path_factory: pytest.TempPathFactory, prom: Prom
) -> Iterator[prom_server.Prometheus]:
    binary, promtool = prom_server.prometheus_binaries()
    root: Path = tmp_path_factory.mktemp("prometheus")
    data = series()
    (root / "data").mkdir()
    prom_server.backfill(promtool, openmetrics(data), root / "data")
    for start in range(0, len(data), 10):
        status, body = prom.write(data[start : start + 10])
        assert status == 204, body
    with prom_server.running(binary, root, "global: {}\n") as server:
        yield server


def _close(a: str, b: str) -> bool:
    x, y = float(a), float(b)
    if math.isnan(x) or math.isnan(y):
        return math.isnan(x) and math.isnan(y)
    return math.isclose(x, y, rel_tol=REL_TOL, abs_tol=1e-9)


def _series(data: dict[str, Any]) -> dict[tuple[tuple[str, str], ...], list[list[Any]]]:
    kind, result = data["resultType"], data["result"]
    if kind in ("scalar", "string"):
        return {(): [result]}
    key = "value" if kind == "vector" else "values"
    out = {}
    for s in result:
        points = [s[key]] if kind == "vector" else s[key]
        out[tuple(sorted(s["metric"].items()))] = points
    return out


def _same(expected: dict[str, Any], got: dict[str, Any]) -> None:
    assert got["resultType"] == expected["resultType"]
    want, have = _series(expected), _series(got)
    assert sorted(have) == sorted(want)
    for labels, points in want.items():
        other = have[labels]
        assert [float(t) for t, _ in other] == [float(t) for t, _ in points], labels
        for (_, a), (_, b) in zip(points, other, strict=True):
            assert _close(a, b), (labels, a, b)


def test_both_hold_the_samples(prometheus: prom_server.Prometheus, prom: Prom) -> None:
    query = 'count by (__name__) ({__name__=~".+"})'
    status, want = prometheus.get("/api/v1/query", query=query, time=str(TIMES[0]))
    assert status == 200, want
    counts = {s["metric"]["__name__"]: s["value"][1] for s in want["data"]["result"]}
    assert counts == {
        "http_requests_total": "6",
        "info_metric": "3",
        "temperature": "3",
        "latency_seconds_bucket": "12",
        "gone": "1",
    }
    status, got = prom.api("/api/v1/query", query="count(http_requests_total)", time=str(TIMES[0]))
    assert status == 200, got
    assert got["data"]["result"][0]["value"][1] == "6"  # type: ignore[index]


@pytest.mark.parametrize("query", QUERIES + INSTANT_ONLY)
def test_instant_queries_match_prometheus(
    prometheus: prom_server.Prometheus, prom: Prom, query: str
) -> None:
    for t in TIMES:
        status, want = prometheus.get("/api/v1/query", query=query, time=str(t))
        assert status == 200, want
        status, got = prom.api("/api/v1/query", query=query, time=str(t))
        assert status == 200, got
        _same(want["data"], got["data"])  # type: ignore[arg-type]


@pytest.mark.parametrize("query", QUERIES)
def test_range_queries_match_prometheus(
    prometheus: prom_server.Prometheus, prom: Prom, query: str
) -> None:
    status, want = prometheus.get("/api/v1/query_range", query=query, **RANGE)
    assert status == 200, want
    status, got = prom.api("/api/v1/query_range", query=query, **RANGE)
    assert status == 200, got
    _same(want["data"], got["data"])  # type: ignore[arg-type]
