"""The gRPC service ``gnomon.meta.MetaService`` over :class:`~meta.core.MetaCore`.

Every call asks the instance for the core of its current term; an instance that does not lead
answers FAILED_PRECONDITION naming the leader (``meta/wire.py``), which the client follows.
"""

from __future__ import annotations

import logging
import queue
from collections.abc import Callable, Iterator
from typing import Any, NoReturn, Protocol, TypeVar

import grpc

from gnomon.errors import GnomonError, NotFound, NotLeader
from gnomon.proto import meta_pb2 as pb
from meta.core import MetaCore, RouteInfo
from meta.wire import (
    LEADER_KEY,
    NODE_KINDS,
    NODE_KINDS_BACK,
    SERVICE,
    grpc_code,
    procedure_info,
    shard_event,
    table_info,
)

log = logging.getLogger("gnomon.meta.grpc")

Req = TypeVar("Req")
Resp = TypeVar("Resp")

#: Longest a GetProcedure call waits for a procedure to finish.
MAX_WAIT_S = 60.0


class Leadership(Protocol):
    def core(self) -> MetaCore:
        """The core of the current term; NotLeader (naming the leader) if this instance does
        not lead."""
        ...


def _abort(context: grpc.ServicerContext, e: GnomonError) -> NoReturn:
    if isinstance(e, NotLeader):
        context.set_trailing_metadata(((LEADER_KEY, e.leader),))
    context.abort(grpc_code(e), e.message)
    raise AssertionError("unreachable: abort raises")


def _route(r: RouteInfo) -> pb.Route:
    shard = r.shard
    return pb.Route(
        table=r.table.name,
        table_id=r.table.id,
        shard_id=None if shard is None else shard.id,
        endpoint=(shard.leader or "") if shard is not None else "",
        epoch=0 if shard is None else shard.epoch,
        partitions=[_route(p) for p in r.partitions],
        endpoints=dict(r.endpoints),
        followers=[pb.Replica(endpoint=f, endpoints=dict(e)) for f, e in r.followers],
    )


class MetaService:
    def __init__(self, leadership: Leadership) -> None:
        self._leadership = leadership

    def _unary(
        self, fn: Callable[[MetaCore, Req], Resp]
    ) -> Callable[[Req, grpc.ServicerContext], Resp]:
        def call(request: Req, context: grpc.ServicerContext) -> Resp:
            try:
                return fn(self._leadership.core(), request)
            except GnomonError as e:
                _abort(context, e)

        return call

    # -- the calls ------------------------------------------------------------------------------

    @staticmethod
    def register_node(core: MetaCore, r: pb.RegisterNodeRequest) -> pb.RegisterNodeResponse:
        lease, ttl = core.register_node(
            r.name, NODE_KINDS_BACK[r.kind], r.ttl_s or None, dict(r.endpoints)
        )
        return pb.RegisterNodeResponse(lease_id=lease, ttl_s=ttl)

    @staticmethod
    def heartbeat(core: MetaCore, r: pb.HeartbeatRequest) -> pb.HeartbeatResponse:
        core.heartbeat(r.name, r.load, dict(r.shard_loads), dict(r.figures))
        return pb.HeartbeatResponse()

    @staticmethod
    def create_table(core: MetaCore, r: pb.CreateTableRequest) -> pb.CreateTableResponse:
        tables = core.create_table(r.name, r.schema, r.partitions)
        return pb.CreateTableResponse(tables=[table_info(t) for t in tables])

    @staticmethod
    def drop_table(core: MetaCore, r: pb.DropTableRequest) -> pb.DropTableResponse:
        return pb.DropTableResponse(dropped=core.drop_table(r.name))

    @staticmethod
    def route(core: MetaCore, r: pb.RouteRequest) -> pb.RouteResponse:
        return pb.RouteResponse(routes=[_route(x) for x in core.route(list(r.tables))])

    @staticmethod
    def list_nodes(core: MetaCore, r: pb.ListRequest) -> pb.ListNodesResponse:
        return pb.ListNodesResponse(
            nodes=[
                pb.NodeInfo(
                    name=n.node.name,
                    kind=NODE_KINDS[n.node.kind],
                    online=n.node.online,
                    live=n.live,
                    load=n.load,
                    leader_shards=n.leader_shards,
                    follower_shards=n.follower_shards,
                    endpoints=dict(n.node.endpoints),
                    figures=dict(n.figures),
                    heartbeat_age_s=-1.0 if n.heartbeat_age_s is None else n.heartbeat_age_s,
                )
                for n in core.nodes()
            ]
        )

    @staticmethod
    def list_shards(core: MetaCore, r: pb.ListRequest) -> pb.ListShardsResponse:
        return pb.ListShardsResponse(
            shards=[
                pb.ShardInfo(
                    id=s.id,
                    leader=s.leader or "",
                    followers=s.followers,
                    epoch=s.epoch,
                    status=s.status.value,
                    tables=tables,
                    load=load,
                    pinned=s.pinned,
                    procedure=s.procedure or 0,
                )
                for s, tables, load in core.shards()
            ]
        )

    @staticmethod
    def list_tables(core: MetaCore, r: pb.ListRequest) -> pb.ListTablesResponse:
        return pb.ListTablesResponse(tables=[table_info(t) for t in core.tables()])

    @staticmethod
    def migrate(core: MetaCore, r: pb.MigrateShardRequest) -> pb.ProcedureInfo:
        return procedure_info(core.migrate(r.shard_id, r.target))

    @staticmethod
    def split(core: MetaCore, r: pb.SplitShardRequest) -> pb.ProcedureInfo:
        return procedure_info(core.split(r.shard_id))

    @staticmethod
    def merge(core: MetaCore, r: pb.MergeShardsRequest) -> pb.ProcedureInfo:
        return procedure_info(core.merge(r.shard_id, r.other_id))

    @staticmethod
    def switch_role(core: MetaCore, r: pb.SwitchRoleRequest) -> pb.ProcedureInfo:
        return procedure_info(core.switch_role(r.shard_id, r.new_leader))

    @staticmethod
    def add_follower(core: MetaCore, r: pb.AddFollowerRequest) -> pb.ProcedureInfo:
        return procedure_info(core.add_follower(r.shard_id, r.follower))

    @staticmethod
    def get_procedure(core: MetaCore, r: pb.GetProcedureRequest) -> pb.ProcedureInfo:
        found = core.runner.wait(r.id, min(max(r.wait_s, 0.0), MAX_WAIT_S))
        if found is None:
            found = core.store.procedure(r.id)
        if found is None:
            raise NotFound(f"procedure {r.id} does not exist")
        return procedure_info(found)

    @staticmethod
    def pick_compaction_node(
        core: MetaCore, r: pb.PickCompactionNodeRequest
    ) -> pb.PickCompactionNodeResponse:
        return pb.PickCompactionNodeResponse(node=core.pick_compaction_node() or "")

    def watch_shards(
        self, request: pb.WatchShardsRequest, context: grpc.ServicerContext
    ) -> Iterator[pb.ShardEvent]:
        try:
            core = self._leadership.core()
        except GnomonError as e:
            _abort(context, e)
        sub_id, events, current = core.watch(request.node or None)
        try:
            for opened in current:
                yield shard_event(opened)
            while context.is_active():
                try:
                    event = events.get(timeout=0.5)
                except queue.Empty:
                    continue
                if event is None:
                    # This instance stopped leading (or the watcher fell behind): the client
                    # subscribes again, at the leader, and gets the full picture first.
                    _abort(context, NotLeader("the watch ended; subscribe again"))
                yield shard_event(event)
        finally:
            core.bus.unsubscribe(sub_id)

    def handler(self) -> grpc.GenericRpcHandler:
        unary: dict[str, tuple[Callable[[MetaCore, Any], Any], Any]] = {
            "RegisterNode": (self.register_node, pb.RegisterNodeRequest),
            "Heartbeat": (self.heartbeat, pb.HeartbeatRequest),
            "CreateTable": (self.create_table, pb.CreateTableRequest),
            "DropTable": (self.drop_table, pb.DropTableRequest),
            "Route": (self.route, pb.RouteRequest),
            "ListNodes": (self.list_nodes, pb.ListRequest),
            "ListShards": (self.list_shards, pb.ListRequest),
            "ListTables": (self.list_tables, pb.ListRequest),
            "MigrateShard": (self.migrate, pb.MigrateShardRequest),
            "SplitShard": (self.split, pb.SplitShardRequest),
            "MergeShards": (self.merge, pb.MergeShardsRequest),
            "SwitchRole": (self.switch_role, pb.SwitchRoleRequest),
            "AddFollower": (self.add_follower, pb.AddFollowerRequest),
            "GetProcedure": (self.get_procedure, pb.GetProcedureRequest),
            "PickCompactionNode": (self.pick_compaction_node, pb.PickCompactionNodeRequest),
        }
        handlers: dict[str, grpc.RpcMethodHandler[Any, Any]] = {
            name: grpc.unary_unary_rpc_method_handler(
                self._unary(fn),
                request_deserializer=request.FromString,
                response_serializer=lambda m: m.SerializeToString(),
            )
            for name, (fn, request) in unary.items()
        }
        handlers["WatchShards"] = grpc.unary_stream_rpc_method_handler(
            self.watch_shards,
            request_deserializer=pb.WatchShardsRequest.FromString,
            response_serializer=pb.ShardEvent.SerializeToString,
        )
        return grpc.method_handlers_generic_handler(SERVICE, handlers)
