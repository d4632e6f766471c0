"""The `gnomon` command starts without the heavy libraries: Arrow, pandas, DataFusion and gRPC
are imported by the commands that use them, not by `import gnomon_app.cli` nor by listing the
commands (`gnomon --help`). How long a start takes is measured by `bench/cli_startup.py`."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from gnomon_app.cli import main

pytestmark = pytest.mark.integration

HEAVY = ("pandas", "pyarrow", "numpy", "datafusion", "grpc", "google.protobuf")


def _imported_after(code: str) -> list[str]:
    """The heavy modules a fresh interpreter holds after running ``code``."""
    shown = f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    probe = f"{code}\nimport json, sys\n{shown}"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    found: list[str] = json.loads(done.stdout.splitlines()[-1])
    return found


def test_importing_the_cli_imports_no_heavy_library() -> None:
    assert _imported_after("import gnomon_app.cli") == []


@pytest.mark.parametrize("args", [["--help"], ["admin", "shards", "--help"], ["sql", "--help"]])
def test_help_imports_no_heavy_library(args: list[str]) -> None:
    code = f"from gnomon_app.cli import main\nmain({args!r}, standalone_mode=False)"
    assert _imported_after(code) == []


def test_commands_imported_late_are_listed_and_run() -> None:
    listed = CliRunner().invoke(main, ["admin", "--help"])
    assert listed.exit_code == 0, listed.output
    for name in ("users", "grants", "tokens", "shards", "nodes"):
        assert f"  {name} " in listed.output, listed.output
    users = CliRunner().invoke(main, ["admin", "users", "--help"])
    assert users.exit_code == 0 and "create" in users.output, users.output
    bench = CliRunner().invoke(main, ["bench", "--help"])
    assert bench.exit_code == 0 and "tsbs" in bench.output, bench.output


def test_a_server_process_keeps_pandas_out() -> None:
    code = (
        "from gnomon_app.without_pandas import keep_pandas_out\n"
        "keep_pandas_out()\n"
        "import pyarrow as pa\n"
        "pa.table({'a': [1, 2]})\n"
        "import node.server.standalone\n"
        "try:\n"
        "    import pandas\n"
        "except ModuleNotFoundError:\n"
        "    print('refused')"
    )
    assert "pandas" not in _imported_after(code)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "refused", done.stderr
