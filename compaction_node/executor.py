"""Where a compaction node runs its merges: :class:`LocalExecutor` in threads of its own
process, :class:`~compaction_node.ray_executor.RayExecutor` as Ray tasks. Both run the
runner of local compaction (``node/engine/compaction/runner.py``) unchanged, on the object
store the data nodes share."""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from typing import Protocol

from node.backends import Storage, open_store
from node.engine.compaction.runner import run_task
from node.engine.compaction.task import CompactionTask
from node.engine.sst.meta import SstMeta
from node.engine.sst.reader import SstFiles
from objectstore.api import ObjectStore

#: Inputs downloaded from a remote store are kept at most this many bytes (each is read once;
#: the cache only gives the Parquet reader a local file).
INPUT_CACHE_BYTES = 4 * 1024**3


@dataclass(frozen=True)
class StoreSettings:
    """The object store as the node was told it (the data nodes' ``store`` setting), which a
    Ray worker opens again in its own process."""

    store: str
    s3_endpoint: str | None = None
    s3_region: str | None = None

    def open(self, data_dir: str) -> ObjectStore:
        storage = Storage(store=self.store, s3_endpoint=self.s3_endpoint, s3_region=self.s3_region)
        return open_store(data_dir, storage)


class Executor(Protocol):
    #: "local" or "ray", as the node reports it.
    name: str

    def merge(self, task: CompactionTask) -> list[SstMeta]:
        """Merge the task's inputs into SSTs under its output prefix; their metas. On failure
        no output is left (the runner's contract)."""
        ...

    def discard(self, outputs: list[SstMeta]) -> None:
        """Delete outputs nobody will install."""
        ...

    def close(self) -> None: ...


class LocalExecutor:
    name = "local"

    def __init__(self, store: ObjectStore, data_dir: str) -> None:
        self.store = store
        self._data_dir = os.path.abspath(data_dir)
        self._staging = os.path.join(self._data_dir, "tmp")
        shutil.rmtree(self._staging, ignore_errors=True)
        os.makedirs(self._staging, exist_ok=True)
        self._files = SstFiles(
            store, os.path.join(self._data_dir, "cache"), cache_bytes=INPUT_CACHE_BYTES
        )

    def merge(self, task: CompactionTask) -> list[SstMeta]:
        staging = tempfile.mkdtemp(dir=self._staging)
        try:
            return run_task(task, store=self.store, sst_files=self._files, staging_dir=staging)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
            # The data node deletes the inputs once it installed the outputs: drop their
            # cached copies now rather than when the cache fills.
            for f in task.inputs:
                self._files.forget(f.path)

    def discard(self, outputs: list[SstMeta]) -> None:
        for meta in outputs:
            self.store.delete(meta.path)

    def close(self) -> None:
        shutil.rmtree(self._staging, ignore_errors=True)
