"""The rate of new connections on gRPC and Arrow Flight (``max_connections_per_s``): a call on
a connection past its address's rate is refused with a message naming the address and the
setting, counted, and the connections already admitted go on being served; a standalone
server started with the setting keeps it on both. (HTTP's side: tests/server/
test_http_connection_rate.py.)"""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pyarrow.flight as flight
import pytest

from gnomon.proto import storage_pb2
from node.backends import open_standalone
from node.security.connections import ConnectionRate, PeerConnections, peer_address
from node.server.connection_rate import GrpcConnectionRate
from node.server.flight import FlightService
from node.sql.executor import SqlExecutor
from testkit.clock import Clock
from tests.server.conftest import Running, start_standalone

pytestmark = pytest.mark.integration

#: A connection of its own (gRPC shares one between channels to the same target otherwise).
OWN_CONNECTION: list[tuple[str, int | str]] = [("grpc.use_local_subchannel_pool", 1)]


def test_peer_addresses() -> None:
    assert peer_address("ipv4:10.0.0.1:5000") == "10.0.0.1"
    assert peer_address("ipv6:[::1]:5000") == "::1"
    assert peer_address("ipv6:%5B::1%5D:5000") == "::1"
    assert peer_address("unix:/tmp/socket") == "/tmp/socket"


def test_a_connection_is_charged_once_and_a_refused_one_until_its_rate_allows_it() -> None:
    clock = Clock()
    refused: list[str] = []
    peers = PeerConnections(ConnectionRate(1.0, clock=clock), lambda: refused.append("x"))
    assert peers.refusal("ipv4:10.0.0.1:5000") is None
    assert peers.refusal("ipv4:10.0.0.1:5000") is None  # the same connection, not charged
    message = peers.refusal("ipv4:10.0.0.1:5001")
    assert message is not None and "10.0.0.1" in message and "max_connections_per_s" in message
    assert peers.refusal("ipv4:10.0.0.2:5001") is None  # another address has its own bucket
    clock.now += 1.0
    assert peers.refusal("ipv4:10.0.0.1:5001") is None
    assert peers.refusal("ipv4:10.0.0.1:5000") is None
    assert refused == ["x"]


def _echo(request: bytes, context: grpc.ServicerContext) -> bytes:
    return request


@pytest.fixture
def grpc_limited() -> Iterator[tuple[str, list[str]]]:
    refused: list[str] = []
    peers = PeerConnections(ConnectionRate(1.0, clock=Clock()), lambda: refused.append("grpc"))
    server = grpc.server(futures.ThreadPoolExecutor(4), interceptors=[GrpcConnectionRate(peers)])
    handler = grpc.method_handlers_generic_handler(
        "test.Echo", {"Echo": grpc.unary_unary_rpc_method_handler(_echo)}
    )
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield f"127.0.0.1:{port}", refused
    server.stop(grace=None)


def _echo_call(channel: grpc.Channel) -> Any:
    echo: Any = channel.unary_unary("/test.Echo/Echo")
    return echo(b"hi", timeout=30)


def test_grpc_refuses_the_calls_of_a_connection_over_the_rate(
    grpc_limited: tuple[str, list[str]],
) -> None:
    target, refused = grpc_limited
    with grpc.insecure_channel(target, options=OWN_CONNECTION) as first:
        assert _echo_call(first) == b"hi"
        with (
            grpc.insecure_channel(target, options=OWN_CONNECTION) as second,
            pytest.raises(grpc.RpcError) as refusal,
        ):
            _echo_call(second)
        assert refusal.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "too many new connections from 127.0.0.1" in (refusal.value.details() or "")
        assert "max_connections_per_s" in (refusal.value.details() or "")
        assert _echo_call(first) == b"hi"  # the admitted connection is served on
    assert refused == ["grpc"]


def test_flight_refuses_the_calls_of_a_connection_over_the_rate(tmp_path: Path) -> None:
    refused: list[str] = []
    peers = PeerConnections(ConnectionRate(1.0, clock=Clock()), lambda: refused.append("flight"))
    with open_standalone(str(tmp_path / "data"), wal_sync="never") as engine:
        SqlExecutor(engine).execute(
            "CREATE TABLE t (host string TAG, v double, ts timestamp NOT NULL, TIMESTAMP KEY(ts))"
        )
        service = FlightService(engine, port=0, connections=peers)
        describe = flight.Action("describe", json.dumps({"table": "t"}).encode())
        try:
            target = f"grpc+tcp://127.0.0.1:{service.port}"
            with flight.connect(target, generic_options=OWN_CONNECTION) as first:
                assert list(first.do_action(describe))
                with (
                    flight.connect(target, generic_options=OWN_CONNECTION) as second,
                    pytest.raises(flight.FlightUnavailableError, match="too many new conn"),
                ):
                    list(second.do_action(describe))
                assert list(first.do_action(describe))
        finally:
            service.shutdown()
    assert refused == ["flight"]


def _sql(channel: grpc.Channel, request: storage_pb2.SqlQueryRequest) -> Any:
    call: Any = channel.unary_unary(
        "/storage.StorageService/SqlQuery",
        request_serializer=storage_pb2.SqlQueryRequest.SerializeToString,
        response_deserializer=storage_pb2.SqlQueryResponse.FromString,
    )
    return call(request, timeout=30)


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Running, int]]:
    root = tmp_path_factory.mktemp("connections")
    # One new connection per address every 1000 s: the second is refused for the test's life.
    running = start_standalone(
        root / "data", root / "server.log", "--max-connections-per-s", "0.001"
    )
    yield running, running.flight_port
    running.server.stop()


def test_a_standalone_server_keeps_the_rate_on_grpc_and_flight(
    standalone: tuple[Running, int],
) -> None:
    running, flight_port = standalone
    request = storage_pb2.SqlQueryRequest(sql="SELECT 1")
    request.context.database = "public"
    with grpc.insecure_channel(running.grpc_endpoint, options=OWN_CONNECTION) as first:
        assert _sql(first, request).header.code == 200
        with (
            grpc.insecure_channel(running.grpc_endpoint, options=OWN_CONNECTION) as second,
            pytest.raises(grpc.RpcError) as refused,
        ):
            _sql(second, request)
        assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert _sql(first, request).header.code == 200
    target = f"grpc+tcp://127.0.0.1:{flight_port}"
    describe = flight.Action("describe", json.dumps({"table": "none"}).encode())
    with flight.connect(target, generic_options=OWN_CONNECTION) as first:
        with pytest.raises(flight.FlightServerError, match="not"):  # served: no such table
            list(first.do_action(describe))
        with (
            flight.connect(target, generic_options=OWN_CONNECTION) as second,
            pytest.raises(flight.FlightUnavailableError, match="max_connections_per_s"),
        ):
            list(second.do_action(describe))
