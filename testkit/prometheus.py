"""A real Prometheus (Debian's package, installed when missing) for the differential tests:
its TSDB filled from OpenMetrics text with promtool, or its remote write pointed at gnomon."""

from __future__ import annotations

import http.client
import json
import shutil
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from testkit.debian import PackageUnavailable, apt_install
from testkit.procs import PortTaken, on_free_ports

READY_TIMEOUT_S = 60
#: The headers of a Prometheus remote-write request (version 1.0).
WRITE_HEADERS = {
    "Content-Type": "application/x-protobuf",
    "Content-Encoding": "snappy",
    "X-Prometheus-Remote-Write-Version": "0.1.0",
}


def find_binaries() -> tuple[str, str]:
    """prometheus and promtool, installing Debian's package when missing (as root);
    PackageUnavailable if they cannot be had."""
    if shutil.which("prometheus") is None or shutil.which("promtool") is None:
        apt_install("prometheus")
    prometheus, promtool = shutil.which("prometheus"), shutil.which("promtool")
    if prometheus is None or promtool is None:
        raise PackageUnavailable("the prometheus package installs no prometheus or promtool")
    return prometheus, promtool


def prometheus_binaries() -> tuple[str, str]:
    """:func:`find_binaries`, the test skipped without them."""
    try:
        return find_binaries()
    except PackageUnavailable as e:
        pytest.skip(str(e))


class Prometheus:
    def __init__(self, port: int, pid: int) -> None:
        self.port = port
        self.pid = pid

    def get(self, path: str, **params: str) -> tuple[int, Any]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            conn.request("GET", f"{path}?{urlencode(params)}")
            resp = conn.getresponse()
            return resp.status, json.loads(resp.read() or b"null")
        finally:
            conn.close()


def backfill(promtool: str, openmetrics: str, data_dir: Path) -> None:
    source = data_dir.parent / "samples.om"
    source.write_text(openmetrics)
    subprocess.run(
        [promtool, "tsdb", "create-blocks-from", "openmetrics", str(source), str(data_dir)],
        check=True,
        capture_output=True,
        timeout=300,
    )


@contextmanager
def running(
    prometheus: str, root: Path, config: str, flags: Sequence[str] = ()
) -> Iterator[Prometheus]:
    """Prometheus on a free port with ``config`` and the command-line ``flags``, its TSDB in
    ``root / "data"``."""
    (root / "prometheus.yml").write_text(config)
    procs: list[subprocess.Popen[bytes]] = []

    def start(ports: tuple[int, ...]) -> Prometheus:
        log = (root / "prometheus.log").open("wb")
        proc = subprocess.Popen(
            [
                prometheus,
                f"--config.file={root / 'prometheus.yml'}",
                f"--storage.tsdb.path={root / 'data'}",
                "--storage.tsdb.retention.time=100y",
                f"--web.listen-address=127.0.0.1:{ports[0]}",
                *flags,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        procs.append(proc)
        server = Prometheus(ports[0], proc.pid)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                if "address already in use" in (root / "prometheus.log").read_text():
                    raise PortTaken(f"port {ports[0]} was taken")
                raise RuntimeError(f"prometheus exited: {(root / 'prometheus.log').read_text()}")
            try:
                conn = http.client.HTTPConnection("127.0.0.1", ports[0], timeout=2)
                conn.request("GET", "/-/ready")
                if conn.getresponse().status == 200:
                    return server
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError("prometheus did not become ready")

    try:
        server, _ = on_free_ports(start)
        yield server
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=30)
