"""How long the ``gnomon`` command takes to answer, as a person types it: ``gnomon --help``
and ``gnomon admin shards`` against a running meta service (etcd and one ``gnomon meta`` on
loopback, started here), each run as a new process, beside the floor of starting the same
interpreter with nothing to do (``python -c pass``).

Several source trees can be measured side by side (before and after a change), each command
run in turn for each tree so a busy moment of the machine hits all of them::

    python -m bench.cli_startup --runs 9
    python -m bench.cli_startup --tree before=/path/to/old/checkout --tree after=.

Prints the median wall and CPU (user + system) seconds of each command per tree, then one
JSON line with every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from bench.common import add_tree_option, median, source_trees
from gnomon_app.devcluster.etcd import EtcdServer
from gnomon_app.devcluster.procs import Server

REPO = Path(__file__).resolve().parents[1]
#: The console script the package installs; with PYTHONPATH set to a tree it imports that
#: tree's gnomon.
GNOMON = str(Path(sys.executable).parent / "gnomon")


def _run(argv: Sequence[str], tree: Path) -> tuple[float, float]:
    """Wall and CPU seconds of one run of ``argv`` with ``tree``'s gnomon, which must
    succeed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(
        list(argv),
        env={**os.environ, "PYTHONPATH": str(tree)},
        cwd=tree,
        capture_output=True,
        text=True,
        timeout=60,
    )
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed:\n{done.stdout}\n{done.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def measure(
    trees: Sequence[tuple[str, Path]], meta: str, runs: int
) -> dict[str, dict[str, dict[str, float]]]:
    """Median wall and CPU seconds by tree and command."""
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "gnomon --help": [GNOMON, "--help"],
        "gnomon admin shards": [GNOMON, "admin", "shards", "--meta", meta],
    }
    samples: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for r in range(runs):
        # The order reversed every round, so no tree always runs after the same one.
        order = trees if r % 2 == 0 else list(reversed(trees))
        for name, tree in order:
            for command, argv in commands.items():
                samples.setdefault((name, command), []).append(_run(argv, tree))
    return {
        name: {
            command: {
                "wall_s": round(median([w for w, _ in samples[(name, command)]]), 3),
                "cpu_s": round(median([c for _, c in samples[(name, command)]]), 3),
            }
            for command in commands
        }
        for name, _ in trees
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="Runs of each command per tree.")
    add_tree_option(parser, "whose CLI to time")
    args = parser.parse_args(argv)
    trees = source_trees(parser, args.tree, REPO)
    with tempfile.TemporaryDirectory(prefix="gnomon-cli-startup-") as scratch:
        root = Path(scratch)
        (root / "etcd").mkdir()
        etcd = EtcdServer(root / "etcd")
        etcd.start()
        try:
            meta, ports = Server.start_gnomon(
                [
                    *(sys.executable, "-m", "gnomon_app.cli", "meta", f"--etcd={etcd.endpoint}"),
                    *("--grpc-port=0", "--namespace=/bench-cli", "--shards=8"),
                ],
                log=root / "meta.log",
            )
            try:
                figures = measure(trees, f"127.0.0.1:{ports['grpc']}", args.runs)
            finally:
                meta.stop()
        finally:
            etcd.stop()
    for name, commands in figures.items():
        for command, f in commands.items():
            print(
                f"{name:>10}  {command:<22} median {f['wall_s']:.3f} s wall, "
                f"{f['cpu_s']:.3f} s CPU ({args.runs} runs)"
            )
    print(json.dumps({"runs": args.runs, "load_average": os.getloadavg()[0], **figures}))


if __name__ == "__main__":
    main()
