"""Lifecycle of the standalone server: graceful stop on SIGTERM (requests in flight finish, the
engine is flushed and closed), port conflicts, bad settings."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import grpc
import pyarrow as pa
import pytest

from gnomon.errors import Unavailable
from gnomon.metrics import Registry
from gnomon.proto import storage_pb2 as pb
from node.backends import open_standalone
from node.ingest.writer import Ingestor
from node.server.grpc_service import GrpcServer, StorageService
from node.server.http import HttpApp, HttpServer
from node.server.standalone import Standalone
from node.sql.result import QueryResult
from tests.server.conftest import REPO, start_standalone

pytestmark = pytest.mark.integration


def test_sigterm_flushes_and_closes(tmp_path: Path) -> None:
    running = start_standalone(tmp_path / "data", tmp_path / "server.log")
    try:
        status, _, _ = running.request(
            "POST", "/influxdb/v1/write?precision=ms", b"s_cpu,host=a v=1 1000\ns_cpu v=2 2000"
        )
        assert status == 204
        running.server.kill(signal.SIGTERM)
        assert running.server.proc.wait(timeout=30) == 0
    finally:
        running.server.stop()
    log = (tmp_path / "server.log").read_text()
    assert "stopping on signal" in log and "engine closed" in log
    # What startup made is kept out of the collector's full collections.
    records = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
    frozen = [r for r in records if r["msg"] == "startup objects frozen"]
    assert len(frozen) == 1 and frozen[0]["objects"] > 10_000, log
    # Flushed on the way out: the rows are in SSTs, not only in the WAL.
    assert list((tmp_path / "data" / "sst").rglob("*.parquet"))
    with open_standalone(str(tmp_path / "data"), wal_sync="never") as engine:
        assert sorted(engine.read_all("s_cpu", columns=["v"]).column("v").to_pylist()) == [1, 2]


def _slow(seconds: float) -> Any:
    def execute(sql: str) -> QueryResult:
        time.sleep(seconds)
        return QueryResult.rows(pa.table({"x": [1]}))

    return execute


def test_stop_lets_requests_in_flight_finish(tmp_path: Path) -> None:
    with open_standalone(str(tmp_path / "data"), wal_sync="never") as engine:
        metrics = Registry()
        ingestor = Ingestor(engine)
        app = HttpApp(
            ingestor=ingestor,
            execute=_slow(1.0),
            metrics=metrics,
            max_body_bytes=1024**2,
            healthy=lambda: True,
        )
        http_server = HttpServer(app, port=0)
        http_port = http_server.start()
        service = StorageService(ingestor, _slow(1.0), metrics)
        grpc_server = GrpcServer(service, port=0)
        grpc_port = grpc_server.start()

        results: dict[str, Any] = {}

        def http_call() -> None:
            req = urllib.request.Request(
                f"http://127.0.0.1:{http_port}/sql", data=b'{"query": "SELECT 1"}'
            )
            with urllib.request.urlopen(req, timeout=10) as resp:
                results["http"] = (resp.status, json.loads(resp.read()))

        def grpc_call() -> None:
            with grpc.insecure_channel(f"127.0.0.1:{grpc_port}") as ch:
                call = ch.unary_unary(
                    "/storage.StorageService/SqlQuery",
                    request_serializer=pb.SqlQueryRequest.SerializeToString,
                    response_deserializer=pb.SqlQueryResponse.FromString,
                )
                ctx = pb.RequestContext(database="public")
                results["grpc"] = call(pb.SqlQueryRequest(context=ctx, sql="SELECT 1"), timeout=10)

        threads = [threading.Thread(target=http_call), threading.Thread(target=grpc_call)]
        for t in threads:
            t.start()
        time.sleep(0.3)
        stoppers = [
            threading.Thread(target=http_server.stop, args=(5.0,)),
            threading.Thread(target=grpc_server.stop, args=(5.0,)),
        ]
        for t in stoppers:
            t.start()
        for t in threads + stoppers:
            t.join(timeout=15)
        assert results["http"] == (200, {"rows": [{"x": 1}]})
        assert results["grpc"].header.code == 200
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", http_port), timeout=1).close()


def test_port_in_use_fails_start_and_releases_the_engine(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        server = Standalone(
            str(tmp_path / "data"), http_port=port, grpc_port=0, flight_port=0, wal_sync="never"
        )
        with pytest.raises(Unavailable, match=f"HTTP port {port} on 127.0.0.1 is in use"):
            server.start()
    # The engine was closed again: the data directory opens cleanly.
    open_standalone(str(tmp_path / "data"), wal_sync="never").close()


def test_main_rejects_bad_settings(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "gnomon_app.cli",
            "standalone",
            "--data-dir",
            str(tmp_path / "d"),
            "--advertise",
            "no-port",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    assert "invalid advertised endpoint 'no-port'" in proc.stderr
