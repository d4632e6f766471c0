"""Partition tables over a cluster: the TSBS cpu-only queries on a 4-partition ``cpu`` table
(``PARTITION BY KEY(hostname) PARTITIONS 4``) whose sub-tables the meta service spreads over
three nodes, beside the same rows in one plain table on one node (``cpu_one``).

Both tables are written the same line-protocol bodies through one node. Each query (every
TSBS type, ``per_type`` seeded instances) is asked of the partition table through a node
(which splits it over the sub-tables' owners and merges) and of the plain table through the
node serving it (no hop), alternating which goes first; its time is the median of
``repeats`` runs, measured at the client over HTTP ``/sql?format=arrow``. Every answer pair is
compared (``bench/tsbs/check.py``, floats within 1e-6 relative) and a query whose answers
differ fails the run. ``ratio`` = partition table / plain table, per query type (the median
over its instances).

    python -m bench.partitions --hosts 40 --hours 12

:func:`run_partitions` runs on a cluster the caller started (``bench/cluster.py``).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from bench.tsbs.check import diff, normalise_sql
from bench.tsbs.cpu_only import FIELDS, INTERVAL_MS, TAGS, cpu_only_batches
from bench.tsbs.gnomon_server import TABLE_OPTIONS
from bench.tsbs.payloads import line_protocol
from bench.tsbs.queries import HOUR, Span, generate
from bench.tsbs.serving import HttpClient
from gnomon_app.devcluster.cluster import DevCluster
from meta.client import MetaClient
from node.server.http import ARROW_STREAM

PARTITIONED = "cpu"
PLAIN = "cpu_one"
PARTITIONS = 4
START_MS = 1_451_606_400_000  # 2016-01-01, as TSBS


@dataclass(frozen=True)
class Settings:
    hosts: int = 40
    hours: int = 12
    #: Instances of each query type.
    per_type: int = 3
    #: Runs of each instance on each table; the median counts.
    repeats: int = 3
    seed: int = 1


@dataclass(frozen=True)
class QueryTimes:
    query: str
    partitioned_ms: float
    plain_ms: float

    @property
    def ratio(self) -> float:
        return self.partitioned_ms / self.plain_ms


def _ddl(table: str, partition: str = "") -> str:
    columns = ["timestamp timestamp NOT NULL"] + [
        f"{name} {'string TAG' if name in TAGS else 'double'}" for name in sorted(TAGS + FIELDS)
    ]
    options = ", ".join(f"{k}='{v}'" for k, v in TABLE_OPTIONS.items())
    return (
        f"CREATE TABLE {table} ({', '.join(columns)}, TIMESTAMP KEY(timestamp)){partition} "
        f"WITH ({options})"
    )


def _client(endpoint: str) -> HttpClient:
    return HttpClient(int(endpoint.rsplit(":", 1)[1]))


def _sql(client: HttpClient, sql: str) -> pa.Table:
    body, content_type = client.post_typed("/sql?format=arrow", json.dumps({"query": sql}).encode())
    if not content_type.startswith(ARROW_STREAM):
        return pa.table({})
    return pa.ipc.open_stream(body).read_all()


def _retried(client: HttpClient, sql: str, tries: int = 30) -> pa.Table:
    """``sql`` asked again while the shards it needs are moving (a young cluster)."""
    for attempt in range(tries):
        try:
            return _sql(client, sql)
        except RuntimeError as e:
            if "-> 503" not in str(e) or attempt == tries - 1:
                raise
            time.sleep(1)
    raise AssertionError("unreachable")


def _timed(client: HttpClient, sql: str) -> tuple[float, pa.Table]:
    start = time.perf_counter()
    answer = _sql(client, sql)
    return (time.perf_counter() - start) * 1000, answer


def load(cluster: DevCluster, s: Settings) -> tuple[int, dict[str, str]]:
    """Both tables made and written; the rows each holds and the HTTP endpoint to ask each
    through (the plain table's owner; a node for the partition table)."""
    nodes = cluster.node_endpoints
    first = _client(nodes[0].http)
    _retried(first, _ddl(PARTITIONED, f" PARTITION BY KEY(hostname) PARTITIONS {PARTITIONS}"))
    _retried(first, _ddl(PLAIN))
    steps = s.hours * HOUR // INTERVAL_MS
    rows = 0
    for batch in cpu_only_batches(s.hosts, steps, start_ms=START_MS, seed=s.seed):
        body = line_protocol(batch)
        for table in (PARTITIONED, PLAIN):
            data = body if table == PARTITIONED else re.sub(rb"(?m)^cpu,", b"cpu_one,", body)
            for attempt in range(30):
                try:
                    first.post("/influxdb/v1/write?db=public&precision=ms", data)
                    break
                except RuntimeError as e:
                    if "-> 503" not in str(e) or attempt == 29:
                        raise
                    time.sleep(1)
        rows += batch.num_rows
    with MetaClient(cluster.meta) as meta:
        routes = {r.table: r for r in meta.route([PARTITIONED, PLAIN])}
    owner = routes[PLAIN].endpoints["http"]
    spread = {p.endpoint for p in routes[PARTITIONED].partitions}
    if len(spread) < 3:
        raise AssertionError(f"the sub-tables are on {len(spread)} nodes, not 3")
    # The partition table asked through a node not serving the plain table, where one exists.
    other = next((n.http for n in nodes if n.http != owner), owner)
    return rows, {PARTITIONED: other, PLAIN: owner}


def run_partitions(cluster: DevCluster, s: Settings) -> dict[str, Any]:
    """The benchmark on ``cluster`` (three data nodes, running); its report as JSON."""
    rows, at = load(cluster, s)
    clients = {t: _client(endpoint) for t, endpoint in at.items()}
    for table, client in clients.items():
        counted = _retried(client, f"SELECT count(*) AS n FROM {table}").column("n")[0].as_py()
        if counted != rows:
            raise AssertionError(f"{table} holds {counted} rows, {rows} were written")
    span = Span(s.hosts, START_MS, s.hours * HOUR)
    by_type: dict[str, list[QueryTimes]] = {}
    for i, q in enumerate(generate(span, seed=s.seed, per_type=s.per_type)):
        plain_sql = re.sub(r"\bcpu\b", PLAIN, q.gnomon)
        texts = {PARTITIONED: q.gnomon, PLAIN: plain_sql}
        # Once each untimed: the answers compared, caches warm.
        answers = {t: _retried(clients[t], texts[t]) for t in texts}
        problem = diff(
            (PLAIN, normalise_sql(answers[PLAIN])),
            (PARTITIONED, normalise_sql(answers[PARTITIONED])),
        )
        if problem is not None:
            raise AssertionError(f"{q.name}: the answers differ:\n{problem}\n{q.gnomon}")
        times: dict[str, list[float]] = {PARTITIONED: [], PLAIN: []}
        order = [PARTITIONED, PLAIN] if i % 2 == 0 else [PLAIN, PARTITIONED]
        for _ in range(s.repeats):
            for t in order:
                times[t].append(_timed(clients[t], texts[t])[0])
        by_type.setdefault(q.name, []).append(
            QueryTimes(
                q.name, statistics.median(times[PARTITIONED]), statistics.median(times[PLAIN])
            )
        )
    queries = {
        name: {
            "partitioned_ms": round(statistics.median(t.partitioned_ms for t in ts), 2),
            "plain_ms": round(statistics.median(t.plain_ms for t in ts), 2),
            "ratio": round(statistics.median(t.ratio for t in ts), 2),
        }
        for name, ts in by_type.items()
    }
    return {
        "bench": "partitions",
        "settings": asdict(s),
        "rows": rows,
        "partitions": PARTITIONS,
        "nodes": len(cluster.node_endpoints),
        "answers_equal": True,
        "queries": queries,
        "ratio_median": round(statistics.median(q["ratio"] for q in queries.values()), 2),
        "ratio_max": max(q["ratio"] for q in queries.values()),
    }


def table(doc: dict[str, Any]) -> str:
    lines = [
        f"{doc['rows']} rows; {doc['partitions']}-partition table over {doc['nodes']} nodes "
        "vs one plain table on one node; answers equal",
        f"{'query':<24} {'partitioned ms':>15} {'plain ms':>10} {'ratio':>7}",
    ]
    for name, q in doc["queries"].items():
        lines.append(
            f"{name:<24} {q['partitioned_ms']:>15.2f} {q['plain_ms']:>10.2f} {q['ratio']:>7.2f}"
        )
    lines.append(f"median ratio {doc['ratio_median']:.2f}, largest {doc['ratio_max']:.2f}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for name, value in asdict(Settings()).items():
        parser.add_argument("--" + name.replace("_", "-"), type=int, default=value)
    parser.add_argument("--scratch", default=None, help="Where the data directories go.")
    args = vars(parser.parse_args(argv))
    scratch_dir = args.pop("scratch")
    s = Settings(**args)
    if min(asdict(s).values()) < 1:
        parser.error("every count must be positive")
    with (
        tempfile.TemporaryDirectory(prefix="bench-partitions-", dir=scratch_dir) as scratch,
        DevCluster(Path(scratch) / "cluster", nodes=3, shards=6) as cluster,
    ):
        doc = run_partitions(cluster, s)
    print(table(doc))
    print(json.dumps(doc, separators=(",", ":")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
