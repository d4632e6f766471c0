"""Ports the project hands the servers it starts: a port picked free may be taken by another
process before the server binds it. A server counts as started only once it listens itself;
one that finds its port taken is started again on another; gnomon's own roles pick theirs
and report them."""

from __future__ import annotations

import socket
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from gnomon_app.devcluster import procs
from gnomon_app.devcluster.cluster import DevCluster
from meta.client import MetaClient
from testkit.procs import PortTaken, Server, on_free_ports
from tests.cluster.support import http_sql

pytestmark = pytest.mark.cluster

#: A third-party server in miniature: told its port, it exits when that port is taken.
_LISTENER = (
    "import socket, sys, time; s = socket.socket(); "
    "s.bind(('127.0.0.1', int(sys.argv[1]))); s.listen(); time.sleep(60)"
)


@contextmanager
def _taken() -> Iterator[int]:
    """A port another process listens on: connections to it succeed."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield int(holder.getsockname()[1])


def _listener(log_dir: Path, ports: tuple[int, ...]) -> Server:
    server = Server([sys.executable, "-c", _LISTENER, str(ports[0])], log=log_dir / "l.log")
    server.wait_for_port(ports[0])
    return server


def test_a_server_listens_only_on_a_socket_of_its_own(tmp_path: Path) -> None:
    """Another process answering on the port is not the server: the wait sees the server end
    on the taken port instead of returning."""
    with _taken() as port, pytest.raises(PortTaken, match="Address already in use"):
        _listener(tmp_path, (port,))


def test_a_port_taken_first_is_picked_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with _taken() as port:
        picks = [(port,)]
        pick = procs.free_ports
        monkeypatch.setattr(procs, "free_ports", lambda n: picks.pop() if picks else pick(n))
        server, (got,) = on_free_ports(lambda ports: _listener(tmp_path, ports))
    try:
        assert got != port and not picks
        socket.create_connection(("127.0.0.1", got), timeout=5).close()
    finally:
        server.stop()


def test_picking_again_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    offered: list[int] = []

    def always_taken(count: int) -> tuple[int, ...]:
        offered.append(port)
        return (port,)

    with _taken() as port:
        monkeypatch.setattr(procs, "free_ports", always_taken)
        with pytest.raises(PortTaken):
            on_free_ports(lambda ports: _listener(tmp_path, ports))
    assert len(offered) == procs.PORT_ATTEMPTS


def test_a_dev_cluster_starts_when_every_port_it_picks_is_taken_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every port the cluster picks for a server is first one another process listens on:
    etcd, the broker, the S3 server and the data node (its gRPC port, which names it) are each
    started again on other ports. Meta, the compaction node and the data node's HTTP and
    Flight take any free port and report it: what the cluster names is where they listen,
    and what the node advertises to meta."""
    pick = procs.free_ports
    offered: list[tuple[int, ...]] = []

    def every_other_taken(count: int) -> tuple[int, ...]:
        fresh = pick(count)
        offered.append((port, *fresh[1:]) if len(offered) % 2 == 0 else fresh)
        return offered[-1]

    with _taken() as port:
        monkeypatch.setattr(procs, "free_ports", every_other_taken)
        with DevCluster(tmp_path, nodes=1, shards=1, compaction_nodes=1) as cluster:
            # etcd, the broker, the S3 server, the data node: each took two picks.
            assert len(offered) == 8
            node, compaction = cluster.node_endpoints[0], cluster.compaction_endpoints[0]
            servers = [cluster.etcd.endpoint if cluster.etcd else "", cluster.bootstrap]
            servers += [cluster.s3_endpoint.removeprefix("http://"), *cluster.meta_endpoints]
            servers += [node.grpc, node.http, node.flight, compaction.grpc, compaction.http]
            assert f"127.0.0.1:{port}" not in servers
            with MetaClient(cluster.meta) as client:
                registered = {n.name: dict(n.endpoints) for n in client.nodes()}
            assert registered == {
                node.grpc: {"http": node.http, "flight": node.flight},
                compaction.grpc: {"http": compaction.http},
            }
            assert http_sql(node.http, "SELECT 1 AS one") == (200, {"rows": [{"one": 1}]})
