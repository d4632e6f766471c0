# ruff: noqa
# mypy: ignore-errors
# fmt: off
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class ReleaseRequest(_message.Message):
    __slots__ = ("shard_id", "epoch", "table_ids", "whole_shard")
    SHARD_ID_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    TABLE_IDS_FIELD_NUMBER: _ClassVar[int]
    WHOLE_SHARD_FIELD_NUMBER: _ClassVar[int]
    shard_id: int
    epoch: int
    table_ids: _containers.RepeatedScalarFieldContainer[int]
    whole_shard: bool
    def __init__(self, shard_id: _Optional[int] = ..., epoch: _Optional[int] = ..., table_ids: _Optional[_Iterable[int]] = ..., whole_shard: _Optional[bool] = ...) -> None: ...

class ReleaseResponse(_message.Message):
    __slots__ = ("tables",)
    TABLES_FIELD_NUMBER: _ClassVar[int]
    tables: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, tables: _Optional[_Iterable[str]] = ...) -> None: ...
