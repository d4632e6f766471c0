"""The HTTP server benchmark at tiny scale: gnomon's server from this tree and both library
candidates serve every figure, and the gRPC answer written around its payload is protobuf's
bytes."""

from __future__ import annotations

import json

import pytest

from bench import http_server

pytestmark = pytest.mark.integration


def test_every_server_gets_every_figure(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--candidates", "aiohttp,uvicorn", "--sql-requests", "10", "--rows", "8"]
    assert http_server.main([*argv, "--batches", "2"]) == 0
    doc = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert set(doc["figures"]) == {"gnomon", "aiohttp", "uvicorn"}
    for figures in doc["figures"].values():
        assert set(figures) == {
            "health_p50_us",
            "sql_p50_ms",
            "sql_p99_ms",
            "writes_1_client_rows_s",
            "writes_8_clients_rows_s",
            "batches_500_lines_rows_s",
        }
        assert all(value > 0 for value in figures.values())
    assert set(doc["grpc_sql_response_6_4_mb"]) == {
        "encode_spliced_ms",
        "encode_protobuf_ms",
        "decode_in_place_ms",
        "decode_protobuf_ms",
    }
