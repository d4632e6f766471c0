"""Regenerate the Python modules of gnomon's .proto files: ``python -m gnomon.proto.generate``.

The .proto files import each other by their path from the repository root
(``gnomon/proto/common.proto``), so the generated modules import each other as
``gnomon.proto.<name>_pb2`` and work as a package without rewriting.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from grpc_tools import protoc  # type: ignore[import-untyped]

PROTO_DIR = Path(__file__).resolve().parent
REPO_ROOT = PROTO_DIR.parent.parent
PROTOS = (
    "common.proto",
    "storage.proto",
    "meta.proto",
    "compaction.proto",
    "node.proto",
    "prometheus.proto",
)
#: Put on top of every generated module: generated code follows protoc's style, not ours.
HEADER = "# ruff: noqa\n# mypy: ignore-errors\n# fmt: off\n"


def generate() -> None:
    include = str(resources.files("grpc_tools") / "_proto")
    for name in PROTOS:
        args = [
            "grpc_tools.protoc",
            f"-I{REPO_ROOT}",
            f"-I{include}",
            f"--python_out={REPO_ROOT}",
            f"--pyi_out={REPO_ROOT}",
            str((PROTO_DIR / name).relative_to(REPO_ROOT)),
        ]
        if protoc.main(args) != 0:
            raise SystemExit(f"protoc failed on {name}")
        stem = name.removesuffix(".proto")
        for suffix in ("_pb2.py", "_pb2.pyi"):
            path = PROTO_DIR / f"{stem}{suffix}"
            path.write_text(HEADER + path.read_text())


if __name__ == "__main__":
    generate()
