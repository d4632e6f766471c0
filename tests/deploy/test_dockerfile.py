"""The Dockerfile, linted by hand (no hadolint, no Docker engine here): pinned base images, an
unprivileged user, no secrets baked in, the whole package and nothing else copied, and a
default command the gnomon CLI accepts."""

from __future__ import annotations

import fnmatch
import json
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

from gnomon.config import StandaloneConfig
from tests.deploy.command_lines import parse_role_line

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Instruction:
    keyword: str
    args: str


def instructions(text: str) -> list[Instruction]:
    """The Dockerfile's instructions, continuation lines joined and comments dropped."""
    found: list[Instruction] = []
    logical = ""
    for line in text.splitlines():
        if line.lstrip().startswith("#") or not line.strip():
            continue
        logical += line.rstrip()
        if logical.endswith("\\"):
            logical = logical[:-1] + " "
            continue
        keyword, _, args = logical.strip().partition(" ")
        found.append(Instruction(keyword.upper(), args.strip()))
        logical = ""
    return found


@pytest.fixture(scope="module")
def dockerfile() -> list[Instruction]:
    return instructions((ROOT / "Dockerfile").read_text())


def final_stage(dockerfile: list[Instruction]) -> list[Instruction]:
    start = max(i for i, ins in enumerate(dockerfile) if ins.keyword == "FROM")
    return dockerfile[start:]


def test_base_images_are_pinned_to_a_release(dockerfile: list[Instruction]) -> None:
    bases = [ins.args.split()[0] for ins in dockerfile if ins.keyword == "FROM"]
    assert bases
    for base in bases:
        # A full version (python:3.11.14-slim-...), never a moving tag.
        assert re.fullmatch(r"python:\d+\.\d+\.\d+-slim(-\w+)?", base), base


def test_it_runs_as_an_unprivileged_user(dockerfile: list[Instruction]) -> None:
    users = [ins.args for ins in final_stage(dockerfile) if ins.keyword == "USER"]
    assert users, "the final stage sets no USER: it would run as root"
    user, _, group = users[-1].partition(":")
    assert user not in ("root", "0") and group not in ("root", "0")


def test_no_secret_is_baked_into_the_image(dockerfile: list[Instruction]) -> None:
    secret = re.compile(r"(SECRET|PASSWORD|PASSWD|TOKEN|CREDENTIAL|ACCESS_KEY|API_KEY)", re.I)
    for ins in dockerfile:
        if ins.keyword in ("ARG", "ENV"):
            names = [part.split("=")[0] for part in ins.args.split()]
            assert not any(secret.search(n) for n in names), ins


def _package_dirs() -> set[str]:
    """The top-level packages pyproject.toml installs (its setuptools include patterns)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = project["tool"]["setuptools"]["packages"]["find"]["include"]
    return {
        p.name
        for p in ROOT.iterdir()
        if (p / "__init__.py").is_file() and any(fnmatch.fnmatch(p.name, pat) for pat in patterns)
    }


def ignored(path: str) -> bool:
    """Whether .dockerignore keeps ``path`` (relative to the root) out of the build context."""
    patterns = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert not any(p.startswith("!") for p in patterns), "exceptions are not checked here"
    parts = Path(path).parts
    # A pattern matches the path or a folder holding it, from the root; **/ at any depth.
    return any(
        fnmatch.fnmatch(parts[i], p[3:])
        if p.startswith("**/")
        else fnmatch.fnmatch("/".join(parts[: i + 1]), p)
        for p in patterns
        for i in range(len(parts))
    )


def test_the_package_is_built_and_only_it_goes_into_the_image(
    dockerfile: list[Instruction],
) -> None:
    for needed in ("pyproject.toml", "README.md", *_package_dirs()):
        assert not ignored(needed), f".dockerignore leaves {needed} out of the build"
    for junk in (".git", ".venv", "data/x", "tests", "bench", "gnomon/__pycache__/cli.pyc"):
        assert ignored(junk), f".dockerignore lets {junk} into the build context"
    copies = [i.args for i in final_stage(dockerfile) if i.keyword == "COPY"]
    # The final stage takes the installed environment of the build stage, nothing else.
    assert copies == ["--from=build /opt/gnomon /opt/gnomon"]


def test_gnomon_is_the_entry_point_and_the_default_command_is_accepted(
    dockerfile: list[Instruction],
) -> None:
    stage = final_stage(dockerfile)
    entrypoint = [json.loads(i.args) for i in stage if i.keyword == "ENTRYPOINT"][-1]
    command = [json.loads(i.args) for i in stage if i.keyword == "CMD"][-1]
    assert entrypoint == ["gnomon"]
    line = parse_role_line(command, files={}, env={})
    assert isinstance(line.config, StandaloneConfig)
    assert (line.config.bind, line.config.data_dir) == ("0.0.0.0", "/var/lib/gnomon")
