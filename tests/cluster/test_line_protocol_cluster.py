"""InfluxDB line protocol over HTTP on a running cluster (real etcd, broker, S3 server, meta
and three `gnomon node` processes): a write posted to any node reaches the owners of its
measurements, which create the tables (placed across the nodes) and add the columns new
fields need; every node reads every row back; a bad body is still a 400 that writes
nothing; a forwarded ingest put that reaches a node not serving its table is refused,
naming the owner."""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent import futures
from typing import Any

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from gnomon.errors import InvalidArgument, NotOwner
from gnomon.flight.client import gnomon_error
from gnomon.flight.ticket import PutSpec
from gnomon_app.devcluster.cluster import DevCluster, NodeEndpoints
from node.cluster import rows_wire
from node.ingest import line_protocol
from tests.cluster.support import http_sql, owners, write_lines

pytestmark = pytest.mark.cluster

MEASUREMENTS = [f"lp_{i}" for i in range(6)]
T0 = 1_700_000_000_000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    with DevCluster(tmp_path_factory.mktemp("lp-cluster"), nodes=3, shards=6) as running:
        yield running


def _node(cluster: DevCluster, grpc: str) -> NodeEndpoints:
    return next(n for n in cluster.node_endpoints if n.grpc == grpc)


def _rows(endpoint: str, query: str) -> list[dict[str, Any]]:
    status, body = http_sql(endpoint, query)
    assert status == 200, body
    rows: list[dict[str, Any]] = body["rows"]
    return rows


@pytest.fixture(scope="module")
def written(cluster: DevCluster) -> dict[str, str]:
    """Every node took one request holding a point for each measurement (the first one
    created them all); the owners of the measurements."""
    for i, node in enumerate(cluster.node_endpoints):
        text = "\n".join(f"{m},host=n{i},dc=eu v={i}.5,n={i}i {T0 + i}" for m in MEASUREMENTS)
        assert write_lines(node.http, text) == (204, None)
    return owners(cluster, MEASUREMENTS)


def test_writes_to_every_node_reach_the_owners_and_read_back_everywhere(
    cluster: DevCluster, written: dict[str, str]
) -> None:
    nodes = cluster.node_endpoints
    assert set(written) == set(MEASUREMENTS)
    # Placed across the nodes, so every node's request had parts for others.
    assert len(set(written.values())) > 1
    for node in nodes:
        for m in MEASUREMENTS:
            got = _rows(node.http, f"SELECT host, dc, v, n FROM {m} ORDER BY host")
            assert got == [
                {"host": f"n{i}", "dc": "eu", "v": i + 0.5, "n": i} for i in range(len(nodes))
            ], (node.name, m)


def test_a_new_field_through_a_node_that_does_not_own_the_table(
    cluster: DevCluster, written: dict[str, str]
) -> None:
    table = MEASUREMENTS[0]
    entry = next(n for n in cluster.node_endpoints if n.grpc != written[table])
    assert write_lines(entry.http, f'{table},host=new v=9,extra=5i,note="hi" {T0 + 100}') == (
        204,
        None,
    )
    for node in cluster.node_endpoints:
        got = _rows(node.http, f"SELECT host, extra, note FROM {table} ORDER BY host")
        assert got[-1] == {"host": "new", "extra": 5, "note": "hi"}
        assert [r["extra"] for r in got[:-1]] == [None] * (len(got) - 1)


def test_a_value_of_another_type_is_refused_by_the_owner_naming_it(
    cluster: DevCluster, written: dict[str, str]
) -> None:
    table = MEASUREMENTS[1]
    owner = written[table]
    entry = next(n for n in cluster.node_endpoints if n.grpc != owner)
    status, body = write_lines(entry.http, f'{table},host=bad v="text" {T0 + 200}')
    assert status == 400
    assert owner in body["message"] and "column:v" in body["message"]
    assert _rows(entry.http, f"SELECT count(*) AS c FROM {table} WHERE host = 'bad'") == [{"c": 0}]


def test_concurrent_small_writes_through_a_non_owner_each_get_their_own_answer(
    cluster: DevCluster, written: dict[str, str]
) -> None:
    """Small writes that arrive together may be written as one; one of them refused by the
    owner leaves the others written once each."""
    table = MEASUREMENTS[5]
    entry = next(n for n in cluster.node_endpoints if n.grpc != written[table])
    bodies = [f"{table},host=c{i} v={i} {T0 + 1000 + i}" for i in range(40)]
    bodies[17] = f'{table},host=c17 v="text" {T0 + 1017}'
    with futures.ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda body: write_lines(entry.http, body)[0], bodies))
    assert answers == [400 if i == 17 else 204 for i in range(len(bodies))]
    got = _rows(entry.http, f"SELECT host FROM {table} WHERE host LIKE 'c%' ORDER BY host")
    assert sorted(r["host"] for r in got) == sorted(f"c{i}" for i in range(40) if i != 17)


def test_a_bad_line_is_a_400_and_writes_nothing(
    cluster: DevCluster, written: dict[str, str]
) -> None:
    table = MEASUREMENTS[2]
    for node in cluster.node_endpoints:
        status, body = write_lines(
            node.http, f"{table},host=never v=1 {T0 + 300}\nlp_never v=1 1\nlp_never,, v=2"
        )
        assert status == 400 and "line 3" in body["message"], body
    node = cluster.node_endpoints[0]
    assert _rows(node.http, f"SELECT count(*) AS c FROM {table} WHERE host = 'never'") == [{"c": 0}]
    status, body = http_sql(node.http, "SELECT * FROM lp_never")
    assert status != 200 and "does not exist" in body["message"]


def _encoded(text: str) -> pa.Table:
    return rows_wire.encode(line_protocol.parse(text, precision="ms")[0])


def _put(node: NodeEndpoints, spec: PutSpec, data: pa.Table) -> int:
    client = flight.connect(f"grpc+tcp://{node.flight}")
    try:
        writer, reader = client.do_put(
            flight.FlightDescriptor.for_command(spec.to_json()), data.schema
        )
        with writer:
            writer.write_table(data)
            writer.done_writing()
            ack = reader.read()  # type: ignore[attr-defined]
        return int(json.loads(ack.to_pybytes())["rows"])
    except flight.FlightError as e:
        raise gnomon_error(e) from None
    finally:
        client.close()


def test_a_forwarded_put_reaching_a_non_owner_is_refused_naming_the_owner(
    cluster: DevCluster, written: dict[str, str]
) -> None:
    table = MEASUREMENTS[3]
    owner = written[table]
    other = next(n for n in cluster.node_endpoints if n.grpc != owner)
    data = _encoded(f"{table},host=put v=1 {T0 + 400}")
    forwarded = PutSpec(table=table, ingest=True, forwarded_from="127.0.0.1:1")
    with pytest.raises(NotOwner, match=owner):
        _put(other, forwarded, data)
    assert _rows(other.http, f"SELECT count(*) AS c FROM {table} WHERE host = 'put'") == [{"c": 0}]
    # Not marked forwarded, the same put is sent on to the owner; the owner writes a
    # forwarded one.
    assert _put(other, PutSpec(table=table, ingest=True), data) == 1
    assert _put(_node(cluster, owner), forwarded, data) == 1
    assert _rows(other.http, f"SELECT count(*) AS c FROM {table} WHERE host = 'put'") == [{"c": 1}]


def test_an_ingest_put_of_another_form_is_refused(
    cluster: DevCluster, written: dict[str, str]
) -> None:
    spec = PutSpec(table=MEASUREMENTS[4], ingest=True)
    with pytest.raises(InvalidArgument, match="must start with the timestamps"):
        _put(cluster.node_endpoints[0], spec, pa.table({"v": [1.0]}))
