"""The one etcd endpoint syntax (``gnomon.etcd``), shared by the store and the meta client: the
parsing rule without a server, then both users on a real etcd behind a dead first endpoint."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from gnomon.errors import Closed, InvalidArgument
from gnomon.etcd import parse_endpoints
from gnomon.store.etcd import EtcdStore
from meta.etcd import EtcdClient
from testkit.etcd import EtcdServer
from testkit.procs import free_port

from .conformance import KV, read_row, write_rows

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(
    ("given", "targets"),
    [
        ("127.0.0.1:2379", ["127.0.0.1:2379"]),
        ("http://127.0.0.1:2379", ["127.0.0.1:2379"]),
        ("HTTP://127.0.0.1:2379/", ["127.0.0.1:2379"]),
        (" a:1 , http://b:2 ", ["a:1", "b:2"]),
        ("etcd://a:1,b:2", ["a:1", "b:2"]),
        ("ETCD://http://a:1,http://b:2", ["a:1", "b:2"]),
        ("[::1]:2379", ["[::1]:2379"]),
        (["a:1", "http://b:2"], ["a:1", "b:2"]),
    ],
)
def test_accepted_endpoints(given: str | list[str], targets: list[str]) -> None:
    assert parse_endpoints(given) == targets


@pytest.mark.parametrize(
    ("given", "named"),
    [
        ("https://a:1", "https://a:1"),
        ("a:1,https://b:2", "https://b:2"),
        ("etcd://a:1,etcd://b:2", "etcd://b:2"),
        ("grpc://a:1", "grpc://a:1"),
        ("a", "'a'"),
        ("a:", "'a:'"),
        (":1", "':1'"),
        ("a:port", "a:port"),
        ("a:0", "a:0"),
        ("a:65536", "a:65536"),
        ("a:1/x", "a:1/x"),
        ("user@a:1", "user@a:1"),
        ("::1:2379", "::1:2379"),
        ("a:1,,b:2", "''"),
        ("a:1,", "''"),
        ("", "no etcd endpoint"),
        ("etcd://", "no etcd endpoint"),
        ([], "no etcd endpoint"),
    ],
)
def test_refused_endpoints_name_the_bad_one(given: str | list[str], named: str) -> None:
    with pytest.raises(InvalidArgument, match=re.escape(named)):
        parse_endpoints(given)


def test_https_is_refused_as_tls() -> None:
    with pytest.raises(InvalidArgument, match=r"'https://b:2'.*TLS"):
        parse_endpoints("etcd://a:1,https://b:2")


@pytest.mark.parametrize("open_client", [EtcdStore, EtcdClient], ids=["store", "meta"])
def test_store_and_meta_client_refuse_alike(open_client: Callable[[str], Any]) -> None:
    for bad in ["https://127.0.0.1:2379", "127.0.0.1:2379,", "127.0.0.1"]:
        with pytest.raises(InvalidArgument, match="etcd endpoint"):
            open_client(bad)


def test_store_and_meta_client_pass_a_dead_first_endpoint(etcd: EtcdServer) -> None:
    dead = f"127.0.0.1:{free_port()}"
    endpoints = f"etcd://{dead},http://{etcd.endpoint}"
    namespace = f"/test/{uuid.uuid4().hex}"
    store = EtcdStore(endpoints, namespace=namespace, timeout_s=2.0)
    client = EtcdClient(endpoints, timeout_s=2.0)
    try:
        store.create(KV)
        write_rows(store, "kv", [{"k": "a", "v": 1}])
        assert read_row(store, "kv", {"k": "a"}) == {"k": "a", "v": 1, "note": None}

        lease = client.grant(30)
        key = f"{namespace}/meta/live/n1".encode()
        client.put(key, b"n1", lease=lease)
        assert client.get(key) == b"n1"
        assert client.lease_of(key) == lease
        assert client.keepalive(lease) > 0
        assert not client.create(key, b"other")
        assert client.get_prefix(f"{namespace}/meta/".encode()) == {key: b"n1"}
        client.revoke(lease)
        assert client.get(key) is None
        # A lease that is already gone: revoking it again is not an error.
        client.revoke(lease)
    finally:
        store.close()
        client.close()
    with pytest.raises(Closed):
        client.get(b"/x")
