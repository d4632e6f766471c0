"""The forwarding client against a real gnomon server: the marker reaches the owner, and an
owner that cannot be reached is an error naming it."""

from __future__ import annotations

import pytest

from gnomon.errors import Unavailable
from gnomon.proto import storage_pb2
from node.cluster.forward import FORWARDED_FROM, Forwarder, forwarded_from
from testkit.procs import free_port
from tests.server.conftest import Running

pytestmark = pytest.mark.integration


def test_a_forwarded_query_is_answered_by_the_owner(gnomon: Running) -> None:
    forwarder = Forwarder("127.0.0.1:1")
    try:
        req = storage_pb2.SqlQueryRequest(sql="SELECT 1 AS one")
        req.context.database = "public"
        resp = storage_pb2.SqlQueryResponse.FromString(
            forwarder.sql_query(gnomon.grpc_endpoint, req)
        )
        assert resp.header.code == 200, resp.header.error
    finally:
        forwarder.close()


def test_an_unreachable_owner_is_named() -> None:
    forwarder = Forwarder("127.0.0.1:1", timeout_s=2)
    owner = f"127.0.0.1:{free_port()}"
    try:
        with pytest.raises(Unavailable, match=owner):
            forwarder.write(owner, storage_pb2.WriteRequest())
    finally:
        forwarder.close()


def test_a_channel_closed_by_a_concurrent_call_is_replaced(gnomon: Running) -> None:
    """A call that finds the owner unreachable closes the channel other calls share; those
    running meanwhile take a new one instead of failing as an internal error."""
    forwarder = Forwarder("127.0.0.1:1")
    try:
        req = storage_pb2.SqlQueryRequest(sql="SELECT 1 AS one")
        req.context.database = "public"
        forwarder._channels.get(gnomon.grpc_endpoint).close()
        resp = storage_pb2.SqlQueryResponse.FromString(
            forwarder.sql_query(gnomon.grpc_endpoint, req)
        )
        assert resp.header.code == 200, resp.header.error
    finally:
        forwarder.close()


def test_the_marker_is_read_back() -> None:
    assert forwarded_from([(FORWARDED_FROM, "10.0.0.1:8831")]) == "10.0.0.1:8831"
    assert forwarded_from([("x", "y")]) is None
    assert forwarded_from(None) is None
