"""The README's code blocks, ready to run against a server on other ports: the commands of its
shell blocks (curl and `gnomon sql`) and its Python snippets, with the documented ports and
paths replaced by a test server's."""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
BIN = Path(sys.executable).parent

#: Commands the README shows but a test does not run: installing, the test suite itself and
#: the benchmarks (minutes each, with tests of their own).
_NOT_RUN = re.compile(
    r"^(make |\S*python -m bench\.|PYSPARK_PYTHON=\S+ \S*python -m bench\.|"
    r"\.venv/bin/gnomon bench )"
)


@dataclass(frozen=True)
class Block:
    line: int  # where it starts in the README, for messages
    lang: str
    text: str

    def commands(self) -> list[str]:
        """The commands of a shell block, continuation lines joined, comments and the
        commands not run dropped."""
        joined = re.sub(r"\\\n\s*", "", self.text)
        out = []
        for raw in joined.splitlines():
            cmd = raw.strip()
            if cmd and not cmd.startswith("#") and not _NOT_RUN.match(cmd):
                out.append(cmd)
        return out


def blocks() -> list[Block]:
    text = README.read_text()
    found = []
    for m in re.finditer(r"^```(\w*)\n(.*?)^```", text, flags=re.DOTALL | re.MULTILINE):
        found.append(Block(text.count("\n", 0, m.start()) + 1, m.group(1), m.group(2)))
    return found


@dataclass(frozen=True)
class Ports:
    http: int
    grpc: int
    flight: int

    def apply(self, text: str) -> str:
        """``text`` aimed at these ports and this interpreter instead of the documented ones."""
        text = (
            text.replace("127.0.0.1:5440", f"127.0.0.1:{self.http}")
            .replace("127.0.0.1:8831", f"127.0.0.1:{self.grpc}")
            .replace("127.0.0.1:8832", f"127.0.0.1:{self.flight}")
        )
        # `gnomon sql` without --endpoint talks to the default port: name the test server.
        text = re.sub(
            r"\.venv/bin/gnomon sql(?! --endpoint)",
            f"{BIN}/gnomon sql --endpoint 127.0.0.1:{self.http}",
            text,
        )
        return text.replace(".venv/bin/python", sys.executable)
