"""OTLP metrics (OTLP/HTTP ``ExportMetricsServiceRequest``, protobuf or JSON) to metric
tables, as Prometheus's OTLP receiver translates them: gauges and cumulative sums become a
series per data point's attributes (monotonic sums named ``<name>_total``), explicit-bucket
histograms ``<name>_bucket`` with cumulative ``le`` buckets plus ``<name>_sum`` and
``<name>_count``, summaries ``<name>{quantile=...}`` plus ``_sum`` and ``_count``. A
resource's ``service.namespace``/``service.name`` is the label ``job`` and its
``service.instance.id`` the label ``instance``; names are made Prometheus names by replacing
other characters with ``_``. A data point flagged as having no recorded value is a staleness
marker. Delta temporality and exponential histograms are not stored: their data points are
counted as rejected in the answer's partial success."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

import numpy as np
from google.protobuf import json_format
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.metrics.v1 import metrics_pb2

from gnomon.errors import InvalidArgument
from node.ingest.rows import TableRows
from node.prom.labels import METRIC_NAME
from node.prom.metric_rows import MetricRows
from node.prom.promql.selectors import STALE_BITS
from node.prom.wire import parse

#: OTLP's flag on a data point that carries no value (the series ended).
NO_RECORDED_VALUE = metrics_pb2.DATA_POINT_FLAGS_NO_RECORDED_VALUE_MASK
CUMULATIVE = metrics_pb2.AGGREGATION_TEMPORALITY_CUMULATIVE
STALE = float(np.array([STALE_BITS], dtype=np.uint64).view(np.float64)[0])
_INVALID = re.compile(r"[^a-zA-Z0-9_]")
_INVALID_METRIC = re.compile(r"[^a-zA-Z0-9_:]")


class Label(NamedTuple):
    name: str
    value: str


def label_name(key: str) -> str:
    name = _INVALID.sub("_", key)
    return f"key_{name}" if name[:1].isdigit() else name


def metric_name(name: str) -> str:
    out = _INVALID_METRIC.sub("_", name)
    return f"_{out}" if out[:1].isdigit() else out


def _text(value: common_pb2.AnyValue) -> str:
    kind = value.WhichOneof("value")
    if kind is None:
        return ""
    if kind == "string_value":
        return value.string_value
    if kind == "bool_value":
        return "true" if value.bool_value else "false"
    if kind in ("int_value", "double_value"):
        return str(getattr(value, kind))
    return json_format.MessageToJson(value, indent=None)


def _attributes(attributes: Iterable[common_pb2.KeyValue]) -> dict[str, str]:
    return {label_name(kv.key): _text(kv.value) for kv in attributes}


def _resource_labels(resource: Any) -> dict[str, str]:
    found = {kv.key: _text(kv.value) for kv in resource.attributes}
    out: dict[str, str] = {}
    service = found.get("service.name", "")
    if service:
        namespace = found.get("service.namespace", "")
        out["job"] = f"{namespace}/{service}" if namespace else service
    if found.get("service.instance.id"):
        out["instance"] = found["service.instance.id"]
    return out


def _sorted(name: str, labels: dict[str, str]) -> list[Label]:
    return sorted([Label(METRIC_NAME, name), *(Label(k, v) for k, v in labels.items() if v)])


class _Translation:
    def __init__(self) -> None:
        self.rows = MetricRows()
        self.rejected = 0

    def sample(self, name: str, labels: dict[str, str], point: Any, value: float) -> None:
        if point.flags & NO_RECORDED_VALUE:
            value = STALE
        self.rows.add(_sorted(name, labels), [point.time_unix_nano // 1_000_000], [value])

    def number(self, name: str, base: dict[str, str], points: Sequence[Any]) -> None:
        for p in points:
            value = p.as_double if p.WhichOneof("value") == "as_double" else float(p.as_int)
            self.sample(name, {**base, **_attributes(p.attributes)}, p, value)

    def histogram(self, name: str, base: dict[str, str], points: Sequence[Any]) -> None:
        for p in points:
            labels = {**base, **_attributes(p.attributes)}
            counts = np.cumsum(np.array(p.bucket_counts, dtype=np.float64))
            bounds = [*p.explicit_bounds, float("inf")]
            if len(counts) and len(counts) != len(bounds):
                raise InvalidArgument(
                    f"histogram {name!r}: {len(p.bucket_counts)} bucket counts for "
                    f"{len(p.explicit_bounds)} bounds"
                )
            for bound, count in zip(bounds, counts.tolist(), strict=False):
                le = "+Inf" if bound == float("inf") else repr(float(bound)).removesuffix(".0")
                self.sample(f"{name}_bucket", {**labels, "le": le}, p, count)
            if p.HasField("sum"):
                self.sample(f"{name}_sum", labels, p, p.sum)
            self.sample(f"{name}_count", labels, p, float(p.count))

    def summary(self, name: str, base: dict[str, str], points: Sequence[Any]) -> None:
        for p in points:
            labels = {**base, **_attributes(p.attributes)}
            for q in p.quantile_values:
                quantile = repr(float(q.quantile)).removesuffix(".0")
                self.sample(name, {**labels, "quantile": quantile}, p, q.value)
            self.sample(f"{name}_sum", labels, p, p.sum)
            self.sample(f"{name}_count", labels, p, float(p.count))

    def metric(self, metric: metrics_pb2.Metric, base: dict[str, str]) -> None:
        name = metric_name(metric.name)
        kind = metric.WhichOneof("data")
        if kind == "gauge":
            self.number(name, base, metric.gauge.data_points)
        elif kind == "sum" and metric.sum.aggregation_temporality == CUMULATIVE:
            total = (
                f"{name}_total" if metric.sum.is_monotonic and not name.endswith("_total") else name
            )
            self.number(total, base, metric.sum.data_points)
        elif kind == "histogram" and metric.histogram.aggregation_temporality == CUMULATIVE:
            self.histogram(name, base, metric.histogram.data_points)
        elif kind == "summary":
            self.summary(name, base, metric.summary.data_points)
        else:
            self.rejected += _point_count(metric)


def _point_count(metric: metrics_pb2.Metric) -> int:
    kind = metric.WhichOneof("data")
    return len(getattr(metric, kind).data_points) if kind else 0


def decode(body: bytes, content_type: str) -> tuple[list[TableRows], int]:
    """The rows of an OTLP metrics export, and how many data points were not stored."""
    request = metrics_service_pb2.ExportMetricsServiceRequest()
    if content_type.split(";")[0].strip() == "application/json":
        try:
            json_format.Parse(body, request)
        except json_format.ParseError as e:
            raise InvalidArgument(f"body is not a valid OTLP JSON export: {e}") from None
    else:
        parse(request, body)
    out = _Translation()
    for resource_metrics in request.resource_metrics:
        base = _resource_labels(resource_metrics.resource)
        for scope in resource_metrics.scope_metrics:
            for metric in scope.metrics:
                out.metric(metric, base)
    return out.rows.tables(), out.rejected


def answer(rejected: int) -> bytes:
    response = metrics_service_pb2.ExportMetricsServiceResponse()
    if rejected:
        response.partial_success.rejected_data_points = rejected
        response.partial_success.error_message = (
            "delta temporality and exponential histograms are not stored"
        )
    return response.SerializeToString()
