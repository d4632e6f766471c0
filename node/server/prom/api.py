"""The Prometheus HTTP query API (/api/v1/query, query_range, labels, label values, series,
metadata, buildinfo): parameters from the URL or a form body, answers in Prometheus's
envelope, errors as Prometheus types them."""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from datetime import datetime
from importlib import metadata as distribution
from typing import Any
from urllib.parse import parse_qs

import numpy as np
import promql_parser as pp

from gnomon.error_codes import http_status, message_of
from gnomon.errors import (
    Cancelled,
    DeadlineExceeded,
    GnomonError,
    InvalidArgument,
    PermissionDenied,
    Unauthenticated,
)
from node.prom import metadata
from node.prom.host import PromHost
from node.prom.labels import METRIC_NAME, NOT_LABELS
from node.prom.promql import engine
from node.prom.promql.binary import ExecutionError
from node.prom.promql.selectors import matchers as selector_matchers
from node.prom.promql.values import (
    Labels,
    RangeSamples,
    Scalar,
    String,
    Value,
    Vector,
    format_value,
)
from node.prom.series import RunSql, columns_of, metric_tables, select
from node.server.http.answers import Response, json_answer

#: Most points one series of a range query may have (Prometheus's bound).
MAX_POINTS = 11_000
#: The series and label endpoints' range when none is given: everything.
ALL_TIME_MS = (0, 2**53)
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|y|w|d|h|m|s)")
_UNIT_MS = {
    "ms": 1,
    "s": 1000,
    "m": 60_000,
    "h": 3_600_000,
    "d": 86_400_000,
    "w": 604_800_000,
    "y": 31_536_000_000,
}

Params = Mapping[str, list[str]]


def success(data: Any) -> Response:
    return json_answer(200, {"status": "success", "data": data})


def failure(e: BaseException) -> Response:
    """Prometheus's error answer: bad_data 400, execution 422, timeout 503, else internal."""
    if isinstance(e, DeadlineExceeded):
        status, kind = 503, "timeout"
    elif isinstance(e, Cancelled):
        status, kind = 503, "canceled"
    elif isinstance(e, ExecutionError):
        status, kind = 422, "execution"
    elif isinstance(e, InvalidArgument):
        status, kind = 400, "bad_data"
    elif isinstance(e, GnomonError) and e.retryable:
        status, kind = 503, "unavailable"
    elif isinstance(e, PermissionDenied | Unauthenticated):
        status, kind = http_status(e), "forbidden"
    elif isinstance(e, GnomonError):
        status, kind = 422, "execution"
    else:
        status, kind = 500, "internal"
    return json_answer(status, {"status": "error", "errorType": kind, "error": message_of(e)})


def form(params: Params, body: bytes, content_type: str) -> Params:
    """The URL's parameters with a form body's added (POST)."""
    if body and content_type.split(";")[0].strip() == "application/x-www-form-urlencoded":
        return {**params, **parse_qs(body.decode(errors="replace"))}
    return params


def _one(params: Params, name: str) -> str | None:
    values = params.get(name)
    return values[-1] if values else None


def parse_time(text: str, name: str) -> int:
    """A time parameter (Unix seconds, or RFC 3339) in milliseconds."""
    try:
        return round(float(text) * 1000)
    except ValueError:
        pass
    try:
        return round(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        raise InvalidArgument(
            f'invalid parameter "{name}": cannot parse "{text}" to a valid timestamp'
        ) from None


def parse_duration(text: str, name: str) -> int:
    """A duration parameter (seconds, or ``1m30s``) in milliseconds."""
    try:
        return round(float(text) * 1000)
    except ValueError:
        pass
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise InvalidArgument(
            f'invalid parameter "{name}": cannot parse "{text}" to a valid duration'
        )
    return round(sum(float(n) * _UNIT_MS[u] for n, u in parts))


def _seconds(ms: int) -> float | int:
    return ms // 1000 if ms % 1000 == 0 else ms / 1000


def _vector_result(v: Vector, t_ms: int) -> list[dict[str, Any]]:
    return [
        {"metric": lb, "value": [_seconds(t_ms), format_value(float(v.values[i, 0]))]}
        for i, lb in enumerate(v.labels)
        if v.present[i, 0]
    ]


def _matrix_result(v: Vector, steps: np.ndarray[Any, Any]) -> list[dict[str, Any]]:
    out = []
    times = [_seconds(int(t)) for t in steps]
    for i, lb in enumerate(v.labels):
        cols = np.flatnonzero(v.present[i])
        if len(cols):
            values = v.values[i, cols].tolist()
            out.append(
                {
                    "metric": lb,
                    "values": [
                        [times[c], format_value(x)] for c, x in zip(cols, values, strict=True)
                    ],
                }
            )
    return sorted(out, key=lambda s: sorted(s["metric"].items()))


def _instant_data(value: Value, t_ms: int) -> dict[str, Any]:
    if isinstance(value, Scalar):
        return {
            "resultType": "scalar",
            "result": [_seconds(t_ms), format_value(float(value.values[0]))],
        }
    if isinstance(value, String):
        return {"resultType": "string", "result": [_seconds(t_ms), value.value]}
    if isinstance(value, RangeSamples):
        return {
            "resultType": "matrix",
            "result": [
                {
                    "metric": lb,
                    "values": [
                        [_seconds(int(t)), format_value(float(x))]
                        for t, x in zip(ts, vs, strict=True)
                    ],
                }
                for lb, (ts, vs) in zip(value.labels, value.samples, strict=True)
            ],
        }
    return {"resultType": "vector", "result": _vector_result(value, t_ms)}


class QueryApi:
    """The query endpoints over one server's SQL."""

    def __init__(self, host: PromHost) -> None:
        self.host = host

    @property
    def run(self) -> RunSql:
        return self.host.execute

    def answer(self, path: str, params: Params) -> Response:
        """The endpoint's answer; ``timeout`` (a duration) shortens the server's query time
        limit, never extends it."""
        try:
            text = _one(params, "timeout")
            timeout_s = parse_duration(text, "timeout") / 1000 if text else None
            with self.host.queries.running(timeout_s=timeout_s):
                return success(self._data(path, params))
        except Exception as e:
            return failure(e)

    def _data(self, path: str, params: Params) -> Any:
        if path == "/api/v1/query":
            return self.query(params)
        if path == "/api/v1/query_range":
            return self.query_range(params)
        if path == "/api/v1/labels":
            return self.labels(params)
        if path == "/api/v1/series":
            return self.series(params)
        if path == "/api/v1/metadata":
            limit = _one(params, "limit")
            return metadata.answer(self.run, _one(params, "metric"), _limit(limit))
        if path == "/api/v1/status/buildinfo":
            return build_info()
        name = path.removeprefix("/api/v1/label/").removesuffix("/values")
        return self.label_values(name, params)

    def query(self, params: Params) -> dict[str, Any]:
        query = _required(params, "query")
        text = _one(params, "time")
        t_ms = parse_time(text, "time") if text else round(time.time() * 1000)
        return _instant_data(engine.evaluate(self.run, query, t_ms, t_ms, 1), t_ms)

    def query_range(self, params: Params) -> dict[str, Any]:
        query = _required(params, "query")
        start = parse_time(_required(params, "start"), "start")
        end = parse_time(_required(params, "end"), "end")
        step = parse_duration(_required(params, "step"), "step")
        if end < start:
            raise InvalidArgument(
                'invalid parameter "end": end timestamp must not be before start time'
            )
        if step <= 0:
            raise InvalidArgument(
                'invalid parameter "step": zero or negative query resolution step widths are '
                "not accepted. Try a positive integer"
            )
        if (end - start) // step + 1 > MAX_POINTS:
            raise InvalidArgument(
                "exceeded maximum resolution of 11,000 points per timeseries. Try decreasing "
                "the query resolution (?step=XX)"
            )
        value = engine.evaluate(self.run, query, start, end, step)
        if isinstance(value, Scalar):
            value = Vector([{}], value.values[None, :], np.ones((1, len(value.values)), dtype=bool))
        if not isinstance(value, Vector):
            raise InvalidArgument(
                "invalid expression type for range query, must be Scalar or instant Vector"
            )
        steps = np.arange(start, end + 1, step)
        return {"resultType": "matrix", "result": _matrix_result(value, steps)}

    def _range(self, params: Params) -> tuple[int, int]:
        start, end = _one(params, "start"), _one(params, "end")
        return (
            parse_time(start, "start") if start else ALL_TIME_MS[0],
            parse_time(end, "end") if end else ALL_TIME_MS[1],
        )

    def _selected(self, params: Params) -> list[Labels]:
        start, end = self._range(params)
        out: dict[tuple[tuple[str, str], ...], Labels] = {}
        for text in params.get("match[]", []):
            expr = engine.parse(text)
            if not isinstance(expr, pp.VectorSelector):
                raise InvalidArgument(
                    f'invalid parameter "match[]": {text!r} is not a series selector'
                )
            for lb in select(self.run, selector_matchers(expr), start, end).labels:
                out[tuple(sorted(lb.items()))] = lb
        return list(out.values())

    def series(self, params: Params) -> list[Labels]:
        if not params.get("match[]"):
            raise InvalidArgument("no match[] parameter provided")
        return self._selected(params)

    def labels(self, params: Params) -> list[str]:
        if params.get("match[]"):
            return sorted({k for lb in self._selected(params) for k in lb})
        names = {METRIC_NAME}
        for metric in metric_tables(self.run):
            names.update(c for c in columns_of(self.run, metric) if c not in NOT_LABELS)
        return sorted(names)

    def label_values(self, name: str, params: Params) -> list[str]:
        if params.get("match[]"):
            return sorted({lb[name] for lb in self._selected(params) if lb.get(name)})
        if name == METRIC_NAME:
            return metric_tables(self.run)
        values: set[str] = set()
        quoted = f"`{name.replace('`', '``')}`"
        for metric in metric_tables(self.run):
            if name in columns_of(self.run, metric):
                table = self.run(
                    f"SELECT DISTINCT {quoted} FROM `{metric.replace('`', '``')}`"
                ).table()
                values.update(str(v) for v in table.column(0).to_pylist() if v not in (None, ""))
        return sorted(values)


def _limit(text: str | None) -> int | None:
    """The ``limit`` parameter: none if absent or not positive, as Prometheus takes it."""
    if not text:
        return None
    try:
        value = int(text)
    except ValueError:
        raise InvalidArgument(f'invalid parameter "limit": cannot parse "{text}"') from None
    return value if value > 0 else None


def _required(params: Params, name: str) -> str:
    value = _one(params, name)
    if not value:
        raise InvalidArgument(f'invalid parameter "{name}": parameter is missing')
    return value


def build_info() -> dict[str, str]:
    try:
        version = distribution.version("gnomon")
    except distribution.PackageNotFoundError:
        version = "unknown"
    return {
        "version": version,
        "revision": "",
        "branch": "",
        "buildUser": "",
        "buildDate": "",
        "goVersion": "",
    }
