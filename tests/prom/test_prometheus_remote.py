"""A real Prometheus 2.42 configured with the README's remote_write / remote_read block: it
scrapes gnomon's own /metrics and writes the samples into gnomon, where PromQL answers what
Prometheus answers; and it reads back through gnomon what only gnomon holds."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from testkit import prometheus as prom_server
from tests.docs.readme import Ports, blocks
from tests.prom.conftest import Prom
from tests.prom.test_differential import _same

pytestmark = pytest.mark.integration

WAIT_S = 90


def _config(prom: Prom) -> str:
    block = next(b for b in blocks() if b.lang == "yaml" and "remote_write" in b.text)
    ports = Ports(prom.running.http_port, prom.running.grpc_port, prom.running.flight_port)
    return (
        "global:\n  scrape_interval: 1s\n"
        "scrape_configs:\n  - job_name: gnomon\n    static_configs:\n"
        f"      - targets: ['127.0.0.1:{prom.running.http_port}']\n" + ports.apply(block.text)
    )


@pytest.fixture(scope="module")
def prometheus(
    tmp_path_factory: pytest.TempPathFactory, prom: Prom
) -> Iterator[prom_server.Prometheus]:
    binary, _ = prom_server.prometheus_binaries()
    root: Path = tmp_path_factory.mktemp("prometheus")
    with prom_server.running(binary, root, _config(prom)) as server:
        yield server


def _latest_up(prom: Prom) -> list[float]:
    """The times (seconds) of gnomon's stored samples of up{job="gnomon"} in the last minute."""
    status, doc = prom.api("/api/v1/query", query='up{job="gnomon"}[1m]', time=str(time.time()))
    assert status == 200, doc
    result = doc["data"]["result"]  # type: ignore[index]
    return [float(t) for t, _ in result[0]["values"]] if result else []


def test_remote_written_samples_answer_as_in_prometheus(
    prometheus: prom_server.Prometheus, prom: Prom
) -> None:
    deadline = time.monotonic() + WAIT_S
    times = _latest_up(prom)
    while len(times) < 6 and time.monotonic() < deadline:
        time.sleep(1)
        times = _latest_up(prom)
    assert len(times) >= 6, "Prometheus did not remote-write the scrapes to gnomon"
    # A scrape whose samples have all arrived: later ones have.
    t = str(times[-3])
    for query in (
        "up",
        "count_over_time(up[4s])",
        "scrape_samples_scraped",
        'sum by (job) (scrape_series_added{job="gnomon"})',
    ):
        status, want = prometheus.get("/api/v1/query", query=query, time=t)
        assert status == 200, want
        status, got = prom.api("/api/v1/query", query=query, time=t)
        assert status == 200, got
        _same(want["data"], got["data"])  # type: ignore[arg-type]


def test_prometheus_reads_back_through_gnomon(
    prometheus: prom_server.Prometheus, prom: Prom
) -> None:
    now_ms = int(time.time() * 1000)
    status, body = prom.write([({"__name__": "only_in_gnomon", "k": "v"}, [(now_ms - 5000, 42.0)])])
    assert status == 204, body
    status, doc = prometheus.get("/api/v1/query", query="only_in_gnomon", time=str(now_ms / 1000))
    assert status == 200, doc
    assert [(s["metric"], s["value"][1]) for s in doc["data"]["result"]] == [
        ({"__name__": "only_in_gnomon", "k": "v"}, "42")
    ]
