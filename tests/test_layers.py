"""The layers declared in pyproject.toml hold (import-linter), and a forbidden import breaks
them: each contract is tried with an import it forbids, in a copy of the packages."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = str(Path(sys.executable).parent / "lint-imports")
PACKAGES = (
    "gnomon",
    "objectstore",
    "wal_kafka",
    "meta",
    "node",
    "compaction_node",
    "gnomon_app",
    "testkit",
    "bench",
    "tests",
)


def _lint(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [LINT_IMPORTS, "--no-cache", "--config", str(root / "pyproject.toml")],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root), "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_layers_are_kept() -> None:
    lint = _lint(ROOT)
    assert lint.returncode == 0, lint.stdout + lint.stderr


@pytest.fixture(scope="module")
def copy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The packages' Python files and the contracts, copied where a test may add to them."""
    root = tmp_path_factory.mktemp("layers")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.md", "*.so", "static", "out")
    for package in PACKAGES:
        shutil.copytree(ROOT / package, root / package, ignore=ignore)
    shutil.copy(ROOT / "pyproject.toml", root / "pyproject.toml")
    yield root


@pytest.mark.parametrize(
    ("module", "statement", "contract"),
    [
        ("gnomon/probe.py", "import node.engine", "the gnomon base at the bottom"),
        ("objectstore/probe.py", "import wal_kafka", "the gnomon base at the bottom"),
        ("meta/probe.py", "from node.sql import executor", "the gnomon base at the bottom"),
        ("node/probe.py", "import gnomon_app.cli", "the gnomon base at the bottom"),
        ("node/cluster/probe.py", "from meta import state", "through its client alone"),
        ("compaction_node/probe.py", "import meta.wire", "not its wire"),
        ("node/engine/probe.py", "from node.sql import executor", "then the engine"),
        ("node/sql/probe.py", "from node.server import standalone", "then the engine"),
        ("testkit/probe.py", "import tests.conftest", "import neither"),
        ("bench/probe.py", "from tests.server import conftest", "not from the tests"),
        ("tests/sql/probe.py", "import bench.common", "where they test them"),
    ],
)
def test_a_forbidden_import_breaks_its_contract(
    copy: Path, module: str, statement: str, contract: str
) -> None:
    probe = copy / module
    probe.write_text(f"{statement}\n")
    try:
        lint = _lint(copy)
    finally:
        probe.unlink()
    assert lint.returncode != 0, lint.stdout
    broken = [line for line in lint.stdout.splitlines() if " BROKEN" in line]
    assert any(contract in line for line in broken), lint.stdout
