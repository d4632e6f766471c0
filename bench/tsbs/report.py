"""The benchmark's report: one table on the console, JSON, and a chart."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from bench.tsbs.runner import PAUSE_S, SYSTEMS, Results

ANALYTIC = (
    "double-groupby-1", "double-groupby-5", "double-groupby-all", "high-cpu-all",
    "cpu-max-all-8", "groupby-orderby-limit",
)  # fmt: skip


#: The peer the "within 2x of DuckDB" targets were set against: DuckDB over Parquet.
DUCKDB_TARGET = "duckdb-parquet"


def targets(res: Results) -> dict[str, dict[str, Any]]:
    """Each target set for gnomon so far, its measured ratio (after the idle pause, the
    figure the targets were set on) and whether it is met. Ratios are "times faster than"
    for speedups and "times slower than" for limits."""
    out: dict[str, dict[str, Any]] = {}
    ingest = res.ingest_rows_per_s()
    if "gnomon" in ingest and "influxdb" in ingest:
        r = ingest["gnomon"] / ingest["influxdb"]
        out["ingest vs influxdb"] = {"want": ">= 1.0x", "ratio": r, "met": r >= 1.0}
    for q, per in res.query_ms().items():
        g = per.get("gnomon")
        if g is None:
            continue
        i = per.get("influxdb")
        if i is not None and q in ANALYTIC:
            r = i / g
            out[f"{q} vs influxdb"] = {"want": ">= 2x faster", "ratio": r, "met": r >= 2.0}
        if i is not None and (q == "lastpoint" or q.startswith("single-groupby")):
            r = g / i
            out[f"{q} vs influxdb"] = {"want": "<= 1.5x slower", "ratio": r, "met": r <= 1.5}
        d = per.get(DUCKDB_TARGET)
        if d is not None:
            r = g / d
            out[f"{q} vs {DUCKDB_TARGET}"] = {"want": "<= 2x slower", "ratio": r, "met": r <= 2.0}
    return out


def to_json(res: Results) -> dict[str, Any]:
    o = res.options
    return {
        "ingest_rows_per_s": res.ingest_rows_per_s(),
        # Medians after an idle pause (each query's first run after PAUSE_S and quiet) and
        # back to back (the runs right after it).
        "queries": res.query_ms(),
        "queries_warm": res.query_ms(warm=True),
        # Every timed latency, in the order run (instances within a repetition): the spread
        # behind each median on a noisy machine.
        "query_latencies_ms": res.latencies,
        "query_latencies_warm_ms": res.warm_latencies,
        # gnomon's own time per timed query (its request metrics), and its state after them.
        "gnomon_server_ms": res.gnomon_server_ms,
        "gnomon_metrics": res.gnomon_metrics,
        "ingest_rows_per_s_by_loader": {
            k: sorted(v)[len(v) // 2] if v else None for k, v in res.ingest.items()
        },
        "bytes_per_row": {s: b / res.rows for s, b in res.bytes_on_disk.items()},
        "stored_rows": res.stored_rows,
        "gnomon_bytes_per_row_by_part": {p: b / res.rows for p, b in res.gnomon_parts.items()},
        "peak_rss_bytes": res.peak_rss,
        "checked": res.checked,
        "mismatches": res.mismatches,
        "targets": targets(res),
        "config": {
            "hosts": o.hosts,
            "span_ms": o.span_ms,
            "rows": res.rows,
            "reps": o.reps,
            "workers": o.workers,
            "batch": o.batch,
            "queries_per_type": o.queries_per_type,
            "systems": list(o.systems),
            "seed": o.seed,
            "gnomon_decoded_cache_bytes": o.gnomon_decoded_cache_bytes,
        },
    }


def _fmt(x: float | None, spec: str) -> str:
    return "—" if x is None else format(x, spec)


def _systems(res: Results) -> list[str]:
    return [s for s in SYSTEMS if s in res.options.systems]


def print_table(res: Results, console: Console) -> None:
    """One column per system; each query's cell holds its back-to-back and its after-idle
    median. The targets follow in a table of their own."""
    systems = _systems(res)
    o = res.options
    t = Table(
        title=f"TSBS cpu-only, {o.hosts} hosts, {res.rows:,} rows; medians of {o.reps} reps "
        f"x {o.queries_per_type} queries per type; query cells: back to back / after "
        f"{PAUSE_S:g} s idle"
        + (
            ""
            if o.gnomon_decoded_cache_bytes is None
            else f"; gnomon's decoded cache {o.gnomon_decoded_cache_bytes:,} bytes"
        )
    )
    t.add_column("")
    for s in systems:
        t.add_column(s, justify="right")
    blank = [""] * (len(systems) - 1)
    ingest = res.ingest_rows_per_s()
    t.add_row("ingest rows/s", *[_fmt(ingest.get(s), ",.0f") for s in systems])
    by_loader = res.ingest.get("gnomon-line-protocol")
    if by_loader:
        lp = statistics.median(by_loader)
        t.add_row("  gnomon via line protocol", _fmt(lp, ",.0f"), *blank)
    per_row = {s: b / res.rows for s, b in res.bytes_on_disk.items()}
    t.add_row("bytes on disk per row", *[_fmt(per_row.get(s), ".1f") for s in systems])
    for part, b in res.gnomon_parts.items():
        if b:
            t.add_row(f"  gnomon {part}", f"{b / res.rows:.1f}", *blank)
    rss = {s: v / 2**20 for s, v in res.peak_rss.items()}
    t.add_row("peak RSS MiB (server)", *[_fmt(rss.get(s), ",.0f") for s in systems])
    lost = "rows stored" in res.mismatches
    t.add_row(
        "[red]rows stored[/]" if lost else "rows stored",
        *[_fmt(res.stored_rows.get(s), ",d") for s in systems],
    )
    t.add_section()
    idle, warm = res.query_ms(), res.query_ms(warm=True)
    for q in res.latencies:
        if q in res.mismatches:
            t.add_row(f"[red]{q}[/]", *["[red]MISMATCH[/]"] * len(systems))
            continue
        cells = [
            "—" if s not in idle[q] else f"{warm[q][s]:,.1f} / {idle[q][s]:,.1f}" for s in systems
        ]
        t.add_row(f"{q} ms", *cells)
    console.print(t)
    _print_targets(res, console)
    checked = sum(1 for q in res.checked if len(res.checked[q]) > 1)
    compared = sorted({s for per in res.checked.values() for s in per})
    console.print(
        f"answers cross-checked for {checked} of {len(res.latencies)} query types "
        f"({', '.join(compared)}); {len(res.mismatches)} mismatched; rows stored counted "
        f"by every system"
    )


def _print_targets(res: Results, console: Console) -> None:
    """One row per measure, one column per peer: the ratio, what it should be, met or not."""
    goals = targets(res)
    peers = [p for p in ("influxdb", DUCKDB_TARGET) if any(k.endswith(f" vs {p}") for k in goals)]
    if not peers:
        return
    t = Table(title="targets set for gnomon so far (ratios after the idle pause)")
    t.add_column("")
    for p in peers:
        t.add_column(f"gnomon vs {p}", justify="left")
    measures = dict.fromkeys(k.rsplit(" vs ", 1)[0] for k in goals)
    for m in measures:
        cells = []
        for p in peers:
            g = goals.get(f"{m} vs {p}")
            mark = "" if g is None else "[green]ok[/]" if g["met"] else "[red]MISSED[/]"
            cells.append("" if g is None else f"{mark} {g['ratio']:.2f} (want {g['want']})")
        t.add_row(m, *cells)
    console.print(t)


def write_json(res: Results, path: Path) -> None:
    path.write_text(json.dumps(to_json(res), indent=2) + "\n")


def write_png(res: Results, path: Path) -> None:
    """Ingest per system, and each query's after-idle median (bar) with its back-to-back
    median (dot) per system."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    systems = _systems(res)
    idle, warm = res.query_ms(), res.query_ms(warm=True)
    names = list(idle)
    queried = [s for s in systems if any(s in per for per in idle.values())]
    fig, (ax_i, ax_q) = plt.subplots(
        1, 2, figsize=(18, 6), gridspec_kw={"width_ratios": [1, 5]}, layout="constrained"
    )
    ingest = res.ingest_rows_per_s()
    ax_i.bar(
        systems, [ingest.get(s, 0) for s in systems], color=[f"C{k}" for k in range(len(systems))]
    )
    ax_i.set_title("ingest (rows/s, higher is better)")
    ax_i.tick_params(axis="x", rotation=45)
    width = 0.8 / max(1, len(queried))
    for k, s in enumerate(queried):
        color = f"C{systems.index(s)}"
        xs = [i + k * width for i in range(len(names))]
        ax_q.bar(xs, [idle[q].get(s, 0) for q in names], width, label=s, color=color)
        ax_q.plot(xs, [warm[q].get(s, float("nan")) for q in names], "o", color="black", ms=3)
    ax_q.set_xticks([i + width * (len(queried) - 1) / 2 for i in range(len(names))])
    ax_q.set_xticklabels(names, rotation=45, ha="right")
    ax_q.set_yscale("log")
    ax_q.set_ylabel("median latency (ms, log): bars after idle, dots back to back")
    ax_q.set_title(f"TSBS cpu-only queries, {res.options.hosts} hosts, {res.rows:,} rows")
    ax_q.legend()
    fig.savefig(path, dpi=110)
    plt.close(fig)
