from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from gnomon.cli import main
from node.engine.engine import Engine


def test_demo_loads_and_queries(tmp_path: Path) -> None:
    data_dir = str(tmp_path / "demo")
    result = CliRunner().invoke(
        main, ["demo", "--data-dir", data_dir, "--hosts", "6", "--hours", "2"]
    )
    assert result.exit_code == 0, result.output
    assert "loaded 4,320 rows" in result.output
    assert "host_" in result.output
    with Engine.open(data_dir) as e:
        assert e.read_all("cpu").num_rows == 6 * 2 * 360


def test_help_lists_commands() -> None:
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0 and "demo" in result.output
