"""Prometheus remote write 1.0 requests to :class:`TableRows`, one per metric (see labels.py).

A body is checked whole before anything is returned: a malformed series refuses the request,
so nothing of it is stored. Metric metadata goes to its own table (metadata.py). Staleness
markers (Prometheus's special NaN) are kept bit for bit.

Series are read one by one off the decoded message: protobuf gives no columnar access to the
samples, and Prometheus sends about one sample per series per request, so a loop over series
is a loop over samples anyway.
"""

from __future__ import annotations

from gnomon.proto import prometheus_pb2
from node.ingest.rows import TableRows
from node.prom import metadata
from node.prom.metric_rows import MetricRows
from node.prom.wire import parse, unsnappy


def decode(body: bytes, *, max_body_bytes: int) -> list[TableRows]:
    """The rows of a remote-write body, one :class:`TableRows` per metric."""
    request = parse(prometheus_pb2.WriteRequest(), unsnappy(body, max_body_bytes))
    rows = MetricRows()
    for series in request.timeseries:
        samples = series.samples
        rows.add(series.labels, (s.timestamp for s in samples), (s.value for s in samples))
    described = metadata.rows(request.metadata)
    return rows.tables() + ([] if described is None else [described])
