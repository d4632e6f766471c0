"""The CLI startup benchmark at its smallest (one run of each command), so it keeps working."""

from __future__ import annotations

import json

import pytest

from bench.cli_startup import main

pytestmark = pytest.mark.integration


def test_cli_startup_times_each_command(capsys: pytest.CaptureFixture[str]) -> None:
    main(["--runs", "1"])
    figures = json.loads(capsys.readouterr().out.splitlines()[-1])
    commands = figures["gnomon"]
    assert set(commands) == {"python -c pass", "gnomon --help", "gnomon admin shards"}
    assert all(f["wall_s"] > 0 and f["cpu_s"] > 0 for f in commands.values()), commands
