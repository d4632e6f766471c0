"""A query's planning in process, before any scan or DataFusion, for one or more source
trees side by side in one run (before and after a change to the SQL front end): per TSBS
query type (gnomon's dialect, over the TSBS cpu table),

- ``new_shape_us``: the analysis of a query of a shape not seen before
  (``node.sql.analysis.analyse`` on its tokens: the SELECT's tree, the prescan, the fast
  path, the rewrite passes), paid once per shape;
- ``kept_us``: a query of a kept shape, as every further one is: its shape's analysis found
  and bound to its literals (``Analyses.bound``), the prescan's scan request and the fast
  path bound (:meth:`node.sql.prescan.Shape.bind`, :meth:`node.sql.fastpath.FastPath.bind`);
- ``partition_us``: the same query over the table made a partition table (``PARTITION BY
  KEY(hostname) PARTITIONS 4``), planned as the executor plans every such query before its
  sub-tables answer (``SqlExecutor._pushed_down``: its tokens, tree, prescan, the pushdown
  of :mod:`node.sql.pushdown` and the sub-tables its bounds leave), with the partial
  queries' run left out (``pushdown.run`` answers nothing); a query of a shape that is not
  split costs only the part up to its refusal.

Each tree runs in a child process of its own (``node`` imported from the tree, the queries
and the table handed over from this one), the trees in turn, the order reversed every round;
figures are medians of ``--repeat`` timings.

    python -m bench.sql_planning --tree before=/path/to/old/checkout --tree after=. --rounds 2

Prints one line per round, tree and query type, then one JSON line with every figure.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
START_MS = 1_451_606_400_000  # TSBS's first day
DAY_MS = 86_400_000


def _measure(
    ddl: str, queries: list[tuple[str, str, str]], repeat: int
) -> dict[str, dict[str, float]]:
    """The figures of the tree this process imports ``node`` from, over the table ``ddl``
    makes (and the partition table :data:`PARTITIONED` adds to it) and ``queries`` (name, a
    query, another of its shape)."""
    import pyarrow as pa

    from node.backends import open_standalone

    try:
        from node.sql import pushdown
    except ImportError:  # a tree from before the pushdown moved into the query path
        from node.partition import pushdown  # type: ignore[no-redef]
    from node.sql.analysis import Analyses, analyse
    from node.sql.executor import SqlExecutor
    from node.sql.lexer import tokenize

    # The partial queries are not run: what is timed is the planning before them.
    pushdown.run = lambda *_: pa.table({})
    with tempfile.TemporaryDirectory() as root, tempfile.TemporaryDirectory() as split:
        engine = open_standalone(root, compaction_threads=0, gc_interval_s=0)
        split_engine = open_standalone(split, compaction_threads=0, gc_interval_s=0)
        try:
            ex = SqlExecutor(engine)
            ex.execute(ddl)
            catalog = ex.catalog
            partitioned = SqlExecutor(split_engine)
            partitioned.execute(_partitioned(ddl))
            figures: dict[str, dict[str, float]] = {}
            takes = len(inspect.signature(partitioned._pushed_down).parameters)
            for name, sql, other in queries:
                tokens = tokenize(sql)

                def fresh(sql: str = sql, tokens: Any = tokens) -> None:
                    analyse(tokens, catalog, sql)

                kept = Analyses()
                kept.of(sql, tokens, catalog)

                def bound(kept: Analyses = kept, other: str = other) -> None:
                    found = kept.bound(other, catalog)
                    if found is None:
                        return  # a shape that is never kept (double-quoted strings)
                    analysis, literals = found
                    if analysis.prescan is not None:
                        bounds = analysis.prescan.bind(literals, dictionary_tags=True)
                        if bounds.exact and analysis.fast is not None:
                            analysis.fast.bind(literals)

                def pushed(other: str = other) -> None:
                    # Trees before the kept splits take the query alone.
                    partitioned._pushed_down(other, *([None] * (takes - 1)))

                figures[name] = {
                    "new_shape_us": _median_us(fresh, repeat),
                    "kept_us": _median_us(bound, repeat),
                    "partition_us": _median_us(pushed, repeat),
                }
            return figures
        finally:
            split_engine.close()
            engine.close()


#: How the table of the queries is made a partition table.
PARTITIONED = " PARTITION BY KEY(hostname) PARTITIONS 4"


def _partitioned(ddl: str) -> str:
    """``ddl``, a CREATE TABLE ending with its WITH options, making a partition table."""
    at = ddl.rindex(" WITH (")
    return ddl[:at] + PARTITIONED + ddl[at:]


def _median_us(fn: Any, repeat: int) -> float:
    for _ in range(3):
        fn()  # warm
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        fn()
        times.append(time.perf_counter() - began)
    return round(1e6 * statistics.median(times), 1)


def _child(tree: Path, work: str) -> dict[str, dict[str, float]]:
    """The figures of ``tree``: this file run with ``node`` imported from there (the
    benchmark's own modules stay this tree's, handed over as ``work``)."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run(
        [sys.executable, "-P", __file__, "--child"],  # -P: no bench/ shadowing packages
        cwd=tree,
        env=env,
        input=work,
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    figures: dict[str, dict[str, float]] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def _child_main() -> int:
    """A child's run: the work from stdin, the figures as one JSON line."""
    work = json.loads(sys.stdin.read())
    print(json.dumps(_measure(work["ddl"], work["queries"], work["repeat"])))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    # Imported here: a child imports nothing of bench/ (its tree may hold another version).
    from bench.common import add_tree_option, source_trees
    from bench.tsbs.gnomon_server import cpu_table
    from bench.tsbs.queries import Span, generate

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_tree_option(parser, "to measure")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=200, help="Timings per figure.")
    args = parser.parse_args(argv)
    first, second = (generate(Span(100, START_MS, DAY_MS), seed=s) for s in (1, 2))
    queries = [(a.name, a.gnomon, b.gnomon) for a, b in zip(first, second, strict=True)]
    work = json.dumps({"ddl": cpu_table(), "queries": queries, "repeat": args.repeat})
    trees = source_trees(parser, args.tree, REPO)
    rounds: list[dict[str, Any]] = []
    for r in range(args.rounds):
        order = trees if r % 2 == 0 else list(reversed(trees))
        found = {name: _child(path, work) for name, path in order}
        rounds.append(found)
        for name, _ in trees:
            for query, figures in found[name].items():
                line = "  ".join(f"{k} {v:8.1f}" for k, v in figures.items())
                print(f"round {r + 1}  {name:>8}  {query:<24} {line}")
    print(json.dumps(rounds))
    return 0


if __name__ == "__main__":
    raise SystemExit(_child_main() if sys.argv[1:] == ["--child"] else main())
