"""VictoriaMetrics for the benchmark's ingest side: installed from the Debian package when
``victoria-metrics`` is missing, run on a loopback port with its data in a scratch directory,
written through its InfluxDB line-protocol endpoint (``/write``), as InfluxDB is. Its queries
are PromQL/MetricsQL, which the TSBS query set is not written in: it gives ingest rows/s,
bytes per row and peak memory, and counts the rows it stored.

It acknowledges a write once the rows are in memory, before they are on disk (InfluxDB and
gnomon fsync their WAL first). The default retention (a month) would drop TSBS's 2016
timestamps, and the default listener is on every interface.
"""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from pathlib import Path

import pyarrow as pa

from bench.tsbs.serving import HttpClient, Process, disk_bytes, http_ok, wait_until
from bench.tsbs.system import (
    Dialect,
    Workload,
    apt_binary,
    apt_unavailable,
    loaded,
    settle_size,
)
from testkit.procs import on_free_ports

BINARY, PACKAGE = "victoria-metrics", "victoria-metrics"


class VictoriaServer:
    """One victoria-metrics with its data under ``root``, holding rows of
    ``[start_ms, end_ms)``."""

    name = "victoriametrics"

    def __init__(self, root: Path, *, start_ms: int, end_ms: int, binary: str) -> None:
        self.root = root
        self.start_ms, self.end_ms = start_ms, end_ms
        root.mkdir(parents=True, exist_ok=True)

        def start(ports: tuple[int, ...]) -> Process:
            process = Process(
                [
                    binary,
                    f"-storageDataPath={root / 'data'}",
                    f"-httpListenAddr=127.0.0.1:{ports[0]}",
                    "-retentionPeriod=100y",
                    "-loggerLevel=WARN",
                ],
                log=root / "victoria-metrics.log",
            )
            process.wait_for_port(ports[0], timeout_s=60)
            return process

        self.process, (self.http_port,) = on_free_ports(start)
        self.base = f"http://127.0.0.1:{self.http_port}"
        self.http = HttpClient(self.http_port)
        wait_until(lambda: http_ok(f"{self.base}/health"), timeout_s=30, what="victoria /health")

    @property
    def pids(self) -> tuple[int, ...]:
        return (self.process.pid,)

    def write(self, body: bytes) -> None:
        """One line-protocol request (millisecond timestamps)."""
        self.http.post("/write?precision=ms", body)

    def flush(self) -> None:
        """Rows held in memory written out and searchable."""
        with urllib.request.urlopen(f"{self.base}/internal/force_flush", timeout=60):
            pass

    def query(self, metricsql: str) -> pa.Table:
        """An instant MetricsQL query at the end of the data: one row per series, its labels
        and ``value``."""
        params = {"query": metricsql, "time": f"{(self.end_ms - 1) / 1000:.3f}"}
        url = f"{self.base}/api/v1/query?{urllib.parse.urlencode(params)}"
        with urllib.request.urlopen(url, timeout=300) as resp:
            doc = json.loads(resp.read())
        if doc.get("status") != "success":
            raise RuntimeError(f"victoriametrics: {doc}")
        result = doc["data"]["result"]
        labels = sorted({k for r in result for k in r["metric"]})
        cols: dict[str, list[object]] = {k: [r["metric"].get(k) for r in result] for k in labels}
        cols["value"] = [float(r["value"][1]) for r in result]
        return pa.table(cols)

    def stored_rows(self) -> int:
        """Samples of one field over the whole span (each row stores one of each field)."""
        window_ms = self.end_ms - self.start_ms
        answer = self.query(f"sum(count_over_time(cpu_usage_user[{window_ms}ms]))")
        return int(answer.column("value")[0].as_py()) if answer.num_rows else 0

    def disk_bytes(self) -> int:
        return disk_bytes(self.root / "data")

    def peak_rss(self) -> int | None:
        return self.process.peak_rss

    def stop(self) -> None:
        self.process.stop()


class VictoriaKind:
    name = "victoriametrics"
    dialect: Dialect | None = None
    loaders = ("victoriametrics",)
    encodings = ("line-protocol",)

    def unavailable(self) -> str | None:
        return apt_unavailable(BINARY, PACKAGE)

    def install(self) -> None:
        apt_binary(BINARY, PACKAGE)

    def load(self, loader: str, where: Path, work: Workload) -> tuple[VictoriaServer, float]:
        server = VictoriaServer(
            where, start_ms=work.start_ms, end_ms=work.end_ms, binary=apt_binary(BINARY, PACKAGE)
        )
        return loaded(server, server.write, work.payloads["line-protocol"], work.workers)

    def settle(self, system: VictoriaServer, quiet_s: float) -> VictoriaServer:
        system.flush()
        settle_size(system, quiet_s)
        return system
