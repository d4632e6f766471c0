# ruff: noqa
# mypy: ignore-errors
# fmt: off
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class NodeKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DATA: _ClassVar[NodeKind]
    COMPACTION: _ClassVar[NodeKind]
    QUERY: _ClassVar[NodeKind]
DATA: NodeKind
COMPACTION: NodeKind
QUERY: NodeKind

class RegisterNodeRequest(_message.Message):
    __slots__ = ("name", "kind", "ttl_s", "endpoints")
    class EndpointsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    TTL_S_FIELD_NUMBER: _ClassVar[int]
    ENDPOINTS_FIELD_NUMBER: _ClassVar[int]
    name: str
    kind: NodeKind
    ttl_s: int
    endpoints: _containers.ScalarMap[str, str]
    def __init__(self, name: _Optional[str] = ..., kind: _Optional[_Union[NodeKind, str]] = ..., ttl_s: _Optional[int] = ..., endpoints: _Optional[_Mapping[str, str]] = ...) -> None: ...

class RegisterNodeResponse(_message.Message):
    __slots__ = ("lease_id", "ttl_s")
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    TTL_S_FIELD_NUMBER: _ClassVar[int]
    lease_id: int
    ttl_s: int
    def __init__(self, lease_id: _Optional[int] = ..., ttl_s: _Optional[int] = ...) -> None: ...

class HeartbeatRequest(_message.Message):
    __slots__ = ("name", "load", "shard_loads", "figures")
    class ShardLoadsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: float
        def __init__(self, key: _Optional[int] = ..., value: _Optional[float] = ...) -> None: ...
    class FiguresEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    LOAD_FIELD_NUMBER: _ClassVar[int]
    SHARD_LOADS_FIELD_NUMBER: _ClassVar[int]
    FIGURES_FIELD_NUMBER: _ClassVar[int]
    name: str
    load: float
    shard_loads: _containers.ScalarMap[int, float]
    figures: _containers.ScalarMap[str, float]
    def __init__(self, name: _Optional[str] = ..., load: _Optional[float] = ..., shard_loads: _Optional[_Mapping[int, float]] = ..., figures: _Optional[_Mapping[str, float]] = ...) -> None: ...

class HeartbeatResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class NodeInfo(_message.Message):
    __slots__ = ("name", "kind", "online", "live", "load", "leader_shards", "follower_shards", "endpoints", "figures", "heartbeat_age_s")
    class EndpointsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class FiguresEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    ONLINE_FIELD_NUMBER: _ClassVar[int]
    LIVE_FIELD_NUMBER: _ClassVar[int]
    LOAD_FIELD_NUMBER: _ClassVar[int]
    LEADER_SHARDS_FIELD_NUMBER: _ClassVar[int]
    FOLLOWER_SHARDS_FIELD_NUMBER: _ClassVar[int]
    ENDPOINTS_FIELD_NUMBER: _ClassVar[int]
    FIGURES_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_AGE_S_FIELD_NUMBER: _ClassVar[int]
    name: str
    kind: NodeKind
    online: bool
    live: bool
    load: float
    leader_shards: int
    follower_shards: int
    endpoints: _containers.ScalarMap[str, str]
    figures: _containers.ScalarMap[str, float]
    heartbeat_age_s: float
    def __init__(self, name: _Optional[str] = ..., kind: _Optional[_Union[NodeKind, str]] = ..., online: _Optional[bool] = ..., live: _Optional[bool] = ..., load: _Optional[float] = ..., leader_shards: _Optional[int] = ..., follower_shards: _Optional[int] = ..., endpoints: _Optional[_Mapping[str, str]] = ..., figures: _Optional[_Mapping[str, float]] = ..., heartbeat_age_s: _Optional[float] = ...) -> None: ...

class ShardInfo(_message.Message):
    __slots__ = ("id", "leader", "followers", "epoch", "status", "tables", "load", "pinned", "procedure")
    ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    FOLLOWERS_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    TABLES_FIELD_NUMBER: _ClassVar[int]
    LOAD_FIELD_NUMBER: _ClassVar[int]
    PINNED_FIELD_NUMBER: _ClassVar[int]
    PROCEDURE_FIELD_NUMBER: _ClassVar[int]
    id: int
    leader: str
    followers: _containers.RepeatedScalarFieldContainer[str]
    epoch: int
    status: str
    tables: int
    load: float
    pinned: bool
    procedure: int
    def __init__(self, id: _Optional[int] = ..., leader: _Optional[str] = ..., followers: _Optional[_Iterable[str]] = ..., epoch: _Optional[int] = ..., status: _Optional[str] = ..., tables: _Optional[int] = ..., load: _Optional[float] = ..., pinned: _Optional[bool] = ..., procedure: _Optional[int] = ...) -> None: ...

class TableInfo(_message.Message):
    __slots__ = ("id", "name", "schema", "shard_id", "partitions", "parent_id", "partition_index")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    SHARD_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    PARENT_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITION_INDEX_FIELD_NUMBER: _ClassVar[int]
    id: int
    name: str
    schema: bytes
    shard_id: int
    partitions: int
    parent_id: int
    partition_index: int
    def __init__(self, id: _Optional[int] = ..., name: _Optional[str] = ..., schema: _Optional[bytes] = ..., shard_id: _Optional[int] = ..., partitions: _Optional[int] = ..., parent_id: _Optional[int] = ..., partition_index: _Optional[int] = ...) -> None: ...

class CreateTableRequest(_message.Message):
    __slots__ = ("name", "schema", "partitions")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    name: str
    schema: bytes
    partitions: int
    def __init__(self, name: _Optional[str] = ..., schema: _Optional[bytes] = ..., partitions: _Optional[int] = ...) -> None: ...

class CreateTableResponse(_message.Message):
    __slots__ = ("tables",)
    TABLES_FIELD_NUMBER: _ClassVar[int]
    tables: _containers.RepeatedCompositeFieldContainer[TableInfo]
    def __init__(self, tables: _Optional[_Iterable[_Union[TableInfo, _Mapping]]] = ...) -> None: ...

class DropTableRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class DropTableResponse(_message.Message):
    __slots__ = ("dropped",)
    DROPPED_FIELD_NUMBER: _ClassVar[int]
    dropped: bool
    def __init__(self, dropped: _Optional[bool] = ...) -> None: ...

class RouteRequest(_message.Message):
    __slots__ = ("tables",)
    TABLES_FIELD_NUMBER: _ClassVar[int]
    tables: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, tables: _Optional[_Iterable[str]] = ...) -> None: ...

class Route(_message.Message):
    __slots__ = ("table", "table_id", "shard_id", "endpoint", "epoch", "partitions", "endpoints", "followers")
    class EndpointsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    TABLE_FIELD_NUMBER: _ClassVar[int]
    TABLE_ID_FIELD_NUMBER: _ClassVar[int]
    SHARD_ID_FIELD_NUMBER: _ClassVar[int]
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    ENDPOINTS_FIELD_NUMBER: _ClassVar[int]
    FOLLOWERS_FIELD_NUMBER: _ClassVar[int]
    table: str
    table_id: int
    shard_id: int
    endpoint: str
    epoch: int
    partitions: _containers.RepeatedCompositeFieldContainer[Route]
    endpoints: _containers.ScalarMap[str, str]
    followers: _containers.RepeatedCompositeFieldContainer[Replica]
    def __init__(self, table: _Optional[str] = ..., table_id: _Optional[int] = ..., shard_id: _Optional[int] = ..., endpoint: _Optional[str] = ..., epoch: _Optional[int] = ..., partitions: _Optional[_Iterable[_Union[Route, _Mapping]]] = ..., endpoints: _Optional[_Mapping[str, str]] = ..., followers: _Optional[_Iterable[_Union[Replica, _Mapping]]] = ...) -> None: ...

class Replica(_message.Message):
    __slots__ = ("endpoint", "endpoints")
    class EndpointsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    ENDPOINTS_FIELD_NUMBER: _ClassVar[int]
    endpoint: str
    endpoints: _containers.ScalarMap[str, str]
    def __init__(self, endpoint: _Optional[str] = ..., endpoints: _Optional[_Mapping[str, str]] = ...) -> None: ...

class RouteResponse(_message.Message):
    __slots__ = ("routes",)
    ROUTES_FIELD_NUMBER: _ClassVar[int]
    routes: _containers.RepeatedCompositeFieldContainer[Route]
    def __init__(self, routes: _Optional[_Iterable[_Union[Route, _Mapping]]] = ...) -> None: ...

class ListRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListNodesResponse(_message.Message):
    __slots__ = ("nodes",)
    NODES_FIELD_NUMBER: _ClassVar[int]
    nodes: _containers.RepeatedCompositeFieldContainer[NodeInfo]
    def __init__(self, nodes: _Optional[_Iterable[_Union[NodeInfo, _Mapping]]] = ...) -> None: ...

class ListShardsResponse(_message.Message):
    __slots__ = ("shards",)
    SHARDS_FIELD_NUMBER: _ClassVar[int]
    shards: _containers.RepeatedCompositeFieldContainer[ShardInfo]
    def __init__(self, shards: _Optional[_Iterable[_Union[ShardInfo, _Mapping]]] = ...) -> None: ...

class ListTablesResponse(_message.Message):
    __slots__ = ("tables",)
    TABLES_FIELD_NUMBER: _ClassVar[int]
    tables: _containers.RepeatedCompositeFieldContainer[TableInfo]
    def __init__(self, tables: _Optional[_Iterable[_Union[TableInfo, _Mapping]]] = ...) -> None: ...

class WatchShardsRequest(_message.Message):
    __slots__ = ("node",)
    NODE_FIELD_NUMBER: _ClassVar[int]
    node: str
    def __init__(self, node: _Optional[str] = ...) -> None: ...

class ShardEvent(_message.Message):
    __slots__ = ("kind", "shard_id", "node", "role", "epoch")
    class Kind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        OPEN: _ClassVar[ShardEvent.Kind]
        CLOSE: _ClassVar[ShardEvent.Kind]
    OPEN: ShardEvent.Kind
    CLOSE: ShardEvent.Kind
    KIND_FIELD_NUMBER: _ClassVar[int]
    SHARD_ID_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    kind: ShardEvent.Kind
    shard_id: int
    node: str
    role: str
    epoch: int
    def __init__(self, kind: _Optional[_Union[ShardEvent.Kind, str]] = ..., shard_id: _Optional[int] = ..., node: _Optional[str] = ..., role: _Optional[str] = ..., epoch: _Optional[int] = ...) -> None: ...

class MigrateShardRequest(_message.Message):
    __slots__ = ("shard_id", "target")
    SHARD_ID_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    shard_id: int
    target: str
    def __init__(self, shard_id: _Optional[int] = ..., target: _Optional[str] = ...) -> None: ...

class SplitShardRequest(_message.Message):
    __slots__ = ("shard_id",)
    SHARD_ID_FIELD_NUMBER: _ClassVar[int]
    shard_id: int
    def __init__(self, shard_id: _Optional[int] = ...) -> None: ...

class MergeShardsRequest(_message.Message):
    __slots__ = ("shard_id", "other_id")
    SHARD_ID_FIELD_NUMBER: _ClassVar[int]
    OTHER_ID_FIELD_NUMBER: _ClassVar[int]
    shard_id: int
    other_id: int
    def __init__(self, shard_id: _Optional[int] = ..., other_id: _Optional[int] = ...) -> None: ...

class SwitchRoleRequest(_message.Message):
    __slots__ = ("shard_id", "new_leader")
    SHARD_ID_FIELD_NUMBER: _ClassVar[int]
    NEW_LEADER_FIELD_NUMBER: _ClassVar[int]
    shard_id: int
    new_leader: str
    def __init__(self, shard_id: _Optional[int] = ..., new_leader: _Optional[str] = ...) -> None: ...

class AddFollowerRequest(_message.Message):
    __slots__ = ("shard_id", "follower")
    SHARD_ID_FIELD_NUMBER: _ClassVar[int]
    FOLLOWER_FIELD_NUMBER: _ClassVar[int]
    shard_id: int
    follower: str
    def __init__(self, shard_id: _Optional[int] = ..., follower: _Optional[str] = ...) -> None: ...

class GetProcedureRequest(_message.Message):
    __slots__ = ("id", "wait_s")
    ID_FIELD_NUMBER: _ClassVar[int]
    WAIT_S_FIELD_NUMBER: _ClassVar[int]
    id: int
    wait_s: float
    def __init__(self, id: _Optional[int] = ..., wait_s: _Optional[float] = ...) -> None: ...

class ProcedureInfo(_message.Message):
    __slots__ = ("id", "kind", "status", "step", "error", "params")
    ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    id: int
    kind: str
    status: str
    step: int
    error: str
    params: str
    def __init__(self, id: _Optional[int] = ..., kind: _Optional[str] = ..., status: _Optional[str] = ..., step: _Optional[int] = ..., error: _Optional[str] = ..., params: _Optional[str] = ...) -> None: ...

class PickCompactionNodeRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class PickCompactionNodeResponse(_message.Message):
    __slots__ = ("node",)
    NODE_FIELD_NUMBER: _ClassVar[int]
    node: str
    def __init__(self, node: _Optional[str] = ...) -> None: ...
