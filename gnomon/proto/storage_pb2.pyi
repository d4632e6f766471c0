# ruff: noqa
# mypy: ignore-errors
# fmt: off
from gnomon.proto import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RequestContext(_message.Message):
    __slots__ = ("database",)
    DATABASE_FIELD_NUMBER: _ClassVar[int]
    database: str
    def __init__(self, database: _Optional[str] = ...) -> None: ...

class RouteRequest(_message.Message):
    __slots__ = ("context", "tables")
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    TABLES_FIELD_NUMBER: _ClassVar[int]
    context: RequestContext
    tables: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, context: _Optional[_Union[RequestContext, _Mapping]] = ..., tables: _Optional[_Iterable[str]] = ...) -> None: ...

class Endpoint(_message.Message):
    __slots__ = ("ip", "port")
    IP_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    ip: str
    port: int
    def __init__(self, ip: _Optional[str] = ..., port: _Optional[int] = ...) -> None: ...

class Route(_message.Message):
    __slots__ = ("table", "endpoint")
    TABLE_FIELD_NUMBER: _ClassVar[int]
    ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    table: str
    endpoint: Endpoint
    def __init__(self, table: _Optional[str] = ..., endpoint: _Optional[_Union[Endpoint, _Mapping]] = ...) -> None: ...

class RouteResponse(_message.Message):
    __slots__ = ("header", "routes")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    ROUTES_FIELD_NUMBER: _ClassVar[int]
    header: _common_pb2.ResponseHeader
    routes: _containers.RepeatedCompositeFieldContainer[Route]
    def __init__(self, header: _Optional[_Union[_common_pb2.ResponseHeader, _Mapping]] = ..., routes: _Optional[_Iterable[_Union[Route, _Mapping]]] = ...) -> None: ...

class Value(_message.Message):
    __slots__ = ("float64_value", "string_value", "int64_value", "float32_value", "int32_value", "int16_value", "int8_value", "bool_value", "uint64_value", "uint32_value", "uint16_value", "uint8_value", "timestamp_value", "varbinary_value")
    FLOAT64_VALUE_FIELD_NUMBER: _ClassVar[int]
    STRING_VALUE_FIELD_NUMBER: _ClassVar[int]
    INT64_VALUE_FIELD_NUMBER: _ClassVar[int]
    FLOAT32_VALUE_FIELD_NUMBER: _ClassVar[int]
    INT32_VALUE_FIELD_NUMBER: _ClassVar[int]
    INT16_VALUE_FIELD_NUMBER: _ClassVar[int]
    INT8_VALUE_FIELD_NUMBER: _ClassVar[int]
    BOOL_VALUE_FIELD_NUMBER: _ClassVar[int]
    UINT64_VALUE_FIELD_NUMBER: _ClassVar[int]
    UINT32_VALUE_FIELD_NUMBER: _ClassVar[int]
    UINT16_VALUE_FIELD_NUMBER: _ClassVar[int]
    UINT8_VALUE_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_VALUE_FIELD_NUMBER: _ClassVar[int]
    VARBINARY_VALUE_FIELD_NUMBER: _ClassVar[int]
    float64_value: float
    string_value: str
    int64_value: int
    float32_value: float
    int32_value: int
    int16_value: int
    int8_value: int
    bool_value: bool
    uint64_value: int
    uint32_value: int
    uint16_value: int
    uint8_value: int
    timestamp_value: int
    varbinary_value: bytes
    def __init__(self, float64_value: _Optional[float] = ..., string_value: _Optional[str] = ..., int64_value: _Optional[int] = ..., float32_value: _Optional[float] = ..., int32_value: _Optional[int] = ..., int16_value: _Optional[int] = ..., int8_value: _Optional[int] = ..., bool_value: _Optional[bool] = ..., uint64_value: _Optional[int] = ..., uint32_value: _Optional[int] = ..., uint16_value: _Optional[int] = ..., uint8_value: _Optional[int] = ..., timestamp_value: _Optional[int] = ..., varbinary_value: _Optional[bytes] = ...) -> None: ...

class Field(_message.Message):
    __slots__ = ("name_index", "value")
    NAME_INDEX_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    name_index: int
    value: Value
    def __init__(self, name_index: _Optional[int] = ..., value: _Optional[_Union[Value, _Mapping]] = ...) -> None: ...

class FieldGroup(_message.Message):
    __slots__ = ("timestamp", "fields")
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    FIELDS_FIELD_NUMBER: _ClassVar[int]
    timestamp: int
    fields: _containers.RepeatedCompositeFieldContainer[Field]
    def __init__(self, timestamp: _Optional[int] = ..., fields: _Optional[_Iterable[_Union[Field, _Mapping]]] = ...) -> None: ...

class Tag(_message.Message):
    __slots__ = ("name_index", "value")
    NAME_INDEX_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    name_index: int
    value: Value
    def __init__(self, name_index: _Optional[int] = ..., value: _Optional[_Union[Value, _Mapping]] = ...) -> None: ...

class WriteSeriesEntry(_message.Message):
    __slots__ = ("tags", "field_groups")
    TAGS_FIELD_NUMBER: _ClassVar[int]
    FIELD_GROUPS_FIELD_NUMBER: _ClassVar[int]
    tags: _containers.RepeatedCompositeFieldContainer[Tag]
    field_groups: _containers.RepeatedCompositeFieldContainer[FieldGroup]
    def __init__(self, tags: _Optional[_Iterable[_Union[Tag, _Mapping]]] = ..., field_groups: _Optional[_Iterable[_Union[FieldGroup, _Mapping]]] = ...) -> None: ...

class WriteTableRequest(_message.Message):
    __slots__ = ("table", "tag_names", "field_names", "entries")
    TABLE_FIELD_NUMBER: _ClassVar[int]
    TAG_NAMES_FIELD_NUMBER: _ClassVar[int]
    FIELD_NAMES_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    table: str
    tag_names: _containers.RepeatedScalarFieldContainer[str]
    field_names: _containers.RepeatedScalarFieldContainer[str]
    entries: _containers.RepeatedCompositeFieldContainer[WriteSeriesEntry]
    def __init__(self, table: _Optional[str] = ..., tag_names: _Optional[_Iterable[str]] = ..., field_names: _Optional[_Iterable[str]] = ..., entries: _Optional[_Iterable[_Union[WriteSeriesEntry, _Mapping]]] = ...) -> None: ...

class WriteRequest(_message.Message):
    __slots__ = ("context", "table_requests")
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    TABLE_REQUESTS_FIELD_NUMBER: _ClassVar[int]
    context: RequestContext
    table_requests: _containers.RepeatedCompositeFieldContainer[WriteTableRequest]
    def __init__(self, context: _Optional[_Union[RequestContext, _Mapping]] = ..., table_requests: _Optional[_Iterable[_Union[WriteTableRequest, _Mapping]]] = ...) -> None: ...

class WriteResponse(_message.Message):
    __slots__ = ("header", "success", "failed")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    header: _common_pb2.ResponseHeader
    success: int
    failed: int
    def __init__(self, header: _Optional[_Union[_common_pb2.ResponseHeader, _Mapping]] = ..., success: _Optional[int] = ..., failed: _Optional[int] = ...) -> None: ...

class SqlQueryRequest(_message.Message):
    __slots__ = ("context", "tables", "sql")
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    TABLES_FIELD_NUMBER: _ClassVar[int]
    SQL_FIELD_NUMBER: _ClassVar[int]
    context: RequestContext
    tables: _containers.RepeatedScalarFieldContainer[str]
    sql: str
    def __init__(self, context: _Optional[_Union[RequestContext, _Mapping]] = ..., tables: _Optional[_Iterable[str]] = ..., sql: _Optional[str] = ...) -> None: ...

class ArrowPayload(_message.Message):
    __slots__ = ("record_batches", "compression")
    class Compression(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        NONE: _ClassVar[ArrowPayload.Compression]
        ZSTD: _ClassVar[ArrowPayload.Compression]
    NONE: ArrowPayload.Compression
    ZSTD: ArrowPayload.Compression
    RECORD_BATCHES_FIELD_NUMBER: _ClassVar[int]
    COMPRESSION_FIELD_NUMBER: _ClassVar[int]
    record_batches: _containers.RepeatedScalarFieldContainer[bytes]
    compression: ArrowPayload.Compression
    def __init__(self, record_batches: _Optional[_Iterable[bytes]] = ..., compression: _Optional[_Union[ArrowPayload.Compression, str]] = ...) -> None: ...

class SqlQueryResponse(_message.Message):
    __slots__ = ("header", "affected_rows", "arrow")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    AFFECTED_ROWS_FIELD_NUMBER: _ClassVar[int]
    ARROW_FIELD_NUMBER: _ClassVar[int]
    header: _common_pb2.ResponseHeader
    affected_rows: int
    arrow: ArrowPayload
    def __init__(self, header: _Optional[_Union[_common_pb2.ResponseHeader, _Mapping]] = ..., affected_rows: _Optional[int] = ..., arrow: _Optional[_Union[ArrowPayload, _Mapping]] = ...) -> None: ...

class PrometheusRemoteQueryRequest(_message.Message):
    __slots__ = ("context", "query")
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    context: RequestContext
    query: bytes
    def __init__(self, context: _Optional[_Union[RequestContext, _Mapping]] = ..., query: _Optional[bytes] = ...) -> None: ...

class PrometheusRemoteQueryResponse(_message.Message):
    __slots__ = ("header", "response")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    header: _common_pb2.ResponseHeader
    response: bytes
    def __init__(self, header: _Optional[_Union[_common_pb2.ResponseHeader, _Mapping]] = ..., response: _Optional[bytes] = ...) -> None: ...
