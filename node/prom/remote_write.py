"""Prometheus remote write 1.0 requests to :class:`TableRows`, one per metric (see labels.py).

A body is checked whole before anything is returned: a malformed series refuses the request,
so nothing of it is stored. Staleness markers (Prometheus's special NaN) are kept bit for bit.

Series are read one by one off the decoded message: protobuf gives no columnar access to the
samples, and Prometheus sends about one sample per series per request, so a loop over series
is a loop over samples anyway. Tags are filled a series at a time and values become one Arrow
array per metric.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from gnomon.errors import InvalidArgument
from gnomon.proto import prometheus_pb2
from node.engine.schema import ColumnType
from node.ingest.rows import TableRows
from node.prom.labels import (
    LABEL_NAME,
    MAX_LABEL_VALUE_BYTES,
    METRIC_NAME,
    METRIC_NAME_SYNTAX,
    NOT_LABELS,
    VALUE_COLUMN,
)
from node.prom.wire import parse, unsnappy


class _Metric:
    """The rows of one metric, gathered series by series."""

    def __init__(self, name: str) -> None:
        self.rows = TableRows(name)
        self.values: list[float] = []

    def add(
        self, labels: Sequence[prometheus_pb2.Label], samples: Sequence[prometheus_pb2.Sample]
    ) -> None:
        rows = self.rows
        start = rows.num_rows
        rows.timestamps.extend(s.timestamp for s in samples)
        self.values.extend(s.value for s in samples)
        for label in labels:
            if label.name != METRIC_NAME and label.value:
                col = rows.column(label.name, is_tag=True, type=ColumnType.STRING)
                col.fill(start, len(samples), label.value)

    def table_rows(self) -> TableRows:
        col = self.rows.column(VALUE_COLUMN, is_tag=False, type=ColumnType.DOUBLE)
        col.built = pa.array(np.array(self.values, dtype=np.float64))
        return self.rows


def _metric_name(labels: Sequence[prometheus_pb2.Label]) -> str:
    """The series' metric name, once its labels are checked as Prometheus checks them."""
    name = ""
    previous = ""
    for i, label in enumerate(labels):
        if i and label.name <= previous:
            what = "repeated" if label.name == previous else "not sorted by name"
            raise InvalidArgument(f"series labels are {what} at {label.name!r}")
        previous = label.name
        if label.name == METRIC_NAME:
            name = label.value
        elif not LABEL_NAME.fullmatch(label.name):
            raise InvalidArgument(f"invalid label name {label.name!r}")
        elif label.name in NOT_LABELS:
            raise InvalidArgument(
                f"label name {label.name!r} is reserved: it names a column of every metric's table"
            )
        if len(label.value.encode()) > MAX_LABEL_VALUE_BYTES:
            raise InvalidArgument(
                f"label {label.name!r}: value of {len(label.value.encode())} bytes is longer "
                f"than {MAX_LABEL_VALUE_BYTES}"
            )
    if not name:
        raise InvalidArgument("a series has no metric name (label __name__)")
    if not METRIC_NAME_SYNTAX.fullmatch(name):
        raise InvalidArgument(f"invalid metric name {name!r}")
    return name


def decode(body: bytes, *, max_body_bytes: int) -> list[TableRows]:
    """The rows of a remote-write body, one :class:`TableRows` per metric."""
    request = parse(prometheus_pb2.WriteRequest(), unsnappy(body, max_body_bytes))
    metrics: dict[str, _Metric] = {}
    for series in request.timeseries:
        name = _metric_name(series.labels)
        if not series.samples:
            continue
        metric = metrics.get(name)
        if metric is None:
            metric = metrics[name] = _Metric(name)
        metric.add(series.labels, series.samples)
    return [m.table_rows() for m in metrics.values()]
