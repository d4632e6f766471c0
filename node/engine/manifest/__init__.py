"""The versioned SST manifest of the table engine (LakeSoul-style commits, versions and
conflict matrix) on the StructuredTable SPI; see README.md beside this file."""

from node.engine.manifest.manifest import COMMIT_ATTEMPTS, Manifest
from node.engine.manifest.model import Commit, CommitOp, CommitResult, Version, VersionInfo
from node.engine.manifest.resolve import MATRIX, Outcome, materialise, plan, resolve

__all__ = [
    "COMMIT_ATTEMPTS",
    "MATRIX",
    "Commit",
    "CommitOp",
    "CommitResult",
    "Manifest",
    "Outcome",
    "Version",
    "VersionInfo",
    "materialise",
    "plan",
    "resolve",
]
