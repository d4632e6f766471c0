"""A real standalone gnomon for the Prometheus tests, and remote-storage request builders."""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pytest

from gnomon.proto import prometheus_pb2
from node.prom.wire import snappy, unsnappy
from testkit.prometheus import WRITE_HEADERS
from tests.server.conftest import Running, start_standalone

#: Prometheus's staleness marker: a NaN with this bit pattern.
STALE_BITS = 0x7FF0000000000002
STALE = struct.unpack("<d", struct.pack("<Q", STALE_BITS))[0]

#: One series: its labels (``__name__`` among them; a mapping is sent sorted, pairs as they
#: are) and samples (ms, value).
Series = tuple[Mapping[str, str] | Sequence[tuple[str, str]], Sequence[tuple[int, float]]]


def write_request(series: Sequence[Series]) -> bytes:
    req = prometheus_pb2.WriteRequest()
    for labels, samples in series:
        ts = req.timeseries.add()
        items = sorted(labels.items()) if isinstance(labels, Mapping) else list(labels)
        ts.labels.extend(prometheus_pb2.Label(name=k, value=v) for k, v in items)
        ts.samples.extend(prometheus_pb2.Sample(timestamp=t, value=v) for t, v in samples)
    return req.SerializeToString()


def bits(value: float) -> int:
    return int(struct.unpack("<Q", struct.pack("<d", value))[0])


def is_stale(value: float) -> bool:
    return math.isnan(value) and bits(value) == STALE_BITS


class Prom:
    """A running gnomon spoken to as Prometheus would."""

    def __init__(self, running: Running) -> None:
        self.running = running

    def write(self, series: Sequence[Series], path: str = "/api/v1/write") -> tuple[int, bytes]:
        return self.write_raw(snappy(write_request(series)), path)

    def write_raw(self, body: bytes, path: str = "/api/v1/write") -> tuple[int, bytes]:
        status, _, text = self.running.request("POST", path, body, WRITE_HEADERS)
        return status, text

    def read(
        self, query: prometheus_pb2.Query, path: str = "/api/v1/read"
    ) -> prometheus_pb2.QueryResult:
        req = prometheus_pb2.ReadRequest(
            queries=[query], accepted_response_types=[prometheus_pb2.ReadRequest.SAMPLES]
        )
        status, headers, body = self.running.request(
            "POST", path, snappy(req.SerializeToString()), WRITE_HEADERS
        )
        assert status == 200, body
        assert headers["Content-Encoding"] == "snappy"
        resp = prometheus_pb2.ReadResponse()
        resp.ParseFromString(unsnappy(body, 1 << 30))
        return resp.results[0]

    def api(self, path: str, **params: str) -> tuple[int, dict[str, object]]:
        from urllib.parse import urlencode

        status, _, body = self.running.request("GET", f"{path}?{urlencode(params)}")
        return status, json.loads(body)


@pytest.fixture(scope="module")
def gnomon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    root: Path = tmp_path_factory.mktemp("gnomon")
    # No PostgreSQL listener: its fixed default port would collide with other servers'.
    running = start_standalone(root / "data", root / "server.log", "--pg-port", "0")
    yield running
    running.server.stop()


@pytest.fixture(scope="module")
def prom(gnomon: Running) -> Prom:
    return Prom(gnomon)
