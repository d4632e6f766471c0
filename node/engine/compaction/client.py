"""The client of compaction nodes: what a data node calls to offload a task, and what
``gnomon admin compaction-nodes`` asks each node. One channel per node, kept; calls carry the
cluster secret when there is one (``peer``; by default GNOMON_CLUSTER_SECRET)."""

from __future__ import annotations

import json
from typing import Any

import grpc
from google.protobuf.message import Message

from gnomon.compaction_wire import SERVICE, error_of
from gnomon.peer import Channels, Peer
from gnomon.proto import compaction_pb2 as pb
from node.engine.compaction.task import CompactionTask
from node.engine.sst.meta import SstMeta

#: Largest answer accepted (a task with many outputs).
MAX_MESSAGE_BYTES = 64 * 1024**2


class CompactionClient:
    def __init__(self, requester: str = "", *, peer: Peer | None = None) -> None:
        #: Who is asking, as the node lists it among its tasks.
        self.requester = requester
        self.peer = peer or Peer.from_env()
        self._channels = Channels(
            lambda node: self.peer.channel(
                node, options=[("grpc.max_receive_message_length", MAX_MESSAGE_BYTES)]
            )
        )

    def _call(self, node: str, method: str, request: Message, timeout_s: float) -> Any:
        stub: Any = self._channels.get(node).unary_unary(
            f"/{SERVICE}/{method}",
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=_RESPONSES[method].FromString,
        )
        try:
            return stub(request, timeout=timeout_s, metadata=self.peer.metadata())
        except grpc.RpcError as e:
            raise error_of(e, node) from None

    def compact(
        self, node: str, task_id: str, task: CompactionTask, timeout_s: float
    ) -> list[SstMeta]:
        request = pb.CompactRequest(task_id=task_id, task=task.dumps(), requester=self.requester)
        response: pb.CompactResponse = self._call(node, "Compact", request, timeout_s)
        return [SstMeta.from_json(json.loads(o)) for o in response.outputs]

    def status(self, node: str, timeout_s: float = 5.0) -> pb.StatusResponse:
        response: pb.StatusResponse = self._call(node, "Status", pb.StatusRequest(), timeout_s)
        return response

    def close(self) -> None:
        self._channels.close()

    def __enter__(self) -> CompactionClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_RESPONSES: dict[str, type[Message]] = {
    "Compact": pb.CompactResponse,
    "Status": pb.StatusResponse,
}
