"""Metric metadata (type, help, unit) Prometheus sends with remote writes, kept in the table
``prometheus_metadata``: a row per metric (its name the tag ``metric``) at timestamp 0, so a
newer description replaces the older one (the table's default OVERWRITE mode), and answered
at ``/api/v1/metadata``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gnomon.errors import GnomonError, Status
from gnomon.proto import prometheus_pb2
from node.engine.schema import ColumnType
from node.ingest.rows import TableRows
from node.prom.series import RunSql

TABLE = "prometheus_metadata"
_TYPES = {
    value.number: value.name.lower()
    for value in prometheus_pb2.MetricMetadata.MetricType.DESCRIPTOR.values
}


def rows(metadata: Sequence[prometheus_pb2.MetricMetadata]) -> TableRows | None:
    """The rows of a write's metadata; None if it has none."""
    described = [m for m in metadata if m.metric_family_name]
    if not described:
        return None
    out = TableRows(TABLE)
    out.timestamps.extend([0] * len(described))
    fields = {
        "metric": (True, [m.metric_family_name for m in described]),
        "type": (False, [_TYPES.get(m.type, "unknown") for m in described]),
        "help": (False, [m.help for m in described]),
        "unit": (False, [m.unit for m in described]),
    }
    for name, (is_tag, values) in fields.items():
        out.column(name, is_tag=is_tag, type=ColumnType.STRING).values.extend(values)
    return out


def answer(run: RunSql, metric: str | None, limit: int | None) -> dict[str, list[dict[str, Any]]]:
    """``/api/v1/metadata``'s data: per metric, its description."""
    where = "" if metric is None else " WHERE `metric` = '" + metric.replace("'", "''") + "'"
    try:
        table = run(f"SELECT `metric`, `type`, `help`, `unit` FROM `{TABLE}`{where}").table()
    except GnomonError as e:
        if e.status is Status.NOT_FOUND:
            return {}
        raise
    out: dict[str, list[dict[str, Any]]] = {}
    for row in table.to_pylist():
        if limit is not None and len(out) >= limit:
            break
        out[row["metric"]] = [
            {"type": row["type"] or "unknown", "help": row["help"] or "", "unit": row["unit"] or ""}
        ]
    return out
