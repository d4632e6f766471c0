"""A real standalone gnomon in a subprocess, shared by the server tests of a module."""

from __future__ import annotations

import http.client
import json
import socket
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from testkit.procs import Server

REPO = Path(__file__).resolve().parents[2]
#: Small enough to test 413 cheaply, large enough for the 5 MB SDK write.
MAX_REQUEST_BYTES = 8 * 1024**2
#: SQL results from this size on go zstd-compressed over gRPC.
COMPRESS_MIN_BYTES = 64 * 1024


@dataclass
class Running:
    http_port: int
    grpc_port: int
    flight_port: int
    data_dir: Path
    server: Server

    @property
    def grpc_endpoint(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    def request(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> tuple[int, dict[str, str], bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.http_port, timeout=30)
        try:
            conn.request(method, path, body=body, headers=dict(headers or {}))
            resp = conn.getresponse()
            return resp.status, dict(resp.getheaders()), resp.read()
        finally:
            conn.close()

    def sql(self, query: str) -> tuple[int, Any]:
        status, _, body = self.request(
            "POST",
            "/sql",
            json.dumps({"query": query}).encode(),
            {"Content-Type": "application/json"},
        )
        return status, json.loads(body)


def read_until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends on ``sock`` until it closes the connection."""
    data = b""
    for _ in range(10_000):
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def start_standalone(data_dir: Path, log: Path, *extra: str) -> Running:
    """``gnomon standalone`` on ports it picks (``extra`` may set others), once serving."""
    server, ports = Server.start_gnomon(
        [
            sys.executable,
            "-m",
            "gnomon_app.cli",
            "standalone",
            "--data-dir",
            str(data_dir),
            "--http-port=0",
            "--grpc-port=0",
            "--flight-port=0",
            "--wal-sync",
            "never",
            "--max-request-bytes",
            str(MAX_REQUEST_BYTES),
            "--compress-min-bytes",
            str(COMPRESS_MIN_BYTES),
            *extra,
        ],
        log=log,
        cwd=REPO,
    )
    return Running(ports["http"], ports["grpc"], ports["flight"], data_dir, server)


@pytest.fixture(scope="module")
def gnomon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    root = tmp_path_factory.mktemp("gnomon")
    running = start_standalone(root / "data", root / "server.log")
    yield running
    running.server.stop()
