"""What the cluster tests ask a running cluster: where tables live, SQL over HTTP and gRPC,
and line protocol over HTTP."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import grpc

from gnomon.devcluster.cluster import DevCluster
from gnomon.proto import storage_pb2
from meta.client import MetaClient
from tests.server.test_grpc import decode


def owners(cluster: DevCluster, tables: list[str]) -> dict[str, str]:
    """The gRPC endpoint of each table's owner, as the meta service routes it."""
    with MetaClient(cluster.meta) as client:
        return {r.table: r.endpoint for r in client.route(tables)}


def post(endpoint: str, path: str, body: bytes) -> tuple[int, Any]:
    """Status and JSON answer (None when empty) of an HTTP POST."""
    req = urllib.request.Request(f"http://{endpoint}{path}", data=body, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            data = resp.read()
            return resp.status, json.loads(data) if data else None
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def http_sql(endpoint: str, query: str) -> tuple[int, Any]:
    return post(endpoint, "/sql", json.dumps({"query": query}).encode())


def write_lines(endpoint: str, text: str) -> tuple[int, Any]:
    return post(endpoint, "/influxdb/v1/write?db=public&precision=ms", text.encode())


def grpc_rows(endpoint: str, query: str) -> list[dict[str, Any]]:
    """The rows of ``query`` through gRPC SqlQuery (asserting it succeeded)."""
    req = storage_pb2.SqlQueryRequest(tables=[], sql=query)
    req.context.database = "public"
    with grpc.insecure_channel(endpoint) as channel:
        resp = channel.unary_unary(
            "/storage.StorageService/SqlQuery",
            request_serializer=storage_pb2.SqlQueryRequest.SerializeToString,
            response_deserializer=storage_pb2.SqlQueryResponse.FromString,
        )(req, timeout=30)
    assert resp.header.code == 200, resp.header.error
    rows: list[dict[str, Any]] = decode(resp.arrow).to_pylist()
    return rows
