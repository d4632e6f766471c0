"""``gnomon meta`` without etcd: refused at start with one line naming etcd; later, while etcd
does not answer, not ready (the gRPC health service says NOT_SERVING), saying so once in its
log, and quick to stop; ready again once etcd answers. The health service needs no cluster
secret (probes hold none)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2

from gnomon.errors import Unauthenticated
from gnomon.peer import SECRET_ENV
from meta.client import MetaClient
from testkit.etcd import EtcdServer
from testkit.procs import Server, free_port
from testkit.wait import wait_until

from .conftest import WAIT_S

pytestmark = pytest.mark.integration

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
#: How long a meta instance may take to stop on SIGTERM, etcd or no etcd.
STOP_BOUND_S = 4.0
#: Long enough for a campaign round on a stopped etcd to time out (its calls wait 5 s).
OUTAGE_SEEN_S = 20.0


def meta_argv(etcd: str, port: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "gnomon_app.cli",
        "--log-level=INFO",
        "meta",
        f"--etcd={etcd}",
        f"--grpc-port={port}",
        "--namespace=/outage",
        "--election-ttl-s=2",
    ]


def health(port: int) -> int | None:
    """The instance's health status (None: no answer)."""
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        check = channel.unary_unary(
            "/grpc.health.v1.Health/Check",
            request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
            response_deserializer=health_pb2.HealthCheckResponse.FromString,
        )
        try:
            answer = check(health_pb2.HealthCheckRequest(), timeout=2)
        except grpc.RpcError:
            return None
        return int(answer.status)


def test_meta_refuses_to_start_without_etcd() -> None:
    etcd = f"127.0.0.1:{free_port()}"
    started = time.monotonic()
    done = subprocess.run(meta_argv(etcd, free_port()), capture_output=True, text=True, timeout=30)
    assert time.monotonic() - started < 15
    assert done.returncode == 2, done.stdout + done.stderr
    assert "meta listening" not in done.stdout
    assert "Traceback" not in done.stderr
    said = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(said) == 1, done.stderr
    assert said[0].startswith(f"gnomon meta: etcd at {etcd} is unavailable")


def test_meta_is_not_ready_while_etcd_is_away_and_stops_quickly(tmp_path: Path) -> None:
    etcd = EtcdServer(tmp_path)
    etcd.start()
    assert etcd.server is not None
    port = free_port()
    meta = Server(
        meta_argv(etcd.endpoint, port), log=tmp_path / "meta.log", env={SECRET_ENV: "s3cret"}
    )
    try:
        meta.wait_for_port(port)
        wait_until("meta ready", lambda: health(port) == SERVING, timeout_s=WAIT_S)
        with (
            MetaClient(f"127.0.0.1:{port}", retry_for_s=0) as client,
            pytest.raises(Unauthenticated, match="cluster secret"),
        ):
            client.shards()
        # A stopped etcd: connections stay open, calls go unanswered until their deadline.
        etcd.server.kill(signal.SIGSTOP)
        try:
            wait_until(
                "meta not ready while etcd is stopped",
                lambda: health(port) == NOT_SERVING,
                timeout_s=OUTAGE_SEEN_S,
            )
        finally:
            etcd.server.kill(signal.SIGCONT)
        wait_until("meta ready again", lambda: health(port) == SERVING, timeout_s=OUTAGE_SEEN_S)
        etcd.server.kill(signal.SIGSTOP)
        try:
            wait_until(
                "meta not ready while etcd is stopped again",
                lambda: health(port) == NOT_SERVING,
                timeout_s=OUTAGE_SEEN_S,
            )
            started = time.monotonic()
            meta.kill(signal.SIGTERM)
            assert meta.proc.wait(timeout=30) == 0
            assert time.monotonic() - started < STOP_BOUND_S
        finally:
            etcd.server.kill(signal.SIGCONT)
        log = meta.log.read_text()
        # Once per outage, not once a round.
        assert log.count("campaign failed; not ready until etcd answers again") == 2, log
        assert log.count("etcd answers again; ready") == 1, log
    finally:
        meta.stop()
        etcd.stop()
