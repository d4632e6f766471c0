"""The manifest's SPI tables and the encoding of its records as their rows.

Every key starts with (table_id, partition_desc), so one table's manifest is one key prefix in
each table: a drop is three prefix deletes and a history listing is one prefix scan.
"""

from __future__ import annotations

import json
from typing import Any

from gnomon.store.api import Row
from gnomon.store.spec import TableSpec, spec
from node.engine.manifest.model import Commit, CommitOp, Version
from node.engine.sst.meta import SstMeta

COMMITS = spec(
    "manifest_commits",
    [
        ("table_id", "long"),
        ("partition_desc", "string"),
        ("commit_id", "string"),
        ("op", "string"),
        ("files", "string"),
        ("deleted", "string"),
        ("flushed_seq", "long"),
        ("timestamp_ms", "long"),
    ],
    ["table_id", "partition_desc", "commit_id"],
)

VERSIONS = spec(
    "manifest_versions",
    [
        ("table_id", "long"),
        ("partition_desc", "string"),
        ("version", "long"),
        # Which commit made the version: resolving a conflict needs the commits that came in
        # after a base, and a snapshot alone does not say which of its ids is the new one.
        ("commit_id", "string"),
        ("commit_op", "string"),
        ("snapshot", "string"),
        ("timestamp_ms", "long"),
        ("flushed_seq", "long"),
    ],
    ["table_id", "partition_desc", "version"],
)

#: The current version of each table; the compare-and-set of a commit is on this row.
HEADS = spec(
    "manifest_heads",
    [("table_id", "long"), ("partition_desc", "string"), ("version", "long")],
    ["table_id", "partition_desc"],
)

ALL: tuple[TableSpec, ...] = (COMMITS, VERSIONS, HEADS)


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def commit_row(c: Commit, partition_desc: str) -> Row:
    return {
        "table_id": c.table_id,
        "partition_desc": partition_desc,
        "commit_id": c.commit_id,
        "op": c.op.value,
        "files": _dumps([f.to_json() for f in c.files]),
        "deleted": _dumps(list(c.deleted)),
        "flushed_seq": c.flushed_seq,
        "timestamp_ms": c.timestamp_ms,
    }


def commit_from_row(row: Row) -> Commit:
    return Commit(
        commit_id=row["commit_id"],
        table_id=row["table_id"],
        op=CommitOp(row["op"]),
        files=tuple(SstMeta.from_json(f) for f in json.loads(row["files"])),
        deleted=tuple(json.loads(row["deleted"])),
        flushed_seq=row["flushed_seq"],
        timestamp_ms=row["timestamp_ms"],
    )


def version_row(v: Version, partition_desc: str) -> Row:
    return {
        "table_id": v.table_id,
        "partition_desc": partition_desc,
        "version": v.version,
        "commit_id": v.commit_id,
        "commit_op": None if v.commit_op is None else v.commit_op.value,
        "snapshot": _dumps(list(v.snapshot)),
        "timestamp_ms": v.timestamp_ms,
        "flushed_seq": v.flushed_seq,
    }


def version_from_row(row: Row, files: tuple[SstMeta, ...]) -> Version:
    """The version of ``row``, with its files resolved by the caller from the snapshot."""
    return Version(
        table_id=row["table_id"],
        version=row["version"],
        commit_op=None if row["commit_op"] is None else CommitOp(row["commit_op"]),
        timestamp_ms=row["timestamp_ms"],
        snapshot=snapshot_of(row),
        flushed_seq=row["flushed_seq"],
        files=files,
        commit_id=row["commit_id"],
    )


def snapshot_of(row: Row) -> tuple[str, ...]:
    return tuple(json.loads(row["snapshot"]))
