"""What the cluster tests ask a running cluster: where tables live, SQL over HTTP and gRPC,
and line protocol over HTTP."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import grpc

from gnomon.proto import storage_pb2
from gnomon_app.devcluster.cluster import DevCluster
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


def storage_call(endpoint: str, method: str, request: Any, answer: Any) -> Any:
    """One call of the HoraeDB StorageService's ``method`` at ``endpoint`` (asserting its
    header says it succeeded): its answer, of the message type ``answer``."""
    with grpc.insecure_channel(endpoint) as channel:
        resp = channel.unary_unary(
            f"/storage.StorageService/{method}",
            request_serializer=type(request).SerializeToString,
            response_deserializer=answer.FromString,
        )(request, timeout=30)
    assert resp.header.code == 200, resp.header.error
    return resp


def grpc_rows(endpoint: str, query: str) -> list[dict[str, Any]]:
    """The rows of ``query`` through gRPC SqlQuery (asserting it succeeded)."""
    req = storage_pb2.SqlQueryRequest(tables=[], sql=query)
    req.context.database = "public"
    resp = storage_call(endpoint, "SqlQuery", req, storage_pb2.SqlQueryResponse)
    rows: list[dict[str, Any]] = decode(resp.arrow).to_pylist()
    return rows


def grpc_write(endpoint: str, table: str, host: str, v: float, ts: int) -> int:
    """One row (a ``host`` tag, a ``v`` field) written by a gRPC Write, the HoraeDB SDK's
    request, to ``endpoint``: the rows it acknowledged."""
    req = storage_pb2.WriteRequest()
    req.context.database = "public"
    t = req.table_requests.add(table=table, tag_names=["host"], field_names=["v"])
    entry = t.entries.add()
    entry.tags.add(name_index=0).value.string_value = host
    entry.field_groups.add(timestamp=ts).fields.add(name_index=0).value.float64_value = v
    return int(storage_call(endpoint, "Write", req, storage_pb2.WriteResponse).success)
