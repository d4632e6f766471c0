"""Offloaded compaction, the data node's side (HoraeDB's ``compaction_mode =
"Offload"`` with ``fallback_local_when_failed``).

A table compacts where its ``compaction_mode`` option says, or where the node's setting says
when the option is ``auto``. An offloaded merge asks meta for a compaction node, sends it the
task with its output prefix moved into a workspace of its own (``tables/<id>/workspace/<task>``,
named by the data node), and gets back the metadata of the outputs the node wrote there. The
compactor then installs them with its usual ``compaction`` commit under the conflict rules:
the files stay where they are, referenced by the manifest from then on.

Any failure falls back to merging here: no node (none live, or meta unreachable), the node
dying, refusing, failing or not answering within the timeout, or an answer that does not
describe files in the workspace. The workspace is emptied before the fallback, so what the
remote node wrote is not left behind; a node still running the task when its caller gave up
deletes its outputs itself instead of answering (its answer would arrive after the fallback
committed, and is discarded). Whatever a node killed mid-write leaves later is under the
table's prefix, unreferenced, and garbage collection removes it after the grace period.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from contextlib import suppress
from enum import StrEnum
from typing import Protocol

from gnomon.errors import DeadlineExceeded, GnomonError, InvalidArgument, NotFound, Unavailable
from node.engine.compaction.compactor import run_locally
from node.engine.compaction.task import CompactionTask
from node.engine.options import TableOptions
from node.engine.sst.meta import SstMeta
from node.engine.table import Table
from objectstore.api import ObjectStore

log = logging.getLogger("gnomon.engine.offload")


class CompactionMode(StrEnum):
    #: The table follows the node's setting.
    AUTO = "auto"
    LOCAL = "local"
    OFFLOAD = "offload"


def workspace_prefix(table_id: int, task_id: str) -> str:
    """Where the outputs of offloaded task ``task_id`` go: under the table's prefix, so that
    garbage collection sees what a failed task leaves."""
    if not task_id or not task_id.isalnum():
        raise InvalidArgument(f"invalid compaction task id {task_id!r}: letters and digits only")
    return f"tables/{table_id}/workspace/{task_id}"


class CompactionNodes(Protocol):
    """Who picks the compaction node (the meta client)."""

    def pick_compaction_node(self) -> str | None:
        """The node to offload to; None when there is none. Raises GnomonError when it
        cannot tell (meta unreachable)."""
        ...


class RemoteCompactor(Protocol):
    """How a task reaches a compaction node (``node/engine/compaction/client.py`` over gRPC)."""

    def compact(
        self, node: str, task_id: str, task: CompactionTask, timeout_s: float
    ) -> list[SstMeta]:
        """The outputs the node wrote; DeadlineExceeded past ``timeout_s``, Unavailable when
        the node cannot be reached or refuses, another GnomonError when the merge failed."""
        ...


class Outcome(StrEnum):
    OFFLOADED = "offloaded"
    LOCAL = "local"
    #: Reasons of a fallback.
    NO_NODE = "fallback_no_node"
    META_DOWN = "fallback_meta_unreachable"
    UNAVAILABLE = "fallback_node_unavailable"
    TIMEOUT = "fallback_timeout"
    FAILED = "fallback_failed"
    #: The node found the task invalid, or its answer named files not in the workspace.
    INVALID = "fallback_invalid"


class Offload:
    """Runs a table's compaction tasks here or on a compaction node (see the module doc)."""

    def __init__(
        self,
        nodes: CompactionNodes,
        remote: RemoteCompactor,
        *,
        mode: CompactionMode = CompactionMode.LOCAL,
        timeout_s: float = 600.0,
    ) -> None:
        if mode is CompactionMode.AUTO:
            raise InvalidArgument("a node's compaction_mode is 'local' or 'offload', not 'auto'")
        self._nodes = nodes
        self._remote = remote
        self.mode = mode
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        self._outcomes: dict[Outcome, int] = {}
        #: Compaction node -> tasks it merged for this node.
        self.by_node: dict[str, int] = {}

    def offloads(self, options: TableOptions) -> bool:
        mode = CompactionMode(options.compaction_mode)
        return (self.mode if mode is CompactionMode.AUTO else mode) is CompactionMode.OFFLOAD

    def runner(self, table: Table) -> Callable[[CompactionTask], list[SstMeta]]:
        """The run function of ``table``'s compactor."""
        return lambda task: self.run(table, task)

    def outcomes(self) -> dict[str, int]:
        """Tasks by outcome since start: offloaded, local, and each reason of a fallback."""
        with self._lock:
            return {o.value: n for o, n in self._outcomes.items()}

    def _count(self, outcome: Outcome, node: str | None = None) -> None:
        with self._lock:
            self._outcomes[outcome] = self._outcomes.get(outcome, 0) + 1
            if node is not None:
                self.by_node[node] = self.by_node.get(node, 0) + 1

    def run(self, table: Table, task: CompactionTask) -> list[SstMeta]:
        if not self.offloads(table.info.options):
            self._count(Outcome.LOCAL)
            return run_locally(table, task)
        try:
            node = self._nodes.pick_compaction_node()
        except GnomonError as e:
            return self._fallback(table, task, Outcome.META_DOWN, None, str(e))
        if node is None:
            return self._fallback(table, task, Outcome.NO_NODE, None, "no compaction node is live")
        task_id = uuid.uuid4().hex
        prefix = workspace_prefix(task.table_id, task_id)
        sent = dataclasses.replace(task, output_prefix=prefix)
        started = time.monotonic()
        try:
            outputs = self._remote.compact(node, task_id, sent, self.timeout_s)
            _check_outputs(table.store, prefix, outputs)
        except DeadlineExceeded as e:
            return self._fallback(table, task, Outcome.TIMEOUT, node, str(e), prefix)
        except Unavailable as e:
            return self._fallback(table, task, Outcome.UNAVAILABLE, node, str(e), prefix)
        except (InvalidArgument, NotFound) as e:
            return self._fallback(table, task, Outcome.INVALID, node, str(e), prefix)
        except GnomonError as e:
            return self._fallback(table, task, Outcome.FAILED, node, str(e), prefix)
        self._count(Outcome.OFFLOADED, node)
        log.info(
            "compaction offloaded",
            extra={
                "table": table.name,
                "node": node,
                "task": task_id,
                "inputs": len(task.inputs),
                "outputs": len(outputs),
                "seconds": round(time.monotonic() - started, 3),
            },
        )
        return outputs

    def _fallback(
        self,
        table: Table,
        task: CompactionTask,
        outcome: Outcome,
        node: str | None,
        reason: str,
        workspace: str | None = None,
    ) -> list[SstMeta]:
        log.warning(
            "compaction offload failed; merging locally",
            extra={"table": table.name, "node": node, "outcome": outcome.value, "reason": reason},
        )
        if workspace is not None:
            sweep(table.store, workspace)
        self._count(outcome)
        return run_locally(table, task)


def _check_outputs(store: ObjectStore, prefix: str, outputs: Iterable[SstMeta]) -> None:
    """An answer names files of its workspace that exist with the sizes it gives: anything
    else is not installed (InvalidArgument)."""
    for meta in outputs:
        if not meta.path.startswith(prefix + "/") or ".." in meta.path:
            raise InvalidArgument(f"output {meta.path!r} is outside the workspace {prefix}")
        size = store.head(meta.path).size
        if size != meta.size:
            raise InvalidArgument(f"output {meta.path!r} has {size} bytes, not {meta.size}")


def sweep(store: ObjectStore, workspace: str) -> int:
    """Delete every file under ``workspace`` (best effort: what is left, garbage collection
    removes); the number deleted."""
    deleted = 0
    with suppress(GnomonError, OSError):
        for obj in list(store.list(workspace + "/")):
            with suppress(GnomonError, OSError):
                deleted += store.delete(obj.key)
    return deleted
