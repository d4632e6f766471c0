"""A secured cluster (``DevCluster(auth=True, tls=True)``: a cluster secret between the
processes, ``--auth`` on the nodes, TLS from a throwaway CA on every process): writes and
queries sent to a node that does not own the table are forwarded with the caller's identity,
so they work for a user whose grants allow them and are refused for one whose grants do not,
with the answer the owner gives; the meta service, the compaction node and a node's shard
control serve TLS only and refuse calls without the secret, and a user cannot borrow
another's identity by naming it. etcd runs with its own authentication and TLS: a client
without its credentials reads nothing, the accounts are changed through them, and an account
edited straight in etcd, signed by no holder of the cluster secret, gives nothing."""

from __future__ import annotations

import base64
import json
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import grpc
import psycopg
import pytest
from click.testing import CliRunner

from gnomon.errors import GnomonError, Unauthenticated, Unavailable
from gnomon.etcd import EtcdAccess
from gnomon.peer import ON_BEHALF_OF, SECRET_ENV, Peer
from gnomon.proto import node_pb2, storage_pb2
from gnomon.shard_control import SERVICE as SHARD_CONTROL
from gnomon.store.api import TableContext
from gnomon.store.etcd import EtcdStore
from gnomon_app.accounts import grants, users
from gnomon_app.devcluster.cluster import NAMESPACE, DevCluster, NodeEndpoints
from meta.client import MetaClient
from node.engine.compaction.client import CompactionClient
from node.security.principal import Privilege
from tests.pgwire import test_grafana as grafana
from tests.server.test_grpc import decode

pytestmark = pytest.mark.cluster

TABLES = [f"sec_{i}" for i in range(6)]
CREATE = "CREATE TABLE {} (host string TAG, v double, ts timestamp NOT NULL, TIMESTAMP KEY(ts))"
WRITER = ("writer", "writer-password")
OUTSIDER = ("outsider", "outsider-password")


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    with DevCluster(
        tmp_path_factory.mktemp("secured-cluster"),
        nodes=3,
        shards=6,
        auth=True,
        tls=True,
        compaction_nodes=1,
        # Grants made during the test are seen at once.
        node_flags=("--auth-cache-s=0",),
    ) as running:
        assert running.admin is not None and running.ca is not None
        with running.accounts() as accounts:
            for user, password in (WRITER, OUTSIDER):
                accounts.create_user(user, password)
            for table in TABLES:
                accounts.grant(WRITER[0], Privilege.WRITE, table)
        admin = _basic(*running.admin)
        for table in TABLES:
            status, body = _http_sql(
                running, running.node_endpoints[0], CREATE.format(table), admin
            )
            assert status == 200, body
        yield running


def _http(
    cluster: DevCluster, node: NodeEndpoints, path: str, body: bytes, auth: str
) -> tuple[int, Any]:
    assert cluster.ca is not None
    req = urllib.request.Request(
        f"https://{node.http}{path}", data=body, method="POST", headers={"Authorization": auth}
    )
    context = ssl.create_default_context(cafile=str(cluster.ca))
    try:
        with urllib.request.urlopen(req, timeout=30, context=context) as resp:
            data = resp.read()
            return resp.status, json.loads(data) if data else None
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def _http_sql(cluster: DevCluster, node: NodeEndpoints, query: str, auth: str) -> tuple[int, Any]:
    return _http(cluster, node, "/sql", json.dumps({"query": query}).encode(), auth)


def _channel(cluster: DevCluster, node: NodeEndpoints) -> grpc.Channel:
    assert cluster.ca is not None
    creds = grpc.ssl_channel_credentials(root_certificates=cluster.ca.read_bytes())
    return grpc.secure_channel(node.grpc, creds)


def _grpc_sql(
    cluster: DevCluster, node: NodeEndpoints, query: str, metadata: tuple[tuple[str, str], ...]
) -> storage_pb2.SqlQueryResponse:
    req = storage_pb2.SqlQueryRequest(tables=[], sql=query)
    req.context.database = "public"
    with _channel(cluster, node) as channel:
        resp: storage_pb2.SqlQueryResponse = channel.unary_unary(
            "/storage.StorageService/SqlQuery",
            request_serializer=storage_pb2.SqlQueryRequest.SerializeToString,
            response_deserializer=storage_pb2.SqlQueryResponse.FromString,
        )(req, timeout=30, metadata=metadata)
    return resp


@pytest.fixture(scope="module")
def entries(cluster: DevCluster) -> dict[str, NodeEndpoints]:
    """For each table, a node that does not own it (its requests are forwarded)."""
    with MetaClient(cluster.meta, peer=cluster.peer) as client:
        routes = {r.table: r.endpoint for r in client.route(TABLES)}
    assert len(set(routes.values())) > 1, routes
    return {t: next(n for n in cluster.node_endpoints if n.grpc != routes[t]) for t in TABLES}


def test_line_protocol_through_a_non_owner_by_grants(
    cluster: DevCluster, entries: dict[str, NodeEndpoints]
) -> None:
    path = "/influxdb/v1/write?db=public&precision=ms"
    for table, entry in entries.items():
        line = f"{table},host=lp v=1.5 1000".encode()
        assert _http(cluster, entry, path, line, _basic(*WRITER)) == (204, None)
        status, body = _http(cluster, entry, path, line, _basic(*OUTSIDER))
        assert status == 403 and f"may not write to table '{table}'" in body["message"], body
    for table, entry in entries.items():
        status, body = _http_sql(
            cluster, entry, f"SELECT host, v FROM {table}", _basic(*cluster.admin or ("", ""))
        )
        assert (status, body["rows"]) == (200, [{"host": "lp", "v": 1.5}]), table


def _pg(cluster: DevCluster, node: NodeEndpoints, user: str, password: str) -> psycopg.Connection:
    """A psycopg connection to ``node``'s PostgreSQL port over TLS verified by the cluster's
    CA, logged in with SCRAM-SHA-256."""
    assert cluster.ca is not None
    host, port = node.pg.rsplit(":", 1)
    return psycopg.connect(
        host=host,
        port=int(port),
        user=user,
        password=password,
        dbname="public",
        sslmode="verify-full",
        sslrootcert=str(cluster.ca),
        require_auth="scram-sha-256",
        autocommit=True,
        connect_timeout=30,
    )


def test_postgres_protocol_through_every_node_by_grants(
    cluster: DevCluster, entries: dict[str, NodeEndpoints]
) -> None:
    """psycopg through each node, TLS and SCRAM on: a write to a table another node owns
    lands there for a user granted it and is refused to one who is not; a query answers
    what HTTP /sql answers for the same table from any node."""
    for table, entry in entries.items():
        with _pg(cluster, entry, *WRITER) as conn:
            assert conn.info.pgconn.ssl_in_use
            conn.execute(
                f"INSERT INTO {table} (host, v, ts) VALUES (%s, %s, %s)", ("pg", 3.5, 3000)
            )
            got = conn.execute(f"SELECT host, v FROM {table} WHERE host = %s", ("pg",)).fetchall()
            assert got == [("pg", 3.5)], table
        with _pg(cluster, entry, *OUTSIDER) as conn:
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="may not write to"):
                conn.execute(f"INSERT INTO {table} (host, v, ts) VALUES ('pg', 1.0, 3001)")
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="may not read table"):
                conn.execute(f"SELECT host FROM {table}")
    admin = cluster.admin or ("", "")
    query = "SELECT host, v FROM {} WHERE host = 'pg' ORDER BY ts"
    for node in cluster.node_endpoints:
        with _pg(cluster, node, *admin) as conn:
            for table in TABLES:
                status, body = _http_sql(cluster, node, query.format(table), _basic(*admin))
                assert status == 200, body
                rows = conn.execute(query.format(table)).fetchall()
                assert rows == [(r["host"], r["v"]) for r in body["rows"]], (node.name, table)
                assert rows == [("pg", 3.5)], (node.name, table)
            # Grafana's table and column lists name the tables of every node.
            listed = [name for (name,) in conn.execute(grafana.TABLES).fetchall()]
            assert set(TABLES) <= set(listed), node.name
            for table in TABLES:
                status, body = _http_sql(cluster, node, f"DESCRIBE {table}", _basic(*admin))
                assert status == 200, body
                columns = conn.execute(grafana.columns(table)).fetchall()
                assert [c for c, _ in columns] == [r["name"] for r in body["rows"]], node.name


def test_grpc_sql_through_a_non_owner_by_grants(
    cluster: DevCluster, entries: dict[str, NodeEndpoints]
) -> None:
    writer = (("authorization", _basic(*WRITER)),)
    outsider = (("authorization", _basic(*OUTSIDER)),)
    for table, entry in entries.items():
        insert = f"INSERT INTO {table} (host, v, ts) VALUES ('grpc', 2.5, 2000)"
        resp = _grpc_sql(cluster, entry, insert, writer)
        assert resp.header.code == 200, resp.header.error
        resp = _grpc_sql(cluster, entry, insert, outsider)
        assert resp.header.code == 403 and "may not write to" in resp.header.error
        resp = _grpc_sql(cluster, entry, f"SELECT host FROM {table} WHERE host = 'grpc'", writer)
        assert resp.header.code == 200, resp.header.error
        assert decode(resp.arrow).to_pylist() == [{"host": "grpc"}]
        resp = _grpc_sql(cluster, entry, f"SELECT host FROM {table}", outsider)
        assert resp.header.code == 403 and f"may not read table '{table}'" in resp.header.error


def _grpc_write(
    cluster: DevCluster, node: NodeEndpoints, tables: list[str], auth: str, ts: int
) -> storage_pb2.WriteResponse:
    """One gRPC ``Write`` (as ``Write`` and as ``StreamWrite`` alike) of a row to each table."""
    req = storage_pb2.WriteRequest()
    req.context.database = "public"
    for table in tables:
        t = req.table_requests.add(table=table, tag_names=["host"], field_names=["v"])
        entry = t.entries.add()
        entry.tags.add(name_index=0).value.string_value = "bypass"
        entry.field_groups.add(timestamp=ts).fields.add(name_index=0).value.float64_value = 9.5
    with _channel(cluster, node) as channel:
        resp: storage_pb2.WriteResponse = channel.unary_unary(
            "/storage.StorageService/Write",
            request_serializer=storage_pb2.WriteRequest.SerializeToString,
            response_deserializer=storage_pb2.WriteResponse.FromString,
        )(req, timeout=30, metadata=(("authorization", auth),))
    return resp


def test_grpc_writes_through_any_node_are_authorised_as_their_caller(
    cluster: DevCluster,
) -> None:
    """Through every node, requests naming only tables it does not own, tables of it and of
    others, and every table: the caller's grants decide, and a refused request stores nothing
    anywhere."""
    with MetaClient(cluster.meta, peer=cluster.peer) as client:
        owner = {r.table: r.endpoint for r in client.route(TABLES)}
    written = dict.fromkeys(TABLES, 0)
    for i, node in enumerate(cluster.node_endpoints):
        elsewhere = [t for t in TABLES if owner[t] != node.grpc]
        here = [t for t in TABLES if owner[t] == node.grpc]
        for j, tables in enumerate((elsewhere[:1], here[:1] + elsewhere[:1], TABLES)):
            ts = 10_000 + 100 * i + j
            resp = _grpc_write(cluster, node, tables, _basic(*OUTSIDER), ts)
            assert resp.header.code == 403, (node.grpc, tables, resp.header)
            assert "may not write to table" in resp.header.error
            resp = _grpc_write(cluster, node, tables, _basic(*WRITER), ts + 50)
            assert (resp.header.code, resp.success) == (200, len(tables)), resp.header.error
            for table in tables:
                written[table] += 1
    admin = _basic(*cluster.admin or ("", ""))
    for table, n in written.items():
        status, body = _http_sql(
            cluster,
            cluster.node_endpoints[0],
            f"SELECT count(*) AS n FROM {table} WHERE host = 'bypass'",
            admin,
        )
        assert (status, body["rows"]) == (200, [{"n": n}]), (table, body)


def test_invalid_table_names_are_refused_through_every_node_and_recorded_nowhere(
    cluster: DevCluster,
) -> None:
    admin = _basic(*cluster.admin or ("", ""))
    bad = ["/abs", "lp/evil", "../../evil", "n" * 5000]
    for node in cluster.node_endpoints:
        for name in bad:
            status, body = _http_sql(cluster, node, CREATE.format(f'"{name}"'), admin)
            assert status == 400 and "invalid table name" in body["message"], (name, body)
            line = f"{name},host=a v=1 1000".encode()
            path = "/influxdb/v1/write?db=public&precision=ms"
            status, body = _http(cluster, node, path, line, admin)
            assert status == 400, (name, body)
            resp = _grpc_write(cluster, node, [name], admin, 1000)
            assert resp.header.code == 400 and "invalid table name" in resp.header.error
    with MetaClient(cluster.meta, peer=cluster.peer) as client:
        recorded = {t.name for t in client.tables()}
    assert not recorded & set(bad), recorded & set(bad)


def test_routes_tell_a_user_without_grants_nothing(cluster: DevCluster) -> None:
    """An outsider learns no more of an existing table than of one that does not exist."""
    for node in cluster.node_endpoints:
        for table, expected in ((TABLES[0], 200), ("no_such_table", 404)):
            req = urllib.request.Request(
                f"https://{node.http}/route/{table}", headers={"Authorization": ""}
            )
            answers = {}
            for who in (WRITER, OUTSIDER):
                req.headers["Authorization"] = _basic(*who)
                assert cluster.ca is not None
                context = ssl.create_default_context(cafile=str(cluster.ca))
                try:
                    with urllib.request.urlopen(req, timeout=30, context=context) as resp:
                        answers[who[0]] = resp.status
                except urllib.error.HTTPError as e:
                    answers[who[0]] = e.code
            assert answers == {"writer": expected, "outsider": 404}, (table, answers)
        with _channel(cluster, node) as channel:
            route = channel.unary_unary(
                "/storage.StorageService/Route",
                request_serializer=storage_pb2.RouteRequest.SerializeToString,
                response_deserializer=storage_pb2.RouteResponse.FromString,
            )
            for who, known in ((WRITER, [TABLES[0]]), (OUTSIDER, [])):
                req_pb = storage_pb2.RouteRequest(tables=[TABLES[0], "no_such_table"])
                req_pb.context.database = "public"
                resp = route(req_pb, timeout=30, metadata=(("authorization", _basic(*who)),))
                assert [r.table for r in resp.routes] == known, (who[0], resp)


def test_a_user_cannot_borrow_an_identity(
    cluster: DevCluster, entries: dict[str, NodeEndpoints]
) -> None:
    """Naming another user is believed only from a holder of the cluster secret."""
    table, entry = next(iter(entries.items()))
    borrowed = (("authorization", _basic(*OUTSIDER)), (ON_BEHALF_OF, WRITER[0]))
    resp = _grpc_sql(cluster, entry, f"SELECT host FROM {table}", borrowed)
    assert resp.header.code == 403
    # What a forwarding node sends: the secret, and the user the owner authorises.
    secret = cluster.peer.metadata()
    resp = _grpc_sql(
        cluster, entry, f"SELECT host FROM {table}", (*secret, (ON_BEHALF_OF, OUTSIDER[0]))
    )
    assert resp.header.code == 403 and "user 'outsider' may not read" in resp.header.error
    resp = _grpc_sql(
        cluster, entry, f"SELECT host FROM {table}", (*secret, (ON_BEHALF_OF, WRITER[0]))
    )
    assert resp.header.code == 200, resp.header.error
    wrong_secret = (("authorization", "Cluster not-the-secret"), (ON_BEHALF_OF, "admin"))
    with pytest.raises(grpc.RpcError) as e:
        _grpc_sql(cluster, entry, f"SELECT host FROM {table}", wrong_secret)
    assert e.value.code() is grpc.StatusCode.UNAUTHENTICATED


def test_meta_and_shard_control_take_the_cluster_secret_only(cluster: DevCluster) -> None:
    with (
        MetaClient(cluster.meta, peer=Peer(ca=cluster.peer.ca), retry_for_s=0) as client,
        pytest.raises(Unauthenticated, match="cluster secret"),
    ):
        client.shards()
    # Plain gRPC gets no answer from a meta service serving TLS.
    with (
        MetaClient(cluster.meta, peer=Peer(cluster.peer.secret), retry_for_s=0) as client,
        pytest.raises(Unavailable),
    ):
        client.shards()
    with MetaClient(cluster.meta, peer=cluster.peer) as client:
        assert client.shards()
    release = node_pb2.ReleaseRequest(shard_id=0, epoch=0, whole_shard=True)
    with _channel(cluster, cluster.node_endpoints[0]) as channel:
        call = channel.unary_unary(
            f"/{SHARD_CONTROL}/Release",
            request_serializer=node_pb2.ReleaseRequest.SerializeToString,
            response_deserializer=node_pb2.ReleaseResponse.FromString,
        )
        # A superuser of the data is no member of the cluster.
        with pytest.raises(grpc.RpcError) as e:
            call(
                release,
                timeout=10,
                metadata=(("authorization", _basic(*cluster.admin or ("", ""))),),
            )
        assert e.value.code() is grpc.StatusCode.UNAUTHENTICATED


def test_the_compaction_node_serves_tls_and_takes_the_cluster_secret_only(
    cluster: DevCluster,
) -> None:
    node = cluster.compaction_endpoints[0]
    with CompactionClient(peer=cluster.peer) as client:
        assert client.status(node.grpc).slots >= 1
    with (
        CompactionClient(peer=Peer(ca=cluster.peer.ca)) as client,
        pytest.raises(GnomonError, match="cluster secret"),
    ):
        client.status(node.grpc)
    with (
        CompactionClient(peer=Peer(cluster.peer.secret)) as client,
        pytest.raises(Unavailable),
    ):
        client.status(node.grpc)
    assert cluster.ca is not None
    context = ssl.create_default_context(cafile=str(cluster.ca))
    with urllib.request.urlopen(f"https://{node.http}/health", timeout=30, context=context) as r:
        assert json.loads(r.read()) == {"status": "ok"}


def test_etcd_refuses_a_client_without_the_credentials(cluster: DevCluster) -> None:
    assert cluster.etcd is not None
    access = cluster.etcd.access
    assert access.user == "gnomon" and access.ca is not None
    # A certificate etcd trusts, but no etcd user: the accounts are not read.
    certificate_only = EtcdAccess(ca=access.ca, cert=access.cert, key=access.key)
    for access, refused in (
        (certificate_only, GnomonError),
        # No client certificate (and no TLS): etcd is not even reached.
        (EtcdAccess(), Unavailable),
    ):
        store = EtcdStore(
            cluster.etcd.endpoint, namespace=f"{NAMESPACE}/catalog", timeout_s=3, access=access
        )
        try:
            with pytest.raises(refused):
                store.exists("auth_users")
        finally:
            store.close()


def test_the_admin_cli_changes_accounts_with_the_etcd_credentials(
    cluster: DevCluster, entries: dict[str, NodeEndpoints]
) -> None:
    table, entry = next(iter(entries.items()))
    reader = ("cli-reader", "cli-reader-password")
    where = ["--catalog", cluster.catalog]
    create = ["create", reader[0], "--password", reader[1], *where]
    assert cluster.peer.secret is not None
    env = {**cluster.etcd_env(), SECRET_ENV: cluster.peer.secret}
    refused = CliRunner().invoke(users, create, env={SECRET_ENV: cluster.peer.secret})
    assert refused.exit_code == 1 and "etcd" in refused.output, refused.output
    for group, args in (
        (users, create),
        (grants, ["add", reader[0], "read", "--table", table, *where]),
    ):
        done = CliRunner().invoke(group, args, env=env)
        assert done.exit_code == 0, done.output
    listed = CliRunner().invoke(users, ["list", *where], env=env)
    assert listed.exit_code == 0 and reader[0] in listed.output, listed.output
    status, body = _http_sql(cluster, entry, f"SELECT count(*) AS n FROM {table}", _basic(*reader))
    assert status == 200, body


def test_accounts_edited_straight_in_etcd_give_nothing(
    cluster: DevCluster, entries: dict[str, NodeEndpoints]
) -> None:
    """Whoever writes to etcd past gnomon (the etcd user's password is enough) but does not
    hold the cluster secret: a user flipped to superuser, a grant widened, a grant added."""
    assert cluster.etcd is not None
    promoted, widened = ("mallory", "mallory-password"), ("trudy", "trudy-password")
    (table, entry), (other_table, _) = list(entries.items())[:2]
    query = f"SELECT count(*) AS n FROM {table}"
    with cluster.accounts() as accounts:
        for user, password in (promoted, widened):
            accounts.create_user(user, password)
            accounts.grant(user, Privilege.READ, table)
    for user in (promoted, widened):
        assert _http_sql(cluster, entry, query, _basic(*user))[0] == 200

    def tamper(ctx: TableContext) -> None:
        users_table = ctx.table("auth_users")
        row = users_table.read({"name": promoted[0]})
        assert row is not None
        users_table.write({**row, "superuser": 1})
        granted = {"user": widened[0], "database": "public", "privilege": "admin"}
        ctx.table("auth_grants").write({**granted, "table": table})
        ctx.table("auth_grants").write({**granted, "table": "*"})

    store = EtcdStore(
        cluster.etcd.endpoint, namespace=f"{NAMESPACE}/catalog", access=cluster.etcd.access
    )
    try:
        store.transact(tamper)
    finally:
        store.close()
    for sql in (query, f"DROP TABLE {other_table}"):
        # The promoted user is no user at all any more; the widened grants are no grants.
        assert _http_sql(cluster, entry, sql, _basic(*promoted))[0] == 401, sql
        status, body = _http_sql(cluster, entry, sql, _basic(*widened))
        assert status == 403, (sql, body)
    logs = "".join(p.read_text() for p in (cluster.root / "logs").glob("node-*.log"))
    assert "fails its signature check" in logs and "user 'mallory'" in logs
    with cluster.accounts() as accounts:
        assert accounts.sign(dry_run=True) == [
            "user 'mallory'",
            "grant of admin on public.* to 'trudy'",
            f"grant of admin on public.{table} to 'trudy'",
        ]
        for user, _ in (promoted, widened):
            accounts.drop_user(user)


def test_postgresql_clients_reach_any_node_with_scram_over_tls(
    cluster: DevCluster, entries: dict[str, NodeEndpoints]
) -> None:
    """psycopg through a node that does not own the table: TLS checked against the cluster's
    CA, SCRAM-SHA-256 as the caller, the query forwarded to the owner as that caller, and the
    answer the one HTTP gives; a user without grants is refused there too."""
    psycopg = pytest.importorskip("psycopg")
    assert cluster.admin is not None and cluster.ca is not None

    def connect(node: NodeEndpoints, user: str, password: str) -> Any:
        host, port = node.pg.rsplit(":", 1)
        return psycopg.connect(
            host=host,
            port=int(port),
            dbname="gnomon",
            user=user,
            password=password,
            sslmode="verify-ca",
            sslrootcert=str(cluster.ca),
            require_auth="scram-sha-256",
            connect_timeout=30,
            autocommit=True,
        )

    for table, entry in entries.items():
        query = f"SELECT count(*) AS n FROM {table}"
        status, body = _http_sql(cluster, entry, query, _basic(*cluster.admin))
        assert status == 200, body
        with connect(entry, *cluster.admin) as conn:
            assert conn.info.pgconn.ssl_in_use
            (count,) = conn.execute(query).fetchone()
        assert count == body["rows"][0]["n"], table
        with (
            connect(entry, *OUTSIDER) as conn,
            pytest.raises(psycopg.errors.InsufficientPrivilege, match="may not read"),
        ):
            conn.execute(query)
