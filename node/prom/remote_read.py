"""Prometheus remote read, answered with the SAMPLES response type: every query's series with
their raw samples (staleness markers included), as Prometheus's own storage returns them."""

from __future__ import annotations

from gnomon.errors import InvalidArgument
from gnomon.proto import prometheus_pb2
from node.prom.series import Matcher, MatchOp, RunSql, select
from node.prom.wire import parse, snappy, unsnappy

_OPS = {
    prometheus_pb2.LabelMatcher.EQ: MatchOp.EQ,
    prometheus_pb2.LabelMatcher.NEQ: MatchOp.NEQ,
    prometheus_pb2.LabelMatcher.RE: MatchOp.RE,
    prometheus_pb2.LabelMatcher.NRE: MatchOp.NRE,
}


def _result(run: RunSql, query: prometheus_pb2.Query) -> prometheus_pb2.QueryResult:
    matchers = [Matcher(m.name, _OPS[m.type], m.value) for m in query.matchers]
    series = select(run, matchers, query.start_timestamp_ms, query.end_timestamp_ms)
    result = prometheus_pb2.QueryResult()
    timestamps = series.timestamps.tolist()
    values = series.values.tolist()
    for i, labels in enumerate(series.labels):
        ts = result.timeseries.add()
        ts.labels.extend(prometheus_pb2.Label(name=k, value=v) for k, v in sorted(labels.items()))
        lo, hi = int(series.offsets[i]), int(series.offsets[i + 1])
        ts.samples.extend(
            prometheus_pb2.Sample(value=v, timestamp=t)
            for t, v in zip(timestamps[lo:hi], values[lo:hi], strict=True)
        )
    return result


def answer(run: RunSql, body: bytes, *, max_body_bytes: int) -> bytes:
    """The snappy-compressed ReadResponse to a snappy-compressed ReadRequest."""
    request = parse(prometheus_pb2.ReadRequest(), unsnappy(body, max_body_bytes))
    accepted = request.accepted_response_types
    if accepted and prometheus_pb2.ReadRequest.SAMPLES not in accepted:
        raise InvalidArgument("gnomon answers remote read with the SAMPLES response type only")
    response = prometheus_pb2.ReadResponse(
        results=[_result(run, query) for query in request.queries]
    )
    return snappy(response.SerializeToString())
