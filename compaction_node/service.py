"""The gRPC ``CompactionService`` of a compaction node: ``Compact`` runs one offloaded task,
``Status`` tells the node's load and the tasks it holds.

A task's output prefix must be its workspace (``tables/<id>/workspace/<task id>``): the node
writes nowhere else. When the caller is gone by the time the merge ends (it timed out, or its
connection dropped) the outputs are deleted rather than answered: the data node has fallen back
to merging itself and would discard them anyway.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import Any, NoReturn

import grpc

from compaction_node.executor import Executor
from compaction_node.tasks import TaskInfo, Tasks
from gnomon.compaction_wire import SERVICE, grpc_code
from gnomon.errors import GnomonError, InvalidArgument
from gnomon.proto import compaction_pb2 as pb
from node.engine.compaction.offload import workspace_prefix
from node.engine.compaction.task import CompactionTask

log = logging.getLogger("gnomon.compaction_node")


def _abort(context: grpc.ServicerContext, e: GnomonError) -> NoReturn:
    context.abort(grpc_code(e), e.message)
    raise AssertionError("unreachable: abort raises")


class CompactionService:
    def __init__(
        self,
        tasks: Tasks,
        executor: Executor,
        *,
        hold_answer_s: float = 0.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.tasks = tasks
        self.executor = executor
        self._hold_answer_s = hold_answer_s
        self._sleep = sleep

    def compact(self, request: pb.CompactRequest, context: grpc.ServicerContext) -> Any:
        try:
            task = _task_of(request)
        except GnomonError as e:
            _abort(context, e)
        except (ValueError, KeyError, TypeError) as e:
            _abort(context, InvalidArgument(f"task {request.task_id}: unreadable task ({e!r})"))
        info = TaskInfo(
            request.task_id,
            task.table_id,
            len(task.inputs),
            sum(f.size for f in task.inputs),
            request.requester,
        )
        try:
            with self.tasks.slot(info):
                started = time.monotonic()
                try:
                    outputs = self.executor.merge(task)
                except BaseException:
                    # Counted here, not below: a task refused for want of a slot never ran.
                    self.tasks.failed()
                    raise
                if self._hold_answer_s:
                    self._sleep(self._hold_answer_s)
                if not context.is_active():
                    self.executor.discard(outputs)
                    self.tasks.discarded()
                    log.info(
                        "compaction discarded: its caller is gone",
                        extra={"task": request.task_id, "requester": request.requester},
                    )
                    return pb.CompactResponse()
                written = sum(o.size for o in outputs)
                self.tasks.finished(bytes_read=info.input_bytes, bytes_written=written)
        except GnomonError as e:
            log.warning("compaction failed", extra={"task": request.task_id, "error": e.message})
            _abort(context, e)
        except Exception as e:
            log.exception("compaction failed", extra={"task": request.task_id})
            _abort(context, GnomonError(f"task {request.task_id} failed: {e!r}"))
        seconds = time.monotonic() - started
        log.info(
            "compaction done",
            extra={
                "task": request.task_id,
                "table_id": task.table_id,
                "inputs": len(task.inputs),
                "outputs": len(outputs),
                "bytes_read": info.input_bytes,
                "seconds": round(seconds, 3),
                "executor": self.executor.name,
            },
        )
        return pb.CompactResponse(
            outputs=[_json(o.to_json()) for o in outputs],
            bytes_read=info.input_bytes,
            bytes_written=written,
            seconds=seconds,
            executor=self.executor.name,
        )

    def status(self, request: pb.StatusRequest, context: grpc.ServicerContext) -> Any:
        now = time.monotonic()
        held = self.tasks.held()
        counts = self.tasks.counts()
        figures = self.tasks.last_figures()
        return pb.StatusResponse(
            name=self.tasks.name,
            executor=self.executor.name,
            slots=self.tasks.slots,
            running=sum(1 for t in held if t.running),
            queued=sum(1 for t in held if not t.running),
            bytes_per_s=figures.get("bytes_per_s", 0.0),
            cpu=figures.get("cpu", 0.0),
            tasks=[
                pb.RunningTask(
                    task_id=t.task_id,
                    table_id=t.table_id,
                    inputs=t.inputs,
                    input_bytes=t.input_bytes,
                    seconds=now - t.taken,
                    requester=t.requester,
                    state="running" if t.running else "queued",
                )
                for t in held
            ],
            tasks_done=counts.done,
            tasks_failed=counts.failed,
            tasks_discarded=counts.discarded,
        )

    def handler(self) -> grpc.GenericRpcHandler:
        methods: dict[str, tuple[Callable[[Any, grpc.ServicerContext], Any], Any]] = {
            "Compact": (self.compact, pb.CompactRequest),
            "Status": (self.status, pb.StatusRequest),
        }
        return grpc.method_handlers_generic_handler(
            SERVICE,
            {
                name: grpc.unary_unary_rpc_method_handler(
                    fn,
                    request_deserializer=request.FromString,
                    response_serializer=lambda m: m.SerializeToString(),
                )
                for name, (fn, request) in methods.items()
            },
        )


def _task_of(request: pb.CompactRequest) -> CompactionTask:
    task = CompactionTask.loads(request.task)
    expected = workspace_prefix(task.table_id, request.task_id)
    if task.output_prefix != expected:
        raise InvalidArgument(
            f"task {request.task_id}: outputs must go to its workspace {expected}, "
            f"not {task.output_prefix!r}"
        )
    return task


def _json(value: object) -> str:
    return json.dumps(value, separators=(",", ":"))
