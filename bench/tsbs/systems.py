"""Every system the benchmark runs, in the order of the report's columns."""

from __future__ import annotations

from typing import Any

from bench.tsbs.clickhouse import ChdbKind
from bench.tsbs.duck import DuckNative, DuckParquet
from bench.tsbs.gnomon_server import GnomonKind
from bench.tsbs.influx import InfluxKind
from bench.tsbs.system import Kind
from bench.tsbs.victoria import VictoriaKind

NAMES = ("gnomon", "influxdb", "victoriametrics", "duckdb", "duckdb-parquet", "chdb")


def kinds(
    *, gnomon_decoded_cache_bytes: int | None = None, gnomon_query_api: str = "http"
) -> dict[str, Kind[Any]]:
    """Every system by name (:data:`NAMES`), gnomon's with the run's settings."""
    every: list[Kind[Any]] = [
        GnomonKind(gnomon_decoded_cache_bytes, gnomon_query_api),
        InfluxKind(),
        VictoriaKind(),
        DuckNative(),
        DuckParquet(),
        ChdbKind(),
    ]
    return {k.name: k for k in every}


def available(names: tuple[str, ...] = NAMES) -> tuple[tuple[str, ...], dict[str, str]]:
    """Of ``names``, those that can run here, and why each other cannot."""
    reasons = {n: r for n, k in kinds().items() if n in names and (r := k.unavailable())}
    return tuple(n for n in names if n not in reasons), reasons
