"""OTLP/HTTP metrics exports into a real standalone gnomon, queried back with PromQL."""

from __future__ import annotations

import gzip
import json

import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2 as service
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.metrics.v1 import metrics_pb2 as m

from tests.prom.conftest import Prom

pytestmark = pytest.mark.integration

T0_NS = 1_700_000_000_000 * 1_000_000
T0_S = T0_NS // 1_000_000_000


def _kv(key: str, value: str) -> common_pb2.KeyValue:
    return common_pb2.KeyValue(key=key, value=common_pb2.AnyValue(string_value=value))


def _export() -> service.ExportMetricsServiceRequest:
    req = service.ExportMetricsServiceRequest()
    rm = req.resource_metrics.add()
    rm.resource.attributes.extend([_kv("service.name", "shop"), _kv("service.instance.id", "i1")])
    metrics = rm.scope_metrics.add().metrics
    gauge = metrics.add(name="otel.queue.depth")
    gauge.gauge.data_points.add(
        time_unix_nano=T0_NS, as_double=3.5, attributes=[_kv("queue", "q1")]
    )
    gauge.gauge.data_points.add(
        time_unix_nano=T0_NS + 10**9,
        flags=m.DATA_POINT_FLAGS_NO_RECORDED_VALUE_MASK,
        attributes=[_kv("queue", "q1")],
    )
    total = metrics.add(name="otel.requests")
    total.sum.is_monotonic = True
    total.sum.aggregation_temporality = m.AGGREGATION_TEMPORALITY_CUMULATIVE
    total.sum.data_points.add(
        time_unix_nano=T0_NS, as_int=7, attributes=[_kv("http.method", "GET")]
    )
    histogram = metrics.add(name="otel.latency")
    histogram.histogram.aggregation_temporality = m.AGGREGATION_TEMPORALITY_CUMULATIVE
    histogram.histogram.data_points.add(
        time_unix_nano=T0_NS, count=10, sum=4.0, explicit_bounds=[0.1, 1.0], bucket_counts=[2, 5, 3]
    )
    delta = metrics.add(name="otel.delta")
    delta.sum.aggregation_temporality = m.AGGREGATION_TEMPORALITY_DELTA
    delta.sum.data_points.add(time_unix_nano=T0_NS, as_int=1)
    return req


def _value(prom: Prom, query: str, t: float = T0_S) -> list[tuple[dict[str, str], str]]:
    status, doc = prom.api("/api/v1/query", query=query, time=str(t))
    assert status == 200, doc
    result = doc["data"]["result"]  # type: ignore[index]
    return sorted(
        ((s["metric"], s["value"][1]) for s in result), key=lambda p: sorted(p[0].items())
    )


def test_otlp_protobuf_export(prom: Prom) -> None:
    body = gzip.compress(_export().SerializeToString())
    status, _, answer = prom.running.request(
        "POST",
        "/v1/metrics",
        body,
        {"Content-Type": "application/x-protobuf", "Content-Encoding": "gzip"},
    )
    assert status == 200, answer
    response = service.ExportMetricsServiceResponse.FromString(answer)
    assert response.partial_success.rejected_data_points == 1  # the delta sum
    base = {"job": "shop", "instance": "i1"}
    assert _value(prom, "otel_queue_depth") == [
        ({"__name__": "otel_queue_depth", **base, "queue": "q1"}, "3.5")
    ]
    assert _value(prom, "otel_requests_total") == [
        ({"__name__": "otel_requests_total", **base, "http_method": "GET"}, "7")
    ]
    buckets = _value(prom, "otel_latency_bucket")
    assert [(lb["le"], v) for lb, v in buckets] == [("+Inf", "10"), ("0.1", "2"), ("1", "7")]
    assert _value(prom, "otel_latency_sum")[0][1] == "4"
    assert _value(prom, "otel_latency_count")[0][1] == "10"
    # No recorded value: a staleness marker ends the series.
    assert _value(prom, "otel_queue_depth", T0_S + 2) == []
    status, doc = prom.running.sql("SELECT count(*) AS n FROM otel_queue_depth")
    assert (status, doc) == (200, {"rows": [{"n": 2}]})


def test_otlp_json_export(prom: Prom) -> None:
    req = _export()
    req.resource_metrics[0].scope_metrics[0].metrics[0].name = "otel.json.gauge"
    body = json_format.MessageToJson(req).encode()
    status, _, answer = prom.running.request(
        "POST", "/api/v1/otlp/v1/metrics", body, {"Content-Type": "application/json"}
    )
    assert status == 200, answer
    assert _value(prom, "otel_json_gauge{queue='q1'}")[0][1] == "3.5"


def test_malformed_export_is_refused(prom: Prom) -> None:
    status, _, answer = prom.running.request(
        "POST",
        "/v1/metrics",
        b"\x0a\xff\xff not protobuf",
        {"Content-Type": "application/x-protobuf"},
    )
    assert status == 400 and json.loads(answer)["message"], answer
