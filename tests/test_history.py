"""Commit messages since the subject rule was adopted pass the repository's commit-msg hook
(one imperative subject line of at most 72 characters, then a blank line and the body)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
HOOK = REPO / ".githooks" / "commit-msg"
#: The last commit before the rule; every commit after it follows it.
ADOPTED_AFTER = "9d8a9de"


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(REPO), *args], capture_output=True, text=True, check=True
    ).stdout


def _since_adoption() -> list[str]:
    try:
        _git("cat-file", "-e", f"{ADOPTED_AFTER}^{{commit}}")
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout holding the history since the rule was adopted")
    return _git("rev-list", "--no-merges", f"{ADOPTED_AFTER}..HEAD").split()


def test_every_commit_since_the_rule_passes_the_hook(tmp_path: Path) -> None:
    refused = []
    for sha in _since_adoption():
        message = tmp_path / "message"
        message.write_text(_git("log", "-1", "--format=%B", sha))
        run = subprocess.run([str(HOOK), str(message)], capture_output=True, text=True)
        if run.returncode:
            refused.append(f"{sha[:9]}: {run.stderr.strip()}")
    assert not refused, "\n".join(refused)


@pytest.mark.parametrize(
    ("message", "ok"),
    [
        ("Add a thing\n\nWhy and the figures.\n", True),
        ("Speed up scans\n", True),
        ("Adds a thing\n", False),
        ("Fixed a thing\n", False),
        ("Add a thing.\n", False),
        ("add a thing\n", False),
        ("Add " + "x" * 69 + "\n", False),
        ("Add a thing\nno blank line\n", False),
        ("", False),
    ],
)
def test_the_hook_refuses_what_the_rule_refuses(tmp_path: Path, message: str, ok: bool) -> None:
    path = tmp_path / "message"
    path.write_text(message)
    assert (subprocess.run([str(HOOK), str(path)], capture_output=True).returncode == 0) is ok
