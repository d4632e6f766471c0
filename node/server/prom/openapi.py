"""The Prometheus endpoints in gnomon's OpenAPI document (GET /openapi.json). Their bodies and
answers are Prometheus's own (prompb messages, the query API's envelope): described by name,
not restated."""

from __future__ import annotations

from typing import Any

_PROTOBUF = {"application/x-protobuf": {"schema": {"type": "string", "format": "binary"}}}
_ENVELOPE = {"application/json": {"schema": {"type": "object"}}}


def _remote(summary: str, description: str, ok: dict[str, Any]) -> dict[str, Any]:
    return {
        "post": {
            "summary": summary,
            "description": description,
            "requestBody": {"required": True, "content": _PROTOBUF},
            "responses": {
                **ok,
                "400": {"description": "The body is malformed; nothing of it was stored."},
            },
        }
    }


def _query(summary: str, parameters: list[str]) -> dict[str, Any]:
    operation = {
        "summary": summary,
        "description": "Prometheus's HTTP API: answers in its envelope and error types.",
        "parameters": [
            {"name": name, "in": "query", "required": False, "schema": {"type": "string"}}
            for name in parameters
        ],
        "responses": {
            "200": {"description": 'status "success" and its data.', "content": _ENVELOPE},
            "400": {"description": "bad_data", "content": _ENVELOPE},
            "422": {"description": "execution", "content": _ENVELOPE},
            "503": {"description": "timeout or unavailable", "content": _ENVELOPE},
        },
    }
    form = {"application/x-www-form-urlencoded": {"schema": {"type": "object"}}}
    return {"get": operation, "post": {**operation, "requestBody": {"content": form}}}


_WRITE = _remote(
    "Prometheus remote write 1.0",
    "A snappy block-compressed WriteRequest. Each metric is a table (labels as string tags, "
    "`timestamp`, `value`), created and extended on the way.",
    {"204": {"description": "Stored."}},
)
_READ = _remote(
    "Prometheus remote read",
    "A snappy block-compressed ReadRequest, answered with a ReadResponse (SAMPLES).",
    {"200": {"description": "The samples.", "content": _PROTOBUF}},
)
_OTLP = _remote(
    "OTLP/HTTP metrics export",
    "An ExportMetricsServiceRequest, protobuf or JSON, translated as Prometheus's OTLP "
    "receiver does.",
    {"200": {"description": "An ExportMetricsServiceResponse.", "content": _PROTOBUF}},
)
_RANGE = ["start", "end"]

PATHS: dict[str, Any] = {
    "/api/v1/write": _WRITE,
    "/prom/v1/write": _WRITE,
    "/api/v1/read": _READ,
    "/prom/v1/read": _READ,
    "/v1/metrics": _OTLP,
    "/api/v1/otlp/v1/metrics": _OTLP,
    "/api/v1/query": _query("Evaluate PromQL at one time", ["query", "time", "timeout"]),
    "/api/v1/query_range": _query(
        "Evaluate PromQL over a range", ["query", "start", "end", "step", "timeout"]
    ),
    "/api/v1/labels": _query("Label names", ["match[]", *_RANGE]),
    "/api/v1/label/{name}/values": {
        "get": {
            **_query("A label's values", ["match[]", *_RANGE])["get"],
            "parameters": [
                {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}},
                *_query("", ["match[]", *_RANGE])["get"]["parameters"],
            ],
        }
    },
    "/api/v1/series": _query("Series matching selectors", ["match[]", *_RANGE]),
    "/api/v1/metadata": _query("Metric metadata", ["metric", "limit"]),
    "/api/v1/status/buildinfo": _query("Build information", []),
}
