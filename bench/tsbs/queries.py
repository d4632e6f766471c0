"""The TSBS cpu-only query set, rendered for gnomon SQL, DuckDB SQL, ClickHouse SQL and InfluxQL
from the same random parameters, so that every system answers the same question.

The ClickHouse forms are TSBS's own (``toStartOfHour``, host filters as ``OR`` chains, time
bounds as UTC strings, ``PREWHERE`` for high-cpu), with the harness's buckets, columns and
orders, and lastpoint as ``argMax`` (TSBS's ``SELECT DISTINCT(hostname), *`` answers every
distinct row, not the last one per host)."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from bench.tsbs.cpu_only import FIELDS, INTERVAL_MS

if TYPE_CHECKING:
    from bench.tsbs.system import Dialect

HOUR = 3_600_000
MINUTE = 60_000


@dataclass(frozen=True)
class Query:
    name: str
    gnomon: str
    duckdb: str
    clickhouse: str
    influxql: str

    def text(self, dialect: Dialect) -> str:
        """The query in ``dialect``."""
        return {
            "gnomon": self.gnomon,
            "duckdb": self.duckdb,
            "clickhouse": self.clickhouse,
            "influxql": self.influxql,
        }[dialect]


@dataclass(frozen=True)
class Span:
    """The data the queries run over: ``hosts`` hosts from ``start_ms`` for ``duration_ms``."""

    hosts: int
    start_ms: int
    duration_ms: int


def _hosts(rng: random.Random, span: Span, n: int) -> list[str]:
    # Spans of fewer hosts than a query names (tiny test runs) use them all.
    return [f"host_{i}" for i in rng.sample(range(span.hosts), min(n, span.hosts))]


def _window(rng: random.Random, span: Span, length_ms: int) -> tuple[int, int]:
    latest = span.start_ms + max(0, span.duration_ms - length_ms)
    slots = (latest - span.start_ms) // INTERVAL_MS
    start = span.start_ms + rng.randint(0, max(0, slots)) * INTERVAL_MS
    return start, start + length_ms


def _in(col: str, values: Sequence[str]) -> str:
    return f"{col} IN ({', '.join(repr(v) for v in values)})"


def _or_hosts(hosts: Sequence[str]) -> str:
    return "(" + " OR ".join(f"hostname = '{h}'" for h in hosts) + ")"


def _ts_sql(ms: int) -> str:
    return f"to_timestamp_millis({ms})"


def _ts_duck(ms: int) -> str:
    return f"epoch_ms({ms})"


def _ts_clickhouse(ms: int) -> str:
    return "'" + datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S") + "'"


def single_groupby(metrics: int, hosts: int, hours: int) -> Callable[[random.Random, Span], Query]:
    def make(rng: random.Random, span: Span) -> Query:
        hs = _hosts(rng, span, hosts)
        lo, hi = _window(rng, span, hours * HOUR)
        cols = FIELDS[:metrics]
        name = f"single-groupby-{metrics}-{hosts}-{hours}"
        sel = ", ".join(f"max({c}) AS max_{c}" for c in cols)

        def sql(ts: Callable[[int], str], bucket: str, hosts: str) -> str:
            return (
                f"SELECT {bucket} AS minute, {sel} FROM cpu WHERE {hosts} "
                f"AND timestamp >= {ts(lo)} AND timestamp < {ts(hi)} GROUP BY minute "
                "ORDER BY minute"
            )

        return Query(
            name,
            sql(_ts_sql, "date_bin(interval '5 minutes', timestamp)", _in("hostname", hs)),
            sql(_ts_duck, "time_bucket(interval '5 minutes', timestamp)", _in("hostname", hs)),
            sql(_ts_clickhouse, "toStartOfFiveMinutes(timestamp)", _or_hosts(hs)),
            f"SELECT {', '.join(f'max({c})' for c in cols)} FROM cpu WHERE "
            f"{_or_hosts(hs)} AND time >= {lo}ms AND time < {hi}ms GROUP BY time(5m)",
        )

    return make


def cpu_max_all(hosts: int) -> Callable[[random.Random, Span], Query]:
    def make(rng: random.Random, span: Span) -> Query:
        hs = _hosts(rng, span, hosts)
        lo, hi = _window(rng, span, 8 * HOUR)
        sel = ", ".join(f"max({c}) AS max_{c}" for c in FIELDS)

        def sql(ts: Callable[[int], str], bucket: str, hosts: str) -> str:
            return (
                f"SELECT {bucket} AS hour, {sel} FROM cpu WHERE {hosts} "
                f"AND timestamp >= {ts(lo)} AND timestamp < {ts(hi)} GROUP BY hour ORDER BY hour"
            )

        return Query(
            f"cpu-max-all-{hosts}",
            sql(_ts_sql, "date_bin(interval '1 hour', timestamp)", _in("hostname", hs)),
            sql(_ts_duck, "time_bucket(interval '1 hour', timestamp)", _in("hostname", hs)),
            sql(_ts_clickhouse, "toStartOfHour(timestamp)", _or_hosts(hs)),
            f"SELECT {', '.join(f'max({c})' for c in FIELDS)} FROM cpu WHERE "
            f"{_or_hosts(hs)} AND time >= {lo}ms AND time < {hi}ms GROUP BY time(1h)",
        )

    return make


def double_groupby(metrics: int | None) -> Callable[[random.Random, Span], Query]:
    def make(rng: random.Random, span: Span) -> Query:
        lo, hi = _window(rng, span, 12 * HOUR)
        cols = FIELDS if metrics is None else FIELDS[:metrics]
        sel = ", ".join(f"avg({c}) AS mean_{c}" for c in cols)

        def sql(ts: Callable[[int], str], bucket: str) -> str:
            return (
                f"SELECT {bucket} AS hour, hostname, {sel} FROM cpu WHERE timestamp >= {ts(lo)} "
                f"AND timestamp < {ts(hi)} GROUP BY hour, hostname ORDER BY hour, hostname"
            )

        return Query(
            f"double-groupby-{'all' if metrics is None else metrics}",
            sql(_ts_sql, "date_bin(interval '1 hour', timestamp)"),
            sql(_ts_duck, "time_bucket(interval '1 hour', timestamp)"),
            sql(_ts_clickhouse, "toStartOfHour(timestamp)"),
            f"SELECT {', '.join(f'mean({c})' for c in cols)} FROM cpu WHERE time >= {lo}ms "
            f"AND time < {hi}ms GROUP BY time(1h), hostname",
        )

    return make


def high_cpu(hosts: int | None) -> Callable[[random.Random, Span], Query]:
    def make(rng: random.Random, span: Span) -> Query:
        lo, hi = _window(rng, span, 12 * HOUR)
        hs = _hosts(rng, span, hosts) if hosts else []
        host_sql = f"{_in('hostname', hs)} AND " if hs else ""
        host_or = f"{_or_hosts(hs)} AND " if hs else ""
        cols = ", ".join(FIELDS)

        def sql(ts: Callable[[int], str], where: str = "WHERE", hosts: str = host_sql) -> str:
            return (
                f"SELECT hostname, timestamp, {cols} FROM cpu {where} {hosts}usage_user > 90.0 "
                f"AND timestamp >= {ts(lo)} AND timestamp < {ts(hi)} ORDER BY hostname, timestamp"
            )

        return Query(
            f"high-cpu-{'all' if hosts is None else hosts}",
            sql(_ts_sql),
            sql(_ts_duck),
            sql(_ts_clickhouse, "PREWHERE", host_or),
            f"SELECT * FROM cpu WHERE {host_or}usage_user > 90.0 AND time >= {lo}ms "
            f"AND time < {hi}ms",
        )

    return make


def lastpoint(rng: random.Random, span: Span) -> Query:
    sql = (
        "SELECT c.hostname, c.timestamp, c.usage_user FROM cpu c JOIN "
        "(SELECT hostname, max(timestamp) AS last FROM cpu GROUP BY hostname) l "
        "ON c.hostname = l.hostname AND c.timestamp = l.last ORDER BY c.hostname"
    )
    clickhouse = (
        "SELECT hostname, max(timestamp) AS last, argMax(usage_user, timestamp) AS usage_user "
        "FROM cpu GROUP BY hostname ORDER BY hostname"
    )
    return Query("lastpoint", sql, sql, clickhouse, "SELECT last(*) FROM cpu GROUP BY hostname")


def groupby_orderby_limit(rng: random.Random, span: Span) -> Query:
    _, end = _window(rng, span, HOUR)

    def sql(ts: Callable[[int], str], bucket: str) -> str:
        return (
            f"SELECT {bucket} AS minute, max(usage_user) AS max_usage_user FROM cpu "
            f"WHERE timestamp < {ts(end)} GROUP BY minute ORDER BY minute DESC LIMIT 5"
        )

    return Query(
        "groupby-orderby-limit",
        sql(_ts_sql, "date_bin(interval '1 minute', timestamp)"),
        sql(_ts_duck, "time_bucket(interval '1 minute', timestamp)"),
        sql(_ts_clickhouse, "toStartOfMinute(timestamp)"),
        f"SELECT max(usage_user) FROM cpu WHERE time < {end}ms GROUP BY time(1m) "
        "ORDER BY time DESC LIMIT 5",
    )


#: The TSBS cpu-only query types, by their TSBS names.
QUERY_TYPES: dict[str, Callable[[random.Random, Span], Query]] = {
    "single-groupby-1-1-1": single_groupby(1, 1, 1),
    "single-groupby-1-1-12": single_groupby(1, 1, 12),
    "single-groupby-1-8-1": single_groupby(1, 8, 1),
    "single-groupby-5-1-1": single_groupby(5, 1, 1),
    "single-groupby-5-1-12": single_groupby(5, 1, 12),
    "single-groupby-5-8-1": single_groupby(5, 8, 1),
    "cpu-max-all-1": cpu_max_all(1),
    "cpu-max-all-8": cpu_max_all(8),
    "double-groupby-1": double_groupby(1),
    "double-groupby-5": double_groupby(5),
    "double-groupby-all": double_groupby(None),
    "high-cpu-1": high_cpu(1),
    "high-cpu-all": high_cpu(None),
    "lastpoint": lastpoint,
    "groupby-orderby-limit": groupby_orderby_limit,
}


def generate(span: Span, *, seed: int = 1, per_type: int = 1) -> list[Query]:
    """``per_type`` queries of every type, deterministic by ``seed``."""
    rng = random.Random(seed)
    return [make(rng, span) for _ in range(per_type) for make in QUERY_TYPES.values()]
