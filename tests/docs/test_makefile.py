"""`make run` installs gnomon alone; `make test` (and `make lint`) add the dev extra, also on a
venv `make run` made; the README opens with exactly those two commands. Checked with
``make -n`` (what make would do) on venvs in temporary folders."""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]


def _plan(target: str, venv: Path) -> list[str]:
    done = subprocess.run(
        ["make", "-n", "-C", str(ROOT), target, f"VENV={venv}"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return [line for line in done.stdout.splitlines() if not line.startswith("make")]


def _installs(plan: list[str]) -> list[str]:
    """What each install line installs: with uv, and with pip alone when uv cannot be had."""
    found = []
    for line in plan:
        if "uv pip install" not in line:
            continue
        with_uv = re.search(r"uv pip install --quiet --python \S+ (.+?) \|\|", line)
        assert with_uv, line
        assert line.endswith(f"pip install --quiet {with_uv[1]}"), line
        found.append(with_uv[1])
    return found


def test_make_run_installs_the_package_alone(tmp_path: Path) -> None:
    plan = _plan("run", tmp_path / "venv")
    assert _installs(plan) == ["-e ."]
    assert plan[-1].endswith("gnomon standalone --demo")


@pytest.mark.parametrize("target", ["test", "lint"])
def test_on_a_fresh_machine_test_installs_the_dev_extra(tmp_path: Path, target: str) -> None:
    assert _installs(_plan(target, tmp_path / "venv")) == ["-e .", "-e '.[dev]'"]


def test_make_test_after_make_run_adds_the_dev_extra_once(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    venv.mkdir()
    run_stamp = venv / ".installed-stamp"
    run_stamp.touch()  # what `make run` leaves
    assert _installs(_plan("run", venv)) == []
    assert _installs(_plan("test", venv)) == ["-e '.[dev]'"]
    dev_stamp = venv / ".installed-dev-stamp"
    dev_stamp.touch()
    later = time.time() + 10
    os.utime(dev_stamp, (later, later))
    assert _installs(_plan("test", venv)) == []


def test_the_readme_opens_with_the_two_commands() -> None:
    text = (ROOT / "README.md").read_text()
    first = text.split("```", 2)[1]
    commands = [line.split("#")[0].strip() for line in first.strip().splitlines()]
    assert commands == ["make run", "make test"]
