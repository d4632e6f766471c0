"""Prometheus remote write and remote read against a real standalone gnomon."""

from __future__ import annotations

import math

import pytest

from gnomon.proto import prometheus_pb2
from node.prom.wire import snappy
from tests.prom.conftest import STALE, Prom, is_stale

pytestmark = pytest.mark.integration

T0 = 1_700_000_000_000


def test_write_maps_each_metric_to_a_table(prom: Prom) -> None:
    status, body = prom.write(
        [
            ({"__name__": "rw_up", "job": "a", "instance": "h1"}, [(T0, 1.0), (T0 + 15_000, 0.0)]),
            ({"__name__": "rw_up", "job": "b", "instance": "h2"}, [(T0, 1.0)]),
        ]
    )
    assert (status, body) == (204, b"")
    status, doc = prom.running.sql(
        "SELECT `timestamp`, job, instance, value FROM rw_up ORDER BY job, `timestamp`"
    )
    assert status == 200, doc
    assert doc["rows"] == [
        {"timestamp": T0, "job": "a", "instance": "h1", "value": 1.0},
        {"timestamp": T0 + 15_000, "job": "a", "instance": "h1", "value": 0.0},
        {"timestamp": T0, "job": "b", "instance": "h2", "value": 1.0},
    ]
    status, doc = prom.running.sql("SHOW CREATE TABLE rw_up")
    ddl = str(doc)
    assert "`instance` string TAG" in ddl and "`job` string TAG" in ddl and "`value` double" in ddl


def test_horaedb_path_and_new_labels_add_columns(prom: Prom) -> None:
    assert prom.write([({"__name__": "rw_new", "a": "1"}, [(T0, 1.0)])], "/prom/v1/write")[0] == 204
    assert prom.write([({"__name__": "rw_new", "a": "1", "b": "2"}, [(T0 + 1, 2.0)])])[0] == 204
    _, doc = prom.running.sql("SELECT a, b, value FROM rw_new ORDER BY value")
    assert doc["rows"] == [{"a": "1", "b": None, "value": 1.0}, {"a": "1", "b": "2", "value": 2.0}]


def test_staleness_markers_and_nan_are_kept(prom: Prom) -> None:
    nan = float("nan")
    assert (
        prom.write([({"__name__": "rw_stale"}, [(T0, 1.0), (T0 + 1, nan), (T0 + 2, STALE)])])[0]
        == 204
    )
    query = prometheus_pb2.Query(
        start_timestamp_ms=T0,
        end_timestamp_ms=T0 + 10,
        matchers=[prometheus_pb2.LabelMatcher(name="__name__", value="rw_stale")],
    )
    samples = prom.read(query).timeseries[0].samples
    assert [s.timestamp for s in samples] == [T0, T0 + 1, T0 + 2]
    assert samples[0].value == 1.0
    assert math.isnan(samples[1].value) and not is_stale(samples[1].value)
    assert is_stale(samples[2].value)


def test_remote_read_applies_matchers_and_range(prom: Prom) -> None:
    series = [
        (
            {"__name__": "rr_m", "job": job, "env": env},
            [(T0 + i * 1000, float(i)) for i in range(5)],
        )
        for job in ("api", "db", "web")
        for env in ("prod", "dev")
    ]
    assert prom.write(series)[0] == 204
    LM = prometheus_pb2.LabelMatcher
    query = prometheus_pb2.Query(
        start_timestamp_ms=T0 + 1000,
        end_timestamp_ms=T0 + 3000,
        matchers=[
            LM(name="__name__", value="rr_m"),
            LM(type=LM.RE, name="job", value="api|web"),
            LM(type=LM.NEQ, name="env", value="dev"),
        ],
    )
    result = prom.read(query, "/prom/v1/read")
    got = sorted(
        (
            tuple((lb.name, lb.value) for lb in ts.labels),
            [(s.timestamp, s.value) for s in ts.samples],
        )
        for ts in result.timeseries
    )
    samples = [(T0 + i * 1000, float(i)) for i in (1, 2, 3)]
    assert got == [
        ((("__name__", "rr_m"), ("env", "prod"), ("job", "api")), samples),
        ((("__name__", "rr_m"), ("env", "prod"), ("job", "web")), samples),
    ]
    # A metric that does not exist has no series.
    query.matchers[0].value = "rr_missing"
    assert not prom.read(query).timeseries


def test_metric_metadata_is_kept_and_answered(prom: Prom) -> None:
    MM = prometheus_pb2.MetricMetadata

    def send(help_text: str) -> None:
        req = prometheus_pb2.WriteRequest(
            metadata=[
                MM(type=MM.COUNTER, metric_family_name="md_requests_total", help=help_text),
                MM(
                    type=MM.GAUGE, metric_family_name="md_temperature", help="Heat.", unit="celsius"
                ),
            ]
        )
        status, body = prom.write_raw(snappy(req.SerializeToString()))
        assert status == 204, body

    send("Requests.")
    send("Requests served.")  # a newer description replaces the older
    status, doc = prom.api("/api/v1/metadata")
    assert status == 200
    assert doc["data"] == {
        "md_requests_total": [{"type": "counter", "help": "Requests served.", "unit": ""}],
        "md_temperature": [{"type": "gauge", "help": "Heat.", "unit": "celsius"}],
    }
    _, doc = prom.api("/api/v1/metadata", metric="md_temperature")
    assert list(doc["data"]) == ["md_temperature"]  # type: ignore[call-overload]
    _, doc = prom.api("/api/v1/metadata", limit="1")
    assert len(doc["data"]) == 1  # type: ignore[arg-type]
    # The metadata table is no metric.
    _, doc = prom.api("/api/v1/label/__name__/values")
    assert "prometheus_metadata" not in doc["data"]  # type: ignore[operator]
