"""InfluxQL (InfluxDB 1.x's query language) answered through gnomon's SQL.

A statement is parsed here and translated into one SQL query over the measurement's table
(its tags are the table's TAG columns, its fields the other columns, ``time`` its timestamp
key); the rows are then cut into InfluxDB's series (one per combination of the GROUP BY
tags), time buckets without rows are filled as ``fill(...)`` asks, and the whole is shaped
as InfluxDB's JSON answer (``{"results": [{"statement_id": 0, "series": [...]}]}``).

Taken: ``SELECT`` of fields, tags, ``*`` and the aggregates count, mean, sum, min, max,
median, stddev, spread, first and last (``last(*)`` too), with ``AS``; ``FROM`` one
measurement; ``WHERE`` comparisons joined by AND/OR, time bounds as durations (``1439828400000ms``),
nanosecond integers, RFC3339 strings or ``now() - 1h``; ``GROUP BY time(d[, offset])``, tags
or ``*``; ``fill(null|none|previous|linear|<number>)``; ``ORDER BY time [ASC|DESC]``;
``LIMIT``/``OFFSET`` (per series, as InfluxDB counts them); ``SHOW MEASUREMENTS``,
``SHOW TAG KEYS`` and ``SHOW FIELD KEYS`` (each ``[FROM m]``). Regular expressions,
subqueries, ``INTO`` and the series functions (derivative, moving_average, ...) are refused.

gnomon's own ``tsid`` column is not an InfluxDB field: ``*`` leaves it out.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from gnomon.errors import GnomonError, InvalidArgument
from node.sql.influxql.query import Series, SqlRunner, run_select, run_show
from node.sql.influxql.syntax import EPOCHS_NS, Select, parse, split_statements

__all__ = ["SqlRunner", "answer"]


def _format_time(ns: int, epoch: str | None) -> int | str:
    if epoch is not None:
        return ns // EPOCHS_NS[epoch]
    seconds, frac = divmod(ns, 1_000_000_000)
    text = datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    if frac:
        text += "." + f"{frac:09d}".rstrip("0")
    return text + "Z"


def _json_value(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, bytes):
        return v.decode(errors="replace")
    return v


def _series_json(series: list[Series], epoch: str | None) -> Iterator[dict[str, Any]]:
    for s in series:
        if s.columns and s.columns[0] == "time":
            s.values = [[_format_time(r[0], epoch), *map(_json_value, r[1:])] for r in s.values]
        yield s.json()


def answer(query: str, run: SqlRunner, *, epoch: str | None = None) -> dict[str, Any]:
    """InfluxDB's JSON answer to ``query`` (one or more statements). A statement that
    fails is answered with its error and the others still run, as InfluxDB does; a query
    that does not parse at all raises InvalidArgument."""
    if epoch is not None and epoch not in EPOCHS_NS:
        raise InvalidArgument(f"epoch {epoch!r} is not one of {', '.join(sorted(EPOCHS_NS))}")
    texts = split_statements(query)
    if not texts:
        raise InvalidArgument("InfluxQL: the query (q=) is empty")
    statements = [parse(t) for t in texts]
    now_ns = time.time_ns()
    results: list[dict[str, Any]] = []
    for i, stmt in enumerate(statements):
        result: dict[str, Any] = {"statement_id": i}
        try:
            series = (
                run_select(stmt, run, now_ns) if isinstance(stmt, Select) else run_show(stmt, run)
            )
        except GnomonError as e:
            result["error"] = e.message
        else:
            if series:
                result["series"] = list(_series_json(series, epoch))
        results.append(result)
    return {"results": results}
