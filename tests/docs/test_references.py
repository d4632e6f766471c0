"""References in the repository's own docs and docstrings hold: every file a folder
README's module table names exists, every relative Markdown link leads to a file or folder,
and nothing cites a document the repository does not hold."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
#: A module table's row: its first cell holds the names it is about, in backticks.
_ROW = re.compile(r"^\|\s*(`[^|]*`)[^|]*\|", re.M)
_NAME = re.compile(r"`([\w./-]+(?:\.(?:py|md|proto|toml|yaml|json|txt)|/))`")
_LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
#: Citations of documents kept outside the repository.
_OUTSIDE = re.compile(r"DESIGN §|\.\./shared/")


def _tracked(*patterns: str) -> list[Path]:
    out = subprocess.run(
        ["git", "ls-files", *patterns], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    return [ROOT / line for line in out.splitlines() if (ROOT / line).is_file()]


def _exists(name: str, folder: Path) -> bool:
    """Whether ``name`` is a file or folder beside the document or from the repository's
    root (tables name modules either way)."""
    return any((base / name).exists() for base in (folder, ROOT))


def _table_names(text: str, folder: Path) -> list[tuple[str, Path]]:
    """The names in the first cells of ``text``'s tables, each with the folder it is named
    from: the document's, or the folder a table's header names (``module (`http/`)``)."""
    found: list[tuple[str, Path]] = []
    base = folder
    previous = ""
    for line in text.splitlines():
        if not line.startswith("|"):
            base, previous = folder, line
            continue
        first = line.split("|")[1]
        if set(first.strip()) <= set("-: "):
            # The separator: the row above it was the header.
            named = re.search(r"`([\w./-]+/)`", previous.split("|")[1] if "|" in previous else "")
            base = folder / named.group(1) if named else folder
        elif _ROW.match(line):
            found += [(name, base) for name in _NAME.findall(first)]
        previous = line
    return found


@pytest.mark.parametrize(
    "readme", _tracked("*README.md", "docs/*.md"), ids=lambda p: str(p.relative_to(ROOT))
)
def test_module_tables_and_links_name_what_is_there(readme: Path) -> None:
    text = readme.read_text(encoding="utf-8")
    folder = readme.parent
    missing = [name for name, base in _table_names(text, folder) if not _exists(name, base)]
    missing += [
        link
        for link in _LINK.findall(text)
        if "://" not in link and not link.startswith("mailto:") and not _exists(link, folder)
    ]
    assert not missing, f"{readme.relative_to(ROOT)} names what is not there: {missing}"


def test_nothing_cites_a_document_outside_the_repository() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in _tracked("*.py", "*.md", "*.toml", "*.yml", "*.yaml")
        for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1)
        if _OUTSIDE.search(line) and path != Path(__file__)
    ]
    assert not found, found
