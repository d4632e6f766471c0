"""Hostile requests to a cluster with authentication on, through every node: gRPC writes and
queries, SQL and line protocol over HTTP, with fuzzed names and forged forwarding metadata
(a claimed node, a claimed user, a made-up cluster secret). Each gets a clean answer, never
an internal error or a crash, and a refused request stores nothing: the seeded table keeps
its rows, and the meta service records no table but those the campaign's setup made."""

from __future__ import annotations

import http.client
import json
import os
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gnomon.names import check_table_name
from gnomon.peer import AUTHORIZATION, CLUSTER_SCHEME, ON_BEHALF_OF
from gnomon.proto import storage_pb2
from gnomon_app.devcluster.cluster import DevCluster, NodeEndpoints
from meta.client import MetaClient
from node.cluster.forward import FORWARDED_FROM
from node.security.principal import Privilege
from tests.fuzz import strategies as fz
from tests.fuzz.conftest import CREATE, FUZZ, FUZZER, SEED_ROWS, basic
from tests.fuzz.test_grpc import CLEAN_CODES
from tests.fuzz.test_http import _clean

pytestmark = pytest.mark.cluster

SETUP_TABLES = (fz.SEED, fz.PLAYGROUND, "fuzz_other")
#: Examples per campaign here: each crosses nodes, so the suite asks fewer than of the
#: standalone campaigns; the long run sets ``GNOMON_FUZZ_CLUSTER_EXAMPLES`` (100000).
CLUSTER_FUZZ = settings(
    FUZZ, max_examples=int(os.environ.get("GNOMON_FUZZ_CLUSTER_EXAMPLES", "200"))
)

#: Metadata a caller may forge: a node it claims to come from, a user it claims to act for,
#: a cluster secret it makes up, beside or instead of its own credentials.
_FORGED = st.lists(
    st.one_of(
        st.tuples(st.just(FORWARDED_FROM), st.sampled_from(["127.0.0.1:1", "node-x", ""])),
        st.tuples(st.just(ON_BEHALF_OF), st.sampled_from(["root", "admin", "", "fuzzer"])),
        st.tuples(
            st.just(AUTHORIZATION),
            st.sampled_from(
                [f"{CLUSTER_SCHEME} made-up", f"{CLUSTER_SCHEME} ", "Basic " + "QQ==" * 4]
            ),
        ),
    ),
    max_size=3,
    unique_by=lambda kv: kv[0],
)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    """Three nodes, the fuzzer's grants as on the standalone campaign's server; the seed and
    the meta service's tables are checked when the campaign is over."""
    with DevCluster(
        tmp_path_factory.mktemp("fuzz-cluster"), nodes=3, shards=6, auth=True
    ) as running:
        assert running.admin is not None
        with running.accounts() as accounts:
            accounts.create_user(*FUZZER)
            accounts.grant(FUZZER[0], Privilege.READ, fz.SEED)
            accounts.grant(FUZZER[0], Privilege.ADMIN, fz.PLAYGROUND)
        root = basic(*running.admin)
        for table in SETUP_TABLES:
            assert _sql(running.node_endpoints[0], root, CREATE.format(table))[0] == 200
        values = ", ".join(f"('{r['host']}', {r['v']}, {r['ts']})" for r in SEED_ROWS)
        insert = f"INSERT INTO {fz.SEED} (host, v, ts) VALUES {values}"
        assert _sql(running.node_endpoints[1], root, insert)[0] == 200
        yield running
        for node in running.node_endpoints:
            status, body = _sql(node, root, f"SELECT host, v, ts FROM {fz.SEED} ORDER BY ts")
            assert status == 200, body
            rows = [{"host": r["host"], "v": r["v"], "ts": r["ts"]} for r in body["rows"]]
            assert rows == SEED_ROWS, node.http
            status, body = _sql(node, root, "SELECT count(*) AS n FROM fuzz_other")
            assert (status, body["rows"]) == (200, [{"n": 0}]), body
        with MetaClient(running.meta, peer=running.peer) as client:
            names = {t.name for t in client.tables()}
        assert names <= set(SETUP_TABLES), names - set(SETUP_TABLES)
        for name in names:
            check_table_name(name)
        for name, server in running.processes.items():
            assert server.proc.poll() is None, f"{name} died during the campaign"


def _sql(node: NodeEndpoints, auth: str, query: str) -> tuple[int, Any]:
    status, body = _http(
        node, "/sql", json.dumps({"query": query}).encode(), {"Authorization": auth}
    )
    return status, json.loads(body) if body else None


def _http(
    node: NodeEndpoints, path: str, body: bytes, headers: dict[str, str]
) -> tuple[int, bytes]:
    host, _, port = node.http.rpartition(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=60)
    try:
        conn.request("POST", path, body, {"Content-Type": "application/json", **headers})
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def _grpc(
    cluster: DevCluster, node: int, method: str, request: Any, response: Any, metadata: Any
) -> Any:
    with grpc.insecure_channel(cluster.node_endpoints[node].grpc) as channel:
        stub: Any = channel.unary_unary(
            f"/storage.StorageService/{method}",
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=response.FromString,
        )
        try:
            resp = stub(request, timeout=60, metadata=metadata)
        except grpc.RpcError as e:
            assert e.code() in CLEAN_CODES, (e.code(), e.details())
            return
    assert not resp.header.error.startswith("internal error"), resp.header.error
    assert resp.header.code != 200 or method != "Write" or _may_write(request), request


def _may_write(request: storage_pb2.WriteRequest) -> bool:
    """Whether the fuzzer may write every table of ``request`` (others must be refused)."""
    return all(t.table == fz.PLAYGROUND for t in request.table_requests)


_NODES = st.integers(0, 2)
_ME = ((AUTHORIZATION, basic(*FUZZER)),)


@CLUSTER_FUZZ
@given(node=_NODES, request=fz.write_requests(), forged=_FORGED)
def test_grpc_writes(cluster: DevCluster, node: int, request: Any, forged: Any) -> None:
    metadata = tuple(dict((*_ME, *forged)).items())
    _grpc(cluster, node, "Write", request, storage_pb2.WriteResponse, metadata)


@CLUSTER_FUZZ
@given(node=_NODES, request=fz.sql_requests(), forged=_FORGED)
def test_grpc_queries(cluster: DevCluster, node: int, request: Any, forged: Any) -> None:
    metadata = tuple(dict((*_ME, *forged)).items())
    _grpc(cluster, node, "SqlQuery", request, storage_pb2.SqlQueryResponse, metadata)


@CLUSTER_FUZZ
@given(node=_NODES, body=fz.sql_bodies, forged=_FORGED)
def test_http_sql(cluster: DevCluster, node: int, body: bytes, forged: Any) -> None:
    headers = {"Authorization": basic(*FUZZER), **{k: v for k, v in forged}}
    _clean(*_http(cluster.node_endpoints[node], "/sql", body, headers))


@CLUSTER_FUZZ
@given(node=_NODES, text=fz.line_protocol, forged=_FORGED)
def test_line_protocol(cluster: DevCluster, node: int, text: str, forged: Any) -> None:
    headers = {"Authorization": basic(*FUZZER), **{k: v for k, v in forged}}
    path = "/influxdb/v1/write?db=public&precision=ms"
    body = text.encode("utf-8", "surrogatepass")
    _clean(*_http(cluster.node_endpoints[node], path, body, headers))


def test_the_fuzzer_cannot_write_the_seed(cluster: DevCluster) -> None:
    """The campaign's premise: the fuzzer's write to the seed is refused through any node."""
    line = f"{fz.SEED},host=x v=1 1".encode()
    for node in cluster.node_endpoints:
        status, _ = _http(
            node, "/influxdb/v1/write?db=public", line, {"Authorization": basic(*FUZZER)}
        )
        assert status == 403
