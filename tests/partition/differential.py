"""The SQL differential harness (``tests/sql/test_differential.py``) over a partition table:
the same seeded rows and random SELECTs, asked of a partition table ``t`` and of DuckDB over
the same rows. Shared by the standalone test and the cluster test (three nodes)."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import duckdb
import grpc
import pyarrow as pa

from gnomon.proto import storage_pb2 as pb
from tests.sql import test_differential as diff

FIELDS = ("cpu", "mem", "req")
#: The harness's table, partitioned by host.
PARTITIONS = 3
DDL = f"{diff.DDL} PARTITION BY KEY(host) PARTITIONS {PARTITIONS}"


def rows(rng: random.Random) -> list[diff.Row]:
    """The data set's rows (each key once; no deletions: partition tables take none)."""
    return [
        {"host": h, "region": r, "ts": diff.START_MS + k * diff.STEP_MS, **diff._values(rng)}
        for h, r in diff.SERIES
        for k in range(diff.HOURS * 3_600_000 // diff.STEP_MS)
        if rng.random() < 0.7
    ]


def inserts(data: list[diff.Row], size: int = 400) -> list[str]:
    """``data`` as INSERT statements of ``size`` rows."""
    return [diff._insert_sql(data[i : i + size]) for i in range(0, len(data), size)]


def duck(data: list[diff.Row]) -> Any:
    con = duckdb.connect()
    con.register("final_rows", diff._arrow(data))
    con.execute(
        "CREATE TABLE t AS SELECT host, region, cpu, mem, req, ts::TIMESTAMP AS ts FROM final_rows"
    )
    con.unregister("final_rows")
    return con


def disagreements(
    ask: Callable[[str], pa.Table], con: Any, *, queries: int = diff.N_QUERIES, seed: int = 1
) -> list[str]:
    """The seeded random queries whose answer from ``ask`` differs from DuckDB's."""
    gen = diff.QueryGen(random.Random(diff.SEED + seed))
    failures = []
    for n in range(queries):
        q = gen.query()
        got = diff._rows(ask(q.gnomon))
        want = diff._duck_rows(con, q.duckdb)
        problem = diff.compare(q, got, want)
        if problem is not None:
            text, at = problem
            failures.append(
                f"query {n}: {text}\n  gnomon: {q.gnomon}\n  duckdb: {q.duckdb}\n"
                f"  gnomon rows:\n{diff._show(got, at)}\n  DuckDB rows:\n{diff._show(want, at)}"
            )
    return failures


def grpc_write(endpoint: str, rows: list[diff.Row]) -> tuple[int, str]:
    """``rows`` of ``t`` as one HoraeDB Write, a series entry per row."""
    req = pb.WriteRequest()
    req.context.database = "public"
    t = req.table_requests.add(table="t", tag_names=["host", "region"], field_names=FIELDS)
    for r in rows:
        entry = t.entries.add()
        entry.tags.add(name_index=0, value=pb.Value(string_value=r["host"]))
        entry.tags.add(name_index=1, value=pb.Value(string_value=r["region"]))
        group = entry.field_groups.add(timestamp=r["ts"])
        for i, name in enumerate(FIELDS):
            if r[name] is not None:
                value = (
                    pb.Value(int64_value=r[name])
                    if name == "req"
                    else pb.Value(float64_value=r[name])
                )
                group.fields.add(name_index=i, value=value)
    with grpc.insecure_channel(endpoint) as channel:
        resp = channel.unary_unary(
            "/storage.StorageService/Write",
            request_serializer=pb.WriteRequest.SerializeToString,
            response_deserializer=pb.WriteResponse.FromString,
        )(req, timeout=60)
    return resp.header.code, resp.header.error


def line(r: diff.Row) -> str:
    """``r`` as a line-protocol line of ``t`` (milliseconds; a null field left out)."""
    fields = ",".join(
        f"{n}={r[n]}i" if n == "req" else f"{n}={r[n]!r}" for n in FIELDS if r[n] is not None
    )
    return f"t,host={r['host']},region={r['region']} {fields} {r['ts']}"
