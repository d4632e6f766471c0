"""The compaction benchmark at a tiny size: the engine and the pyarrow limit agree."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bench.compaction import (
    ENGINE_CONFIG,
    build,
    compact_engine,
    compact_limit,
    run,
    table_options,
)
from node.backends import open_standalone

pytestmark = pytest.mark.unit

HOSTS, STEPS, FILES = 20, 200, 4


def test_run_compacts_to_the_same_row_count(tmp_path: Path) -> None:
    src, ours, limit = run(
        str(tmp_path), hosts=HOSTS, steps=STEPS, files=FILES, reps=1, verbose=False
    )
    assert len(src.paths) == FILES
    assert src.rows > src.distinct == HOSTS * STEPS  # some keys were overwritten
    assert len(ours) == len(limit) == 1


def test_engine_and_limit_write_the_same_rows(tmp_path: Path) -> None:
    src = build(str(tmp_path / "input"), hosts=HOSTS, steps=STEPS, files=FILES)
    out = str(tmp_path / "limit.parquet")
    rows = compact_limit([os.path.join(src.root, p) for p in src.paths], out, table_options(STEPS))
    work = str(tmp_path / "work")
    shutil.copytree(src.root, work)
    _, ours, _ = compact_engine(work)
    assert ours == rows == HOSTS * STEPS
    with open_standalone(work, **ENGINE_CONFIG) as engine:
        files = engine.manifest.current(engine.describe("cpu").table_id).files
        got = pa.concat_tables(pq.read_table(engine._sst_files.path(f.path)) for f in files)
    want = pq.read_table(out)
    assert got.replace_schema_metadata().equals(want.replace_schema_metadata())
