"""The remote-write decoder's walk over a body's wire form (node/prom/remote_write.py) answers
what reading it through protobuf's messages answers, for every layout a sender may choose,
and reads a series' labels once per cache."""

from __future__ import annotations

import dataclasses
import math
import struct
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gnomon.errors import InvalidArgument
from gnomon.proto import prometheus_pb2
from node.engine.tsid import tsid_of
from node.ingest.rows import TableRows
from node.prom import remote_write, remote_write_walk
from node.prom.metric_rows import MetricRows, SeriesCache
from node.prom.wire import snappy

pytestmark = pytest.mark.unit

T0 = 1_700_000_000_000
STALE = struct.unpack("<d", struct.pack("<Q", 0x7FF0000000000002))[0]
LIMIT = 64 << 20

Series = tuple[list[tuple[str, str]], list[tuple[int, float]]]


def request(*series: Series) -> prometheus_pb2.WriteRequest:
    req = prometheus_pb2.WriteRequest()
    for labels, samples in series:
        ts = req.timeseries.add()
        for name, value in labels:
            ts.labels.add(name=name, value=value)
        for stamp, value in samples:
            ts.samples.add(timestamp=stamp, value=value)
    return req


def through_messages(req: prometheus_pb2.WriteRequest) -> list[TableRows]:
    rows = MetricRows()
    for ts in req.timeseries:
        rows.add(ts.labels, [s.timestamp for s in ts.samples], [s.value for s in ts.samples])
    return rows.tables()


def tables(rows: list[TableRows]) -> dict[str, list[dict[str, Any]]]:
    """Each table's rows, NaN payloads as their bits (a staleness marker is one NaN)."""
    out = {}
    for t in rows:
        data = t.arrow("timestamp").to_pylist()
        for row in data:
            value = row["value"]
            if isinstance(value, float) and math.isnan(value):
                row["value"] = struct.pack("<d", value).hex()
        out[t.table] = data
    return out


def decoded(data: bytes, cache: SeriesCache | None = None) -> list[TableRows]:
    return remote_write.decode(snappy(data), max_body_bytes=LIMIT, cache=cache)


def test_a_body_as_senders_write_it() -> None:
    req = request(
        ([("__name__", "up"), ("instance", "a"), ("job", "x")], [(T0, 1.0)]),
        ([("__name__", "up"), ("instance", "b"), ("job", "x")], [(T0, 0.0)]),  # 0.0 left out
        ([("__name__", "rps"), ("code", ""), ("job", "x")], [(T0, 2.5), (T0 + 15_000, STALE)]),
        ([("__name__", "up"), ("instance", "a"), ("job", "x")], [(0, 3.0), (-5, 4.0)]),
        ([("__name__", "big"), ("v", "x" * 300)], [(T0, -1.5)]),  # a label over 127 bytes
        ([("__name__", "none")], []),  # no samples: checked, nothing stored
    )
    assert tables(decoded(req.SerializeToString())) == tables(through_messages(req))
    assert tables(decoded(req.SerializeToString()))["up"][2] == {
        "timestamp": pa.scalar(0, pa.timestamp("ms")).as_py(),
        "instance": "a",
        "job": "x",
        "value": 3.0,
    }


def test_another_layout_is_read_through_the_messages() -> None:
    label = prometheus_pb2.Label(name="__name__", value="up").SerializeToString()
    sample = prometheus_pb2.Sample(value=1.0, timestamp=T0).SerializeToString()
    # Samples before labels, and an exemplar (field 3) protobuf does not name here.
    samples_first = b"\x12" + bytes([len(sample)]) + sample + b"\x0a" + bytes([len(label)]) + label
    exemplar = b"\x0a" + bytes([len(label)]) + label + b"\x1a\x00"
    for series in (samples_first, exemplar):
        body = b"\x0a" + bytes([len(series)]) + series
        req = prometheus_pb2.WriteRequest.FromString(body)
        assert tables(decoded(body)) == tables(through_messages(req))


def test_walk_reads_the_usual_layout_and_gives_up_on_another() -> None:
    req = request(
        ([("__name__", "up"), ("job", "x")], [(T0, 1.0), (T0 + 1, STALE)]),
        ([("__name__", "up"), ("job", "y")], [(-5, 2.0)]),
    )
    data = req.SerializeToString()
    walked = remote_write_walk.walk(data)
    assert walked is not None and not walked.has_metadata
    assert walked.sample_entry.tolist() == [0, 0, 1]
    assert walked.timestamps.tolist() == [T0, T0 + 1, -5]
    assert walked.values.view(np.uint64)[1] == struct.unpack("<Q", struct.pack("<d", STALE))[0]
    first = data[walked.label_start[0] : walked.label_end[0]]
    assert prometheus_pb2.TimeSeries.FromString(first).labels[1].value == "x"
    assert walked.label_hash[0] != walked.label_hash[1]
    for cut in (data[:-1], data + b"\x20\x01", b"\x0a\x05\x12\x03\x09\x00"):
        assert remote_write_walk.walk(cut) is None


def test_labels_hashed_alike_are_compared_before_they_count_as_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    req = request(
        ([("__name__", "up"), ("job", "x")], [(T0, 1.0)]),
        ([("__name__", "up"), ("job", "y")], [(T0, 2.0)]),
    )
    walk = remote_write_walk.walk

    def colliding(data: bytes) -> remote_write_walk.Walked | None:
        walked = walk(data)
        assert walked is not None
        return dataclasses.replace(walked, label_hash=np.zeros_like(walked.label_hash))

    monkeypatch.setattr(remote_write_walk, "walk", colliding)
    assert tables(decoded(req.SerializeToString())) == tables(through_messages(req))


def test_a_series_is_checked_when_first_seen_and_the_cache_is_bounded() -> None:
    cache = SeriesCache(limit=2)
    first = cache.current()
    for name in ("a", "b"):
        decoded(request(([("__name__", name)], [(T0, 1.0)])).SerializeToString(), cache)
    assert first.size == 2 and len(first.by_bytes) == 2
    # Full: the next request starts a new generation; the series seen again is numbered anew.
    again = decoded(request(([("__name__", "a")], [(T0, 2.0)])).SerializeToString(), cache)
    assert cache.current() is not first and cache.current().size == 1
    assert tables(again) == {"a": [{"timestamp": tables(again)["a"][0]["timestamp"], "value": 2.0}]}
    bad = request(([("job", "x"), ("__name__", "up")], [(T0, 1.0)])).SerializeToString()
    for _ in range(2):  # refused every time: a refused series is never kept
        with pytest.raises(InvalidArgument, match="not sorted"):
            decoded(bad, cache)
    with pytest.raises(InvalidArgument, match="no metric name"):
        decoded(request(([], [(T0, 1.0)])).SerializeToString(), cache)


def test_requests_sharing_a_cache_take_their_own_series_tags() -> None:
    """Series numbered by earlier requests, with tags those requests had and this one has not,
    give this request's rows their own tags (the others' columns are null here)."""
    cache = SeriesCache()
    decoded(request(([("__name__", "m"), ("a", "1")], [(T0, 1.0)])).SerializeToString(), cache)
    decoded(request(([("__name__", "m"), ("b", "2")], [(T0, 2.0)])).SerializeToString(), cache)
    req = request(
        ([("__name__", "m"), ("b", "2")], [(T0, 3.0)]),
        ([("__name__", "m"), ("a", "1")], [(T0, 4.0)]),
    )
    got = tables(decoded(req.SerializeToString(), cache))["m"]
    assert [(r.get("a"), r.get("b"), r["value"]) for r in got] == [
        (None, "2", 3.0),
        ("1", None, 4.0),
    ]


_names = st.sampled_from(["__name__", "a", "b", "job", "le"])
_series = st.tuples(
    st.lists(st.tuples(_names, st.text(max_size=140)), max_size=4).map(
        lambda labels: [
            ("__name__", "m"),
            *sorted({n: v for n, v in labels if n != "__name__"}.items()),
        ]
    ),
    st.lists(
        st.tuples(
            st.integers(-62_135_596_800_000, 253_402_300_799_999),  # as datetimes read them
            st.floats(allow_nan=False) | st.sampled_from([STALE, 0.0, -0.0]),
        ),
        max_size=3,
    ),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_series, max_size=6))
def test_any_body_reads_as_through_the_messages(series: list[Series]) -> None:
    req = request(*series)
    assert tables(decoded(req.SerializeToString())) == tables(through_messages(req))


_LABEL_VALUES = st.sampled_from(["", "a", "b", "é", "x" * 40])


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.fixed_dictionaries(
            {"job": _LABEL_VALUES, "instance": _LABEL_VALUES},
            optional={"code": _LABEL_VALUES},
        ),
        min_size=1,
        max_size=30,
    ),
    st.permutations(["code", "instance", "job", "zone"]),
    st.booleans(),
)
def test_series_tsids_are_the_tsids_of_their_rows(
    written: list[dict[str, str]], order: list[str], untagged_zero: bool
) -> None:
    """The tsids a request's rows take from their numbered series (hashed once per series,
    for a table's tags in its schema order, a tag the metric never had among them) are those
    the engine computes from the rows' own tags; so again once more series arrived."""
    cache = SeriesCache()
    half = len(written) // 2
    for part in (written[:half], written[half:]):
        req = request(
            *(
                ([("__name__", "m"), *sorted(labels.items())], [(T0 + i, 1.0)])
                for i, labels in enumerate(part)
            )
        )
        (rows,) = [t for t in decoded(req.SerializeToString(), cache) if t.table == "m"] or [None]
        if rows is None:
            continue
        assert rows.series is not None
        data = rows.arrow("timestamp")
        n = data.num_rows
        columns = {
            name: data.column(name).combine_chunks()
            if name in data.column_names
            else pa.nulls(n, pa.string())
            for name in order
        }
        expected = tsid_of(columns, order, n, untagged_zero=untagged_zero)
        assert rows.series.tsids(order, untagged_zero=untagged_zero).equals(expected)
