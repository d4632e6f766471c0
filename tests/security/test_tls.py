"""TLS round trips on HTTP (Python's client and curl), gRPC and Arrow Flight with a throwaway
CA. The HoraeDB SDK (horaedb-client 2.0) cannot speak TLS (its Rust client is built without
it): gRPC is tried with grpcio, as its other users would."""

from __future__ import annotations

import json
import ssl
import subprocess
import urllib.request
from pathlib import Path

import grpc
import pyarrow.flight as flight
import pytest

from gnomon.flight.ticket import QuerySpec
from gnomon.proto import storage_pb2
from node.security.ca import make_ca
from tests.server.conftest import start_standalone

pytestmark = pytest.mark.integration


def _curl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["curl", "-sS", "--max-time", "30", *args], capture_output=True, text=True, timeout=60
    )


def test_tls_on_every_protocol(tmp_path: Path) -> None:
    issued = make_ca(tmp_path / "ca")
    running = start_standalone(
        tmp_path / "data",
        tmp_path / "server.log",
        "--tls-cert",
        str(issued.cert),
        "--tls-key",
        str(issued.key),
    )
    try:
        trust = ssl.create_default_context(cafile=str(issued.ca))
        req = urllib.request.Request(
            f"https://127.0.0.1:{running.http_port}/sql",
            data=json.dumps({"query": "SELECT 1 AS one"}).encode(),
            method="POST",
        )
        with urllib.request.urlopen(req, context=trust, timeout=30) as resp:
            assert json.loads(resp.read()) == {"rows": [{"one": 1}]}
        url = f"https://127.0.0.1:{running.http_port}/sql"
        body = ["-H", "Content-Type: application/json", "-d", '{"query": "SELECT 2 AS two"}']
        done = _curl("--cacert", str(issued.ca), *body, url)
        assert (done.returncode, json.loads(done.stdout)) == (0, {"rows": [{"two": 2}]})
        # Without the CA, curl does not trust the server (60: the peer's certificate).
        assert _curl(*body, url).returncode == 60

        creds = grpc.ssl_channel_credentials(root_certificates=issued.ca.read_bytes())
        with grpc.secure_channel(running.grpc_endpoint, creds) as channel:
            call = channel.unary_unary(
                "/storage.StorageService/SqlQuery",
                request_serializer=storage_pb2.SqlQueryRequest.SerializeToString,
                response_deserializer=storage_pb2.SqlQueryResponse.FromString,
            )
            answer = call(
                storage_pb2.SqlQueryRequest(
                    context=storage_pb2.RequestContext(database="public"), sql="SELECT 1"
                ),
                timeout=30,
            )
            assert answer.header.code == 200

        client = flight.connect(
            f"grpc+tls://127.0.0.1:{running.flight_port}",
            tls_root_certs=issued.ca.read_bytes(),  # type: ignore[arg-type]  # takes bytes too
        )
        with client:
            table = client.do_get(flight.Ticket(QuerySpec("SELECT 1 AS one").to_json())).read_all()
            assert table.column("one").to_pylist() == [1]
    finally:
        running.server.stop()
