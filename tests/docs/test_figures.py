"""Measured figures live in docs/benchmarks.md and the benchmarks' own READMEs, beside the
command that measures them; a folder README says what its code does and why, and goes stale
the day a figure in it is measured again."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
_UNIT = r"(?:ns|us|µs|ms|s|MB/s|rows/s)"
#: The shapes a measured figure takes: a before and after, a speed-up, a rate, a latency
#: percentile, CPU spent.
FIGURE = re.compile(
    rf"\d[\d.,]*\s?(?:{_UNIT}\s?)?(?:->|→)\s?\d[\d.,]*\s?{_UNIT}"
    r"|\d[\d.]*\s?[x\u00d7] (?:faster|slower|cheaper|more|less)"
    r"|\d[\d,.]*\s?(?:rows|requests|queries)/s\b"
    r"|\bp(?:50|90|95|99)\s(?:of\s)?\d"
    rf"|\d[\d.]*(?:-\d[\d.]*)?\s?{_UNIT} of CPU"
)


def _folder_readmes() -> list[Path]:
    out = subprocess.run(
        ["git", "ls-files", "*README.md"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    return [
        ROOT / line
        for line in out.splitlines()
        if not line.startswith(("bench/", "docs/")) and (ROOT / line).is_file()
    ]


def test_no_folder_readme_carries_a_measured_figure() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{n}: {match.group(0)}"
        for path in _folder_readmes()
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        for match in [FIGURE.search(line)]
        if match
    ]
    assert not found, "figures belong in docs/benchmarks.md or bench/*/README.md:\n" + "\n".join(
        found
    )


def test_the_figure_shapes_are_recognised() -> None:
    for figure in (
        "45 -> 15 ms",
        "150 ms -> 35 ms",
        "about 7x faster",
        "329,763 rows/s",
        "p99 445 ms",
        "0.2-0.4 s of CPU",
    ):
        assert FIGURE.search(figure), figure
    for setting in ("timeout 10 s", "default 64 MiB", "port 5433", "load, rows/s, memtable"):
        assert not FIGURE.search(setting), setting
