"""Commit messages since the subject rule was adopted pass the repository's commit-msg hook
(one imperative subject line of at most 72 characters, then a blank line and the body)."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import subprocess
from pathlib import Path
from types import ModuleType

import pytest

pytestmark = pytest.mark.unit

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


def _hook() -> ModuleType:
    """The hook's own code, loaded once: its rule judged in this process, not a process per
    commit (the script is run as git runs it by the test below)."""
    loader = importlib.machinery.SourceFileLoader("commit_msg_hook", str(HOOK))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def test_every_commit_since_the_rule_passes_the_hook() -> None:
    shas = set(_since_adoption())
    hook = _hook()
    log = _git("log", "--no-merges", "--format=%H%x00%B%x1e", f"{ADOPTED_AFTER}..HEAD")
    refused = []
    judged = 0
    for entry in log.split("\x1e"):
        sha, _, message = entry.strip("\n").partition("\x00")
        if sha not in shas:
            continue
        judged += 1
        found = hook.problems(message)
        if found:
            refused.append(f"{sha[:9]}: {'; '.join(found)}")
    assert judged == len(shas)
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
