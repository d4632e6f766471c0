# ruff: noqa
# mypy: ignore-errors
# fmt: off
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CompactRequest(_message.Message):
    __slots__ = ("task_id", "task", "requester")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    REQUESTER_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    task: str
    requester: str
    def __init__(self, task_id: _Optional[str] = ..., task: _Optional[str] = ..., requester: _Optional[str] = ...) -> None: ...

class CompactResponse(_message.Message):
    __slots__ = ("outputs", "bytes_read", "bytes_written", "seconds", "executor")
    OUTPUTS_FIELD_NUMBER: _ClassVar[int]
    BYTES_READ_FIELD_NUMBER: _ClassVar[int]
    BYTES_WRITTEN_FIELD_NUMBER: _ClassVar[int]
    SECONDS_FIELD_NUMBER: _ClassVar[int]
    EXECUTOR_FIELD_NUMBER: _ClassVar[int]
    outputs: _containers.RepeatedScalarFieldContainer[str]
    bytes_read: int
    bytes_written: int
    seconds: float
    executor: str
    def __init__(self, outputs: _Optional[_Iterable[str]] = ..., bytes_read: _Optional[int] = ..., bytes_written: _Optional[int] = ..., seconds: _Optional[float] = ..., executor: _Optional[str] = ...) -> None: ...

class StatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RunningTask(_message.Message):
    __slots__ = ("task_id", "table_id", "inputs", "input_bytes", "seconds", "requester", "state")
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    TABLE_ID_FIELD_NUMBER: _ClassVar[int]
    INPUTS_FIELD_NUMBER: _ClassVar[int]
    INPUT_BYTES_FIELD_NUMBER: _ClassVar[int]
    SECONDS_FIELD_NUMBER: _ClassVar[int]
    REQUESTER_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    table_id: int
    inputs: int
    input_bytes: int
    seconds: float
    requester: str
    state: str
    def __init__(self, task_id: _Optional[str] = ..., table_id: _Optional[int] = ..., inputs: _Optional[int] = ..., input_bytes: _Optional[int] = ..., seconds: _Optional[float] = ..., requester: _Optional[str] = ..., state: _Optional[str] = ...) -> None: ...

class StatusResponse(_message.Message):
    __slots__ = ("name", "executor", "slots", "running", "queued", "bytes_per_s", "cpu", "tasks", "tasks_done", "tasks_failed", "tasks_discarded")
    NAME_FIELD_NUMBER: _ClassVar[int]
    EXECUTOR_FIELD_NUMBER: _ClassVar[int]
    SLOTS_FIELD_NUMBER: _ClassVar[int]
    RUNNING_FIELD_NUMBER: _ClassVar[int]
    QUEUED_FIELD_NUMBER: _ClassVar[int]
    BYTES_PER_S_FIELD_NUMBER: _ClassVar[int]
    CPU_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    TASKS_DONE_FIELD_NUMBER: _ClassVar[int]
    TASKS_FAILED_FIELD_NUMBER: _ClassVar[int]
    TASKS_DISCARDED_FIELD_NUMBER: _ClassVar[int]
    name: str
    executor: str
    slots: int
    running: int
    queued: int
    bytes_per_s: float
    cpu: float
    tasks: _containers.RepeatedCompositeFieldContainer[RunningTask]
    tasks_done: int
    tasks_failed: int
    tasks_discarded: int
    def __init__(self, name: _Optional[str] = ..., executor: _Optional[str] = ..., slots: _Optional[int] = ..., running: _Optional[int] = ..., queued: _Optional[int] = ..., bytes_per_s: _Optional[float] = ..., cpu: _Optional[float] = ..., tasks: _Optional[_Iterable[_Union[RunningTask, _Mapping]]] = ..., tasks_done: _Optional[int] = ..., tasks_failed: _Optional[int] = ..., tasks_discarded: _Optional[int] = ...) -> None: ...
