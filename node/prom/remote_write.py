"""Prometheus remote write 1.0 requests to :class:`TableRows`, one per metric (see labels.py).

A body is checked whole before anything is returned: a malformed series refuses the request,
so nothing of it is stored. Metric metadata goes to its own table (metadata.py). Staleness
markers (Prometheus's special NaN) are kept bit for bit.

Senders put about one sample in each series entry, so reading a request through protobuf's
message objects costs a few attribute reads per label and sample in Python. Instead, once
protobuf has parsed the body (which checks it is well formed), the entries are walked in
its wire form: each entry's labels are the same bytes every time its series is sent, so
those bytes are looked up in the server's :class:`SeriesCache` and a series' labels are read and
checked only the first time they are seen; a sample is two fields read off the bytes. A
body laid out otherwise than Prometheus and its peers lay it out (labels after samples,
fields protobuf does not name here) is read through the message objects instead.
"""

from __future__ import annotations

import struct
from array import array

from gnomon.proto import prometheus_pb2
from gnomon.proto.wire import varint as _varint
from node.ingest.rows import TableRows
from node.prom import metadata
from node.prom.metric_rows import MetricRows, Series, SeriesCache
from node.prom.wire import parse, unsnappy

#: Field keys (number << 3 | wire type) of the messages walked.
_TIMESERIES = 0x0A  # WriteRequest.timeseries = 1, length-delimited
_LABEL = 0x0A  # TimeSeries.labels = 1
_SAMPLE = 0x12  # TimeSeries.samples = 2
_VALUE = 0x09  # Sample.value = 1, 64-bit
_TIMESTAMP = 0x10  # Sample.timestamp = 2, varint
_DOUBLE = struct.Struct("<d").unpack_from
_SIGN = 1 << 63


class _Unusual(Exception):
    """A body not laid out as this walk reads it."""


def decode(
    body: bytes, *, max_body_bytes: int, cache: SeriesCache | None = None
) -> list[TableRows]:
    """The rows of a remote-write body, one :class:`TableRows` per metric."""
    data = unsnappy(body, max_body_bytes)
    request = parse(prometheus_pb2.WriteRequest(), data)
    known = (cache or SeriesCache()).current()
    try:
        rows = _walk(data, known)
    except _Unusual:
        rows = MetricRows(known)
        for series in request.timeseries:
            samples = series.samples
            rows.add(series.labels, (s.timestamp for s in samples), (s.value for s in samples))
    described = metadata.rows(request.metadata)
    return rows.tables() + ([] if described is None else [described])


def _walk(data: bytes, known: Series) -> MetricRows:
    """The series of a well-formed WriteRequest ``data`` (protobuf parsed it already)."""
    rows = MetricRows(known)
    by_bytes = known.by_bytes
    seen: dict[bytes, tuple[array[int], array[int], array[float], int]] = {}
    i, n = 0, len(data)
    while i < n:
        key = data[i]
        if key & 0x07 != 2 or key > 0x7F:
            raise _Unusual  # a field not length-delimited: not one of WriteRequest's
        length = data[i + 1]  # an entry's length: one or two bytes but for large ones
        if length < 0x80:
            i += 2
        elif data[i + 2] < 0x80:
            length = (length & 0x7F) | data[i + 2] << 7
            i += 3
        else:
            length, i = _varint(data, i + 1)
        end = i + length
        if key != _TIMESERIES:
            i = end  # metadata, read off the parsed message
            continue
        j = i
        while j < end and data[j] == _LABEL:
            length = data[j + 1]  # a label's length fits one byte but for long values
            if length < 0x80:
                j += 2 + length
            else:
                length, j = _varint(data, j + 1)
                j += length
        labels = data[i:j]
        # The samples first: a layout read otherwise must be found before the labels are
        # judged (samples before labels would leave none here). Nearly every entry holds
        # one sample: kept apart, with lists only for more.
        count, stamp, value = 0, 0, 0.0
        more: list[tuple[int, float]] = []
        while j < end:
            length = data[j + 1]
            if data[j] != _SAMPLE or length >= 0x80:
                raise _Unusual  # a sample is two fields, shorter than 128 bytes
            j += 2
            stop = j + length
            if count:
                more.append((stamp, value))
            count += 1
            value, stamp = 0.0, 0  # proto3 leaves zeros out
            while j < stop:
                field = data[j]
                if field == _VALUE:
                    value = _DOUBLE(data, j + 1)[0]
                    j += 9
                elif field == _TIMESTAMP:
                    # A varint read here: a call per sample costs as much as the rest.
                    j += 1
                    stamp = shift = 0
                    while True:
                        byte = data[j]
                        j += 1
                        stamp |= (byte & 0x7F) << shift
                        if byte < 0x80:
                            break
                        shift += 7
                    if stamp >= _SIGN:
                        stamp -= 1 << 64
                else:
                    raise _Unusual
        entry = seen.get(labels)
        if entry is None:
            found = by_bytes.get(labels)
            if found is None:
                labelled = prometheus_pb2.TimeSeries.FromString(labels).labels
                found = by_bytes[labels] = known.of_labels(labelled)
            metric, number = found
            into = rows.rows_of(metric)
            entry = seen[labels] = (into.series, into.timestamps, into.values, number)
        if count:
            series, timestamps, values, series_id = entry
            for earlier_stamp, earlier_value in more:
                series.append(series_id)
                timestamps.append(earlier_stamp)
                values.append(earlier_value)
            series.append(series_id)
            timestamps.append(stamp)
            values.append(value)
        i = end
    return rows
