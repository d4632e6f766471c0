"""The ``gnomon`` command line."""

from __future__ import annotations

import logging
import os
import time

import click
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table as RichTable

from gnomon import __version__

console = Console()


@click.group()
@click.version_option(__version__, prog_name="gnomon")
@click.option(
    "--log-level",
    default="WARNING",
    show_default=True,
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
)
def main(log_level: str) -> None:
    """gnomon: a distributed time-series and analytics database."""
    logging.basicConfig(
        level=log_level.upper(),
        format='{"ts":"%(asctime)s","level":"%(levelname)s","logger":"%(name)s","msg":"%(message)s"}',
    )


def _demo_batch(hosts: int, start_ms: int, steps: int, rng: np.random.Generator) -> pa.Table:
    n = hosts * steps
    host_idx = pa.array(np.tile(np.arange(hosts), steps), pa.int64())
    ts = start_ms + np.repeat(np.arange(steps), hosts) * 10_000
    return pa.table(
        {
            "hostname": pa.array([f"host_{i}" for i in range(hosts)]).take(host_idx),
            "region": pa.array(["eu-west-1", "us-east-1", "ap-south-1"]).take(
                pa.array(np.tile(np.arange(hosts) % 3, steps), pa.int64())
            ),
            "usage_user": pa.array(rng.uniform(0, 100, n)),
            "usage_system": pa.array(rng.uniform(0, 100, n)),
            "ts": pa.array(ts, pa.timestamp("ms")),
        }
    )


@main.command()
@click.option(
    "--data-dir", default="data/demo", show_default=True, help="Directory of the standalone engine."
)
@click.option("--hosts", default=100, show_default=True, help="Number of series.")
@click.option("--hours", default=24, show_default=True, help="Hours of 10 s readings to load.")
def demo(data_dir: str, hosts: int, hours: int) -> None:
    """Load a small cpu dataset into a standalone engine and query it."""
    from node.engine.engine import Engine
    from node.engine.schema import Column, ColumnType, Schema

    schema = Schema.build(
        [
            Column("hostname", ColumnType.STRING, is_tag=True),
            Column("region", ColumnType.STRING, is_tag=True),
            Column("usage_user", ColumnType.DOUBLE),
            Column("usage_system", ColumnType.DOUBLE),
            Column("ts", ColumnType.TIMESTAMP),
        ],
        timestamp_key="ts",
    )
    rng = np.random.default_rng(42)
    steps_total = hours * 360
    chunk = 360  # one hour of readings per write
    start = int(time.time() * 1000) // 3_600_000 * 3_600_000 - hours * 3_600_000
    with Engine.open(data_dir) as engine:
        engine.drop_table("cpu", if_exists=True)
        engine.create_table("cpu", schema)
        t0 = time.perf_counter()
        with Progress(
            TextColumn("loading cpu"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            console=console,
        ) as progress:
            task = progress.add_task("load", total=steps_total * hosts)
            for s in range(0, steps_total, chunk):
                batch = _demo_batch(hosts, start + s * 10_000, min(chunk, steps_total - s), rng)
                engine.write("cpu", batch)
                progress.advance(task, batch.num_rows)
        engine.flush()
        elapsed = time.perf_counter() - t0
        n = steps_total * hosts
        console.print(
            f"loaded {n:,} rows in {elapsed:.2f}s ({n / elapsed:,.0f} rows/s) "
            f"into {os.path.abspath(data_dir)}"
        )

        last_hour = (start + (hours - 1) * 3_600_000, None)
        t0 = time.perf_counter()
        rows = engine.read_all(
            "cpu",
            columns=["hostname", "usage_user"],
            time_range=last_hour,
            predicate=pc.field("region") == "eu-west-1",
        )
        top = (
            rows.group_by("hostname")
            .aggregate([("usage_user", "max")])
            .sort_by([("usage_user_max", "descending")])
            .slice(0, 5)
        )
        elapsed = time.perf_counter() - t0
        out = RichTable(title="max usage_user in the last hour, region eu-west-1 (top 5)")
        out.add_column("hostname")
        out.add_column("max usage_user", justify="right")
        for h, v in zip(
            top.column("hostname").to_pylist(),
            top.column("usage_user_max").to_pylist(),
            strict=True,
        ):
            out.add_row(h, f"{v:.2f}")
        console.print(out)
        console.print(f"scanned {rows.num_rows:,} matching rows in {elapsed * 1000:.1f} ms")
        console.print(
            "Query it from Python:\n"
            "  from node.engine.engine import Engine\n"
            f"  e = Engine.open({data_dir!r}); e.read_all('cpu', columns=['hostname','usage_user'])"
        )


@main.command()
@click.option(
    "--endpoint",
    default="127.0.0.1:5440",
    show_default=True,
    help="HTTP address (host:port) of a gnomon server.",
)
@click.option("-e", "--execute", "statement", default=None, help="Run one statement and exit.")
def sql(endpoint: str, statement: str | None) -> None:
    """SQL shell against a running gnomon server."""
    from gnomon.errors import GnomonError
    from gnomon.shell import interactive, render, run_sql

    if statement is None:
        interactive(endpoint, console)
        return
    try:
        render(console, run_sql(endpoint, statement))
    except GnomonError as e:
        console.print(f"[red]error:[/red] {e.message}")
        raise SystemExit(1) from None


if __name__ == "__main__":
    main()
