"""Prometheus remote write 1.0 requests to :class:`TableRows`, one per metric (see labels.py).

A body is checked whole before anything is returned: a malformed series refuses the request,
so nothing of it is stored. Metric metadata goes to its own table (metadata.py). Staleness
markers (Prometheus's special NaN) are kept bit for bit.

A body is walked in its wire form (remote_write_walk.py): each entry's labels are the same
bytes every time its series is sent, so the labels of each distinct entry are looked up in
the server's :class:`SeriesCache` and read and checked only the first time they are seen;
the samples are arrays from the start. A body laid out otherwise than Prometheus and its
peers lay it out is read through protobuf's message objects instead.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from gnomon.proto import prometheus_pb2
from node.ingest.rows import TableRows
from node.prom import metadata
from node.prom.metric_rows import MetricRows, MetricSeries, Series, SeriesCache
from node.prom.wire import parse, unsnappy

if TYPE_CHECKING:
    from node.prom.remote_write_walk import Walked


def decode(
    body: bytes, *, max_body_bytes: int, cache: SeriesCache | None = None
) -> list[TableRows]:
    """The rows of a remote-write body, one :class:`TableRows` per metric."""
    # Imported on the first body, not with the server: numba's import and the compiled
    # walk's load take about a second, which every server start would pay otherwise.
    from node.prom.remote_write_walk import walk

    data = unsnappy(body, max_body_bytes)
    known = (cache or SeriesCache()).current()
    walked = walk(data)
    rows = None if walked is None else _rows(data, walked, known)
    if rows is not None and walked is not None and not walked.has_metadata:
        return rows.tables()
    request = parse(prometheus_pb2.WriteRequest(), data)
    if rows is None:
        rows = MetricRows(known)
        for series in request.timeseries:
            samples = series.samples
            rows.add(series.labels, (s.timestamp for s in samples), (s.value for s in samples))
    described = metadata.rows(request.metadata)
    return rows.tables() + ([] if described is None else [described])


def _rows(data: bytes, walked: Walked, known: Series) -> MetricRows | None:
    """The rows of a walked body; None if two entries' labels hashed alike but differ."""
    from node.prom.remote_write_walk import same_labels

    distinct, first, entry_distinct = np.unique(
        walked.label_hash, return_index=True, return_inverse=True
    )
    if not same_labels(data, walked, first[entry_distinct]):
        return None
    rows = MetricRows(known)
    by_bytes = known.by_bytes
    metric_of: dict[MetricSeries, int] = {}
    distinct_metric = np.empty(distinct.size, np.int32)
    distinct_series = np.empty(distinct.size, np.int32)
    starts, ends = walked.label_start[first].tolist(), walked.label_end[first].tolist()
    for d, (start, end) in enumerate(zip(starts, ends, strict=True)):
        labels = data[start:end]
        found = by_bytes.get(labels)
        if found is None:
            series = parse(prometheus_pb2.TimeSeries(), labels)
            found = by_bytes[labels] = known.of_labels(series.labels)
        metric, number = found
        distinct_metric[d] = metric_of.setdefault(metric, len(metric_of))
        distinct_series[d] = number
    metrics = list(metric_of)
    of_sample = entry_distinct[walked.sample_entry]
    sample_metric = distinct_metric[of_sample]
    sample_series = distinct_series[of_sample]
    if len(metrics) == 1:
        rows.rows_of(metrics[0]).extend(sample_series, walked.timestamps, walked.values)
        return rows
    order = np.argsort(sample_metric, kind="stable")
    bounds = np.searchsorted(sample_metric[order], np.arange(len(metrics) + 1))
    for m, metric in enumerate(metrics):
        picked = order[bounds[m] : bounds[m + 1]]
        rows.rows_of(metric).extend(
            sample_series[picked], walked.timestamps[picked], walked.values[picked]
        )
    return rows
