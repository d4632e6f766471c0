"""Merges as Ray tasks (``--executor ray``): a compaction pool that scales on an existing Ray
cluster (``--ray-address``) rather than on processes of our own; without an address a local
Ray is started with one CPU per slot.

Each task ships the compaction task as JSON and the store settings; the Ray worker opens the
store itself (once per worker process) and runs the same runner as local compaction in its own
scratch directory. Workers must be able to import gnomon (same image or environment)."""

from __future__ import annotations

import json
import logging
import os
import tempfile
import threading
from typing import Any

from compaction_node.executor import LocalExecutor, StoreSettings
from gnomon.errors import Unavailable
from node.engine.compaction.task import CompactionTask
from node.engine.sst.meta import SstMeta

log = logging.getLogger("gnomon.compaction_node.ray")

#: One executor per Ray worker process and store, made on its first task.
_WORKER_EXECUTORS: dict[StoreSettings, LocalExecutor] = {}
_WORKER_LOCK = threading.Lock()


def _merge_in_worker(task_json: str, settings: StoreSettings) -> str:
    """What a Ray worker runs: the merge, its outputs' metas as JSON."""
    with _WORKER_LOCK:
        executor = _WORKER_EXECUTORS.get(settings)
        if executor is None:
            scratch = tempfile.mkdtemp(prefix="gnomon-compaction-")
            executor = LocalExecutor(settings.open(scratch), scratch)
            _WORKER_EXECUTORS[settings] = executor
    outputs = executor.merge(CompactionTask.loads(task_json))
    return json.dumps([m.to_json() for m in outputs])


class RayExecutor:
    name = "ray"

    def __init__(
        self,
        settings: StoreSettings,
        data_dir: str,
        *,
        address: str | None = None,
        slots: int = 2,
    ) -> None:
        try:
            import ray
        except ImportError:
            raise Unavailable(
                "the Ray executor needs Ray: pip install 'gnomon[ray]' (or --executor local)"
            ) from None
        self._ray: Any = ray
        self._settings = settings
        # The node deletes discarded outputs itself, through the same store.
        self._local_store = settings.open(os.path.abspath(data_dir))
        if not ray.is_initialized():
            kwargs: dict[str, Any] = {
                "include_dashboard": False,
                "log_to_driver": False,
                "configure_logging": False,
            }
            if address:
                ray.init(address=address, **kwargs)
            else:
                ray.init(num_cpus=slots, **kwargs)
        self._merge = ray.remote(_merge_in_worker).options(max_retries=0)
        log.info("ray executor ready", extra={"address": address or "local", "slots": slots})

    def merge(self, task: CompactionTask) -> list[SstMeta]:
        ref = self._merge.remote(task.dumps(), self._settings)
        try:
            text: str = self._ray.get(ref)
        except self._ray.exceptions.RayTaskError as e:
            # The worker's own exception, as gnomon raised it (a GnomonError keeps its kind).
            raise e.as_instanceof_cause() from None
        except self._ray.exceptions.RayError as e:
            raise Unavailable(f"ray could not run the merge: {e}") from e
        return [SstMeta.from_json(m) for m in json.loads(text)]

    def discard(self, outputs: list[SstMeta]) -> None:
        for meta in outputs:
            self._local_store.delete(meta.path)

    def close(self) -> None:
        self._ray.shutdown()
