"""The data node's side of offloaded compaction on a real engine: where a table's merges run
(table option over node setting), outputs installed from the task's workspace, and every
failure falling back to a local merge with the workspace emptied. The compaction node here is
an in-process one: it runs the task with the local-compaction runner on the engine's store,
as ``gnomon compaction-node`` does on the shared store."""

from __future__ import annotations

import dataclasses
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from gnomon.errors import DeadlineExceeded, GnomonError, Unavailable
from node.backends import open_standalone
from node.engine.compaction.offload import CompactionMode, Offload
from node.engine.compaction.runner import run_task
from node.engine.compaction.task import CompactionTask
from node.engine.engine import Engine
from node.engine.options import TableOptions
from node.engine.sst.meta import SstMeta
from node.engine.sst.reader import SstFiles
from objectstore.api import ObjectStore
from objectstore.local import LocalObjectStore

from .conftest import CPU, cpu_batch, rows

pytestmark = pytest.mark.unit


class InProcessNode:
    """A compaction node in this process: merges the task on ``store``; then, if told to, it
    fails (its outputs left in the workspace, as a node killed mid-answer leaves them) or
    answers with outputs moved out of the workspace."""

    def __init__(self, store: ObjectStore, scratch: str) -> None:
        self.store = store
        self.files = SstFiles(store, os.path.join(scratch, "cache"))
        self.scratch = scratch
        self.fail: GnomonError | None = None
        self.answer_outside = False
        self.tasks: list[tuple[str, str, CompactionTask]] = []

    def compact(
        self, node: str, task_id: str, task: CompactionTask, timeout_s: float
    ) -> list[SstMeta]:
        self.tasks.append((node, task_id, task))
        with tempfile.TemporaryDirectory(dir=self.scratch) as staging:
            outputs = run_task(task, store=self.store, sst_files=self.files, staging_dir=staging)
        if self.fail is not None:
            raise self.fail
        if self.answer_outside:
            return [
                dataclasses.replace(o, path=f"tables/{task.table_id}/elsewhere.parquet")
                for o in outputs
            ]
        return outputs


class Nodes:
    def __init__(self, node: str | None) -> None:
        self.node = node

    def pick_compaction_node(self) -> str | None:
        return self.node


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[tuple[Engine, InProcessNode, Nodes]]:
    data_dir = str(tmp_path / "data")
    store = LocalObjectStore(os.path.join(data_dir, "sst"))
    node = InProcessNode(store, str(tmp_path))
    nodes = Nodes("cn:1")
    offload = Offload(nodes, node, mode=CompactionMode.OFFLOAD, timeout_s=5)
    engine = open_standalone(data_dir, compaction_threads=0, gc_interval_s=0, offload=offload)
    yield engine, node, nodes
    engine.close()


def _load(engine: Engine, options: TableOptions | None = None) -> list[tuple[object, ...]]:
    engine.create_table("cpu", CPU, options or TableOptions())
    for i in range(4):
        engine.write("cpu", cpu_batch(["a", "b"], [i, i + 1], [float(i), float(i)]))
        engine.flush()
    return rows(engine.read_all("cpu"))


def _paths(engine: Engine) -> list[str]:
    return [f.path for f in engine.manifest.current(engine.describe("cpu").table_id).files]


def _workspace(engine: Engine) -> list[str]:
    table_id = engine.describe("cpu").table_id
    return [o.key for o in engine.table("cpu").store.list(f"tables/{table_id}/workspace/")]


def test_outputs_are_installed_from_the_tasks_workspace(
    setup: tuple[Engine, InProcessNode, Nodes],
) -> None:
    engine, node, _ = setup
    before = _load(engine)
    assert engine.compact("cpu") == 3
    ((_, task_id, task),) = node.tasks
    table_id = engine.describe("cpu").table_id
    assert task.output_prefix == f"tables/{table_id}/workspace/{task_id}"
    (path,) = _paths(engine)
    assert path.startswith(task.output_prefix + "/")
    assert rows(engine.read_all("cpu")) == before
    assert engine.offload is not None and engine.offload.outcomes() == {"offloaded": 1}


@pytest.mark.parametrize(
    ("fail", "outcome"),
    [
        (Unavailable("node died"), "fallback_node_unavailable"),
        (DeadlineExceeded("no answer in time"), "fallback_timeout"),
        (GnomonError("merge failed"), "fallback_failed"),
    ],
)
def test_a_failed_offload_merges_locally_and_empties_the_workspace(
    setup: tuple[Engine, InProcessNode, Nodes], fail: GnomonError, outcome: str
) -> None:
    engine, node, _ = setup
    node.fail = fail
    before = _load(engine)
    assert engine.compact("cpu") == 3
    assert len(node.tasks) == 1 and _workspace(engine) == []
    (path,) = _paths(engine)
    assert "/workspace/" not in path
    assert rows(engine.read_all("cpu")) == before
    assert engine.offload is not None and engine.offload.outcomes() == {outcome: 1}


def test_an_answer_naming_files_outside_the_workspace_is_not_installed(
    setup: tuple[Engine, InProcessNode, Nodes],
) -> None:
    engine, node, _ = setup
    node.answer_outside = True
    before = _load(engine)
    engine.compact("cpu")
    assert _workspace(engine) == [] and rows(engine.read_all("cpu")) == before
    assert engine.offload is not None and engine.offload.outcomes() == {"fallback_invalid": 1}


def test_with_no_node_the_merge_is_local(setup: tuple[Engine, InProcessNode, Nodes]) -> None:
    engine, node, nodes = setup
    nodes.node = None
    before = _load(engine)
    engine.compact("cpu")
    assert node.tasks == [] and rows(engine.read_all("cpu")) == before
    assert engine.offload is not None and engine.offload.outcomes() == {"fallback_no_node": 1}


def test_the_table_option_overrides_the_node_setting(
    setup: tuple[Engine, InProcessNode, Nodes],
) -> None:
    engine, node, _ = setup
    _load(engine, TableOptions.from_strings({"compaction_mode": "local"}))
    engine.compact("cpu")
    assert node.tasks == []
    assert engine.offload is not None and engine.offload.outcomes() == {"local": 1}
    with pytest.raises(GnomonError, match="invalid compaction_mode"):
        TableOptions.from_strings({"compaction_mode": "elsewhere"})
