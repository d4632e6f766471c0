"""``gnomon bench tsbs``: the TSBS cpu-only benchmark of gnomon beside InfluxDB,
VictoriaMetrics, DuckDB and ClickHouse (chDB)."""

from __future__ import annotations

import re
import signal
import sys
from pathlib import Path

import click
from rich.console import Console

_UNITS_MS = {"s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_span(text: str) -> int:
    """``24h``, ``90m``, ``2d`` ... as milliseconds."""
    m = re.fullmatch(r"\s*(\d+)\s*([smhd])\s*", text)
    if m is None:
        raise click.BadParameter(f"{text!r}: expected a number and a unit s, m, h or d (24h)")
    return int(m.group(1)) * _UNITS_MS[m.group(2)]


def _systems(text: str | None, console: Console) -> tuple[str, ...]:
    """The systems named, or (none named) every one that can run here."""
    from bench.tsbs.systems import NAMES, available

    if text is None:
        names, reasons = available()
        for name, why in reasons.items():
            console.print(f"[yellow]{name} left out: {why}[/yellow]")
        return names
    names = tuple(s.strip() for s in text.split(",") if s.strip())
    unknown = [s for s in names if s not in NAMES]
    if unknown or not names:
        raise click.BadParameter(f"{text!r}: choose among {', '.join(NAMES)}")
    return names


def _query_api(text: str) -> str:
    from bench.tsbs.gnomon_server import QUERY_APIS

    if text not in QUERY_APIS:
        raise click.BadParameter(f"{text!r}: choose among {', '.join(QUERY_APIS)}")
    return text


@click.command()
@click.option("--hosts", default=100, show_default=True, help="Number of hosts (series).")
@click.option("--span", "span", default="24h", show_default=True, help="Time span of data.")
@click.option("--reps", default=3, show_default=True, help="Repetitions of loads and queries.")
@click.option("--workers", default=2, show_default=True, help="Concurrent load clients.")
@click.option("--batch", default=10_000, show_default=True, help="Rows per write request.")
@click.option("--queries", "queries_per_type", default=2, show_default=True,
              help="Queries (random parameters) per query type.")  # fmt: skip
@click.option("--systems", default=None,
              help="Comma-separated, among gnomon, influxdb, victoriametrics, duckdb, "
              "duckdb-parquet, chdb (default: every one installed or installable "
              "here).")  # fmt: skip
@click.option("--seed", default=1, show_default=True)
@click.option("--json", "json_path", default=None, type=click.Path(dir_okay=False))
@click.option("--png", "png_path", default=None, type=click.Path(dir_okay=False))
@click.option("--scratch", default=None, type=click.Path(file_okay=False),
              help="Where the temporary data directories go (default: the system's).")  # fmt: skip
@click.option("--gnomon-decoded-cache-bytes", type=int, default=None,
              help="gnomon's decoded chunk cache budget; 0 decodes every read "
              "(default: the server's, 512 MiB).")  # fmt: skip
@click.option("--gnomon-query-api", default="http", show_default=True,
              callback=lambda _ctx, _param, text: _query_api(text),
              help="How queries reach gnomon: http (/sql answering Arrow; InfluxDB is queried "
              "over HTTP too) or grpc (the HoraeDB SqlQuery).")  # fmt: skip
def tsbs(
    hosts: int,
    span: str,
    reps: int,
    workers: int,
    batch: int,
    queries_per_type: int,
    systems: str | None,
    seed: int,
    json_path: str | None,
    png_path: str | None,
    scratch: str | None,
    gnomon_decoded_cache_bytes: int | None,
    gnomon_query_api: str,
) -> None:
    """TSBS cpu-only: ingest, size, memory and the 15 query types (back to back and after an
    idle pause) on gnomon, InfluxDB 1.x, DuckDB (its own table and over Parquet) and ClickHouse
    (chDB); VictoriaMetrics for ingest and size. InfluxDB and VictoriaMetrics are installed
    with apt-get when missing. Answers and rows stored cross-checked; exits 1 when any
    differ between systems."""
    from bench.tsbs import report
    from bench.tsbs.runner import Bench, Options
    from bench.tsbs.system import SystemUnavailable

    # The table is wide; a log or pipe gets it unwrapped rather than at 80 columns.
    console = Console(width=None if sys.stdout.isatty() else 160)
    # A SIGTERM must unwind like Ctrl-C, so the servers the run started are stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    opts = Options(
        hosts=hosts, span_ms=parse_span(span), reps=reps, workers=workers, batch=batch,
        queries_per_type=queries_per_type, systems=_systems(systems, console), seed=seed,
        scratch=Path(scratch) if scratch else None,
        gnomon_decoded_cache_bytes=gnomon_decoded_cache_bytes, gnomon_query_api=gnomon_query_api,
    )  # fmt: skip
    try:
        res = Bench(opts, console).run()
    except SystemUnavailable as e:
        raise click.ClickException(f"{e}; leave it out of --systems") from None
    report.print_table(res, console)
    if json_path:
        report.write_json(res, Path(json_path))
    if png_path:
        report.write_png(res, Path(png_path))
    if res.mismatches:
        console.print(f"[red]answers differ for: {', '.join(res.mismatches)}[/red]")
        raise SystemExit(1)
