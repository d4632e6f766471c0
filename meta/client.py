"""The client of the meta service: what data nodes, compaction nodes, the CLI and tools call.

:class:`MetaClient` talks to any of several meta endpoints: a call that reaches an instance that
does not lead is repeated at the leader it names, and one that finds an endpoint unreachable (or
an election in progress) moves on to the next, for up to ``retry_for_s`` seconds.
:class:`NodeAgent` is the registration-plus-heartbeat loop a node runs. Calls carry the
cluster secret when there is one (``peer``; by default GNOMON_CLUSTER_SECRET, so the admin
CLI and tools find it where the processes of the cluster do).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import grpc
from google.protobuf.message import Message

from gnomon.errors import GnomonError, NotFound, NotLeader, Unavailable
from gnomon.peer import Channels, Peer
from gnomon.proto import meta_pb2 as pb
from meta.model import NodeKind
from meta.wire import DEFAULT_PORT, NODE_KINDS, NODE_KINDS_BACK, SERVICE, error_of

log = logging.getLogger("gnomon.meta.client")

M = TypeVar("M", bound=Message)


def kind_of(node: pb.NodeInfo) -> NodeKind:
    """What a node listed by :meth:`MetaClient.nodes` is."""
    return NODE_KINDS_BACK[node.kind]


def _endpoints(endpoints: str | Sequence[str]) -> list[str]:
    items = endpoints.split(",") if isinstance(endpoints, str) else list(endpoints)
    targets = [i.strip() for i in items if i.strip()]
    if not targets:
        raise Unavailable("no meta endpoint given")
    return [t if ":" in t else f"{t}:{DEFAULT_PORT}" for t in targets]


class MetaClient:
    def __init__(
        self,
        endpoints: str | Sequence[str],
        *,
        timeout_s: float = 10.0,
        retry_for_s: float = 20.0,
        peer: Peer | None = None,
    ) -> None:
        self.endpoints = _endpoints(endpoints)
        peer = peer or Peer.from_env()
        self._metadata = peer.metadata()
        self._timeout_s = timeout_s
        self._retry_for_s = retry_for_s
        self._channels = Channels(peer.channel)
        self._current = self.endpoints[0]
        self._closed = threading.Event()

    def close(self) -> None:
        self._closed.set()
        self._channels.close()

    def __enter__(self) -> MetaClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _channel(self, target: str) -> grpc.Channel:
        return self._channels.get(target)

    def _with_leader(self, fn: Callable[[str], M]) -> M:
        """Run ``fn(endpoint)`` at the leader, following redirects and moving past dead
        endpoints until ``retry_for_s`` is spent."""
        deadline = time.monotonic() + self._retry_for_s
        target = self._current
        attempt = 0
        while True:
            try:
                result = fn(target)
                self._current = target
                return result
            except grpc.RpcError as e:
                error = error_of(e, target)
            if not error.retryable or time.monotonic() > deadline or self._closed.is_set():
                raise error
            attempt += 1
            if isinstance(error, NotLeader) and error.leader and error.leader != target:
                target = error.leader
            else:
                # Unreachable, or an election in progress: try the next endpoint.
                target = self.endpoints[attempt % len(self.endpoints)]
            # Pause once per round of the endpoints (plus a redirect), growing to 0.5 s.
            if attempt % (len(self.endpoints) + 1) == 0:
                time.sleep(min(0.5, 0.05 * attempt))

    def _unary(self, method: str, request: Message, response: type[M]) -> M:
        def call(target: str) -> M:
            stub: Any = self._channel(target).unary_unary(
                f"/{SERVICE}/{method}",
                request_serializer=lambda m: m.SerializeToString(),
                response_deserializer=response.FromString,
            )
            result: M = stub(request, timeout=self._timeout_s, metadata=self._metadata)
            return result

        return self._with_leader(call)

    # -- nodes ----------------------------------------------------------------------------------

    def register_node(
        self,
        name: str,
        kind: NodeKind,
        ttl_s: int = 0,
        endpoints: Mapping[str, str] | None = None,
    ) -> pb.RegisterNodeResponse:
        request = pb.RegisterNodeRequest(
            name=name, kind=NODE_KINDS[kind], ttl_s=ttl_s, endpoints=dict(endpoints or {})
        )
        return self._unary("RegisterNode", request, pb.RegisterNodeResponse)

    def heartbeat(
        self,
        name: str,
        load: float = 0.0,
        shard_loads: Mapping[int, float] | None = None,
        figures: Mapping[str, float] | None = None,
    ) -> None:
        """NotFound when the node must register again (its lease expired)."""
        request = pb.HeartbeatRequest(
            name=name, load=load, shard_loads=dict(shard_loads or {}), figures=dict(figures or {})
        )
        self._unary("Heartbeat", request, pb.HeartbeatResponse)

    def nodes(self) -> list[pb.NodeInfo]:
        return list(self._unary("ListNodes", pb.ListRequest(), pb.ListNodesResponse).nodes)

    def pick_compaction_node(self) -> str | None:
        """The compaction node to offload to, or None: compact locally."""
        request = pb.PickCompactionNodeRequest()
        node = self._unary("PickCompactionNode", request, pb.PickCompactionNodeResponse).node
        return node or None

    # -- tables ---------------------------------------------------------------------------------

    def create_table(
        self, name: str, schema: bytes = b"", partitions: int = 0
    ) -> list[pb.TableInfo]:
        request = pb.CreateTableRequest(name=name, schema=schema, partitions=partitions)
        return list(self._unary("CreateTable", request, pb.CreateTableResponse).tables)

    def drop_table(self, name: str) -> bool:
        request = pb.DropTableRequest(name=name)
        return self._unary("DropTable", request, pb.DropTableResponse).dropped

    def route(self, tables: Sequence[str]) -> list[pb.Route]:
        request = pb.RouteRequest(tables=list(tables))
        return list(self._unary("Route", request, pb.RouteResponse).routes)

    def shards(self) -> list[pb.ShardInfo]:
        return list(self._unary("ListShards", pb.ListRequest(), pb.ListShardsResponse).shards)

    def tables(self) -> list[pb.TableInfo]:
        return list(self._unary("ListTables", pb.ListRequest(), pb.ListTablesResponse).tables)

    # -- admin ----------------------------------------------------------------------------------

    def migrate(self, shard_id: int, target: str) -> pb.ProcedureInfo:
        request = pb.MigrateShardRequest(shard_id=shard_id, target=target)
        return self._unary("MigrateShard", request, pb.ProcedureInfo)

    def split(self, shard_id: int) -> pb.ProcedureInfo:
        return self._unary("SplitShard", pb.SplitShardRequest(shard_id=shard_id), pb.ProcedureInfo)

    def merge(self, shard_id: int, other_id: int) -> pb.ProcedureInfo:
        request = pb.MergeShardsRequest(shard_id=shard_id, other_id=other_id)
        return self._unary("MergeShards", request, pb.ProcedureInfo)

    def switch_role(self, shard_id: int, new_leader: str) -> pb.ProcedureInfo:
        request = pb.SwitchRoleRequest(shard_id=shard_id, new_leader=new_leader)
        return self._unary("SwitchRole", request, pb.ProcedureInfo)

    def add_follower(self, shard_id: int, follower: str) -> pb.ProcedureInfo:
        request = pb.AddFollowerRequest(shard_id=shard_id, follower=follower)
        return self._unary("AddFollower", request, pb.ProcedureInfo)

    def procedure(self, proc_id: int, wait_s: float = 0.0) -> pb.ProcedureInfo:
        """A procedure's state, after waiting up to ``wait_s`` for it to finish."""
        request = pb.GetProcedureRequest(id=proc_id, wait_s=wait_s)
        return self._unary("GetProcedure", request, pb.ProcedureInfo)

    def wait_procedure(self, proc_id: int, timeout_s: float = 60.0) -> pb.ProcedureInfo:
        """Wait (across leader changes) until a procedure is no longer running."""
        deadline = time.monotonic() + timeout_s
        while True:
            info = self.procedure(proc_id, wait_s=min(5.0, max(0.0, deadline - time.monotonic())))
            if info.status != "running" or time.monotonic() >= deadline:
                return info

    # -- events ---------------------------------------------------------------------------------

    def watch_shards(self, node: str | None = None) -> Iterator[pb.ShardEvent]:
        """Shard-assignment events (of ``node``, or all): first OPEN events for what is held
        now, then changes. Re-subscribes at the new leader when the leader changes, starting
        again with the full picture. Ends when the client is closed."""
        request = pb.WatchShardsRequest(node=node or "")
        while not self._closed.is_set():

            def open_stream(target: str) -> Any:
                stub: Any = self._channel(target).unary_stream(
                    f"/{SERVICE}/WatchShards",
                    request_serializer=lambda m: m.SerializeToString(),
                    response_deserializer=pb.ShardEvent.FromString,
                )
                stream = stub(request, metadata=self._metadata)
                # The first message (or the error) tells whether this endpoint leads.
                return stream, next(stream, None)

            try:
                stream, first = self._with_leader(open_stream)
                if first is not None:
                    yield first
                yield from stream
            except grpc.RpcError as e:
                if self._closed.is_set():
                    return
                log.info("watch interrupted; subscribing again", extra={"error": str(e)})
            except GnomonError:
                if self._closed.is_set():
                    return
                raise


class NodeAgent:
    """Registers a node and heartbeats every ``interval_s`` from a thread, registering again
    whenever meta says its lease expired. ``load`` returns the figures to report."""

    def __init__(
        self,
        client: MetaClient,
        name: str,
        kind: NodeKind = NodeKind.DATA,
        *,
        ttl_s: int = 0,
        interval_s: float = 1.0,
        load: Callable[[], tuple[float, Mapping[int, float]]] = lambda: (0.0, {}),
        on_renewed: Callable[[float, int], None] = lambda _sent, _ttl: None,
        endpoints: Mapping[str, str] | None = None,
        figures: Callable[[], Mapping[str, float]] = dict,
    ) -> None:
        self.client = client
        self._endpoints = dict(endpoints or {})
        #: What the node reports of itself with each heartbeat.
        self._figures = figures
        self.name = name
        self.kind = kind
        self._ttl_s = ttl_s
        self._interval_s = interval_s
        self._load = load
        #: Told (monotonic time the request was sent, lease TTL) after every registration or
        #: heartbeat meta accepted: the lease runs at least TTL seconds past that send time,
        #: which is what a node needs to fence itself before meta can see the lease expire.
        self._on_renewed = on_renewed
        self._ttl_granted = ttl_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.registrations = 0

    def start(self) -> None:
        self._register()
        self._thread = threading.Thread(
            target=self._run, name=f"heartbeat-{self.name}", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """Stop heartbeating: meta sees the node go offline once its lease expires."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _register(self) -> None:
        sent = time.monotonic()
        granted = self.client.register_node(self.name, self.kind, self._ttl_s, self._endpoints)
        self._ttl_granted = int(granted.ttl_s)
        self.registrations += 1
        self._on_renewed(sent, self._ttl_granted)

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            load, shard_loads = self._load()
            try:
                try:
                    sent = time.monotonic()
                    self.client.heartbeat(self.name, load, shard_loads, self._figures())
                    self._on_renewed(sent, self._ttl_granted)
                except NotFound:
                    if not self._stop.is_set():
                        self._register()
            except GnomonError as e:
                if self._stop.is_set():
                    return  # the client closed for the stop
                log.warning("heartbeat failed", extra={"node": self.name, "error": str(e)})
