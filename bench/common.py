"""Helpers shared by the benchmarks: timing and report printing."""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from rich.console import Console
from rich.table import Table


def timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def report(
    title: str,
    rows: list[tuple[str, float, float, float]],
    *,
    unit: str = "rows/s",
    names: tuple[str, str] = ("gnomon", "limit"),
) -> None:
    """rows: (case, gnomon throughput, limit throughput, ratio); ``names`` head the two
    throughput columns."""
    t = Table(title=title)
    for col in ("case", f"{names[0]} {unit}", f"{names[1]} {unit}", "ratio"):
        t.add_column(col, justify="right" if col != "case" else "left")
    for case, ours, limit, ratio in rows:
        t.add_row(case, f"{ours:,.0f}", f"{limit:,.0f}", f"{ratio:.2f}")
    Console().print(t)


def median(xs: list[float]) -> float:
    return statistics.median(xs)


def standalone_argv(
    data_dir: Path | str,
    *,
    http_port: int = 0,
    grpc_port: int = 0,
    flight_port: int = 0,
    wal_sync: str = "always",
    extra: Sequence[str] = (),
) -> list[str]:
    """The command of a ``gnomon standalone`` a benchmark measures: its data in ``data_dir``,
    the given loopback ports (0: any free one, which it reports: see
    ``Server.start_gnomon``), no PostgreSQL server unless ``extra`` asks for one (its fixed
    default port would keep a second server, or the next one while the last stops, from
    starting), warnings only in its log."""
    return [
        *(sys.executable, "-m", "gnomon_app.cli", "--log-level", "warning", "standalone"),
        *("--data-dir", str(data_dir), "--wal-sync", wal_sync),
        *("--http-port", str(http_port), "--grpc-port", str(grpc_port)),
        *("--flight-port", str(flight_port), "--pg-port", "0"),
        *extra,
    ]


def add_tree_option(parser: argparse.ArgumentParser, what: str) -> None:
    """``--tree NAME=PATH``, repeatable: source trees measured side by side (before and
    after a change); read them with :func:`source_trees`."""
    parser.add_argument(
        "--tree",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help=f"A source tree {what} (repeatable); default this one.",
    )


def source_trees(
    parser: argparse.ArgumentParser, values: list[str], repo: Path
) -> list[tuple[str, Path]]:
    """The trees ``--tree`` named (``values``), or ``repo`` as ``gnomon``."""
    trees = [t.split("=", 1) for t in values] or [["gnomon", str(repo)]]
    if any(len(t) != 2 for t in trees):
        parser.error("--tree takes NAME=PATH")
    return [(name, Path(path).resolve()) for name, path in trees]
