"""Writes to a partition table through a standalone server's write paths (gRPC Write, line
protocol, SQL INSERT): every row lands in the sub-table its key hashes to, and a write that
would add a column is refused whole."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest

from gnomon.errors import InvalidArgument
from gnomon.flight.client import FlightClient
from gnomon.proto import storage_pb2 as pb
from node.backends import open_standalone
from node.engine.schema import ColumnType
from node.ingest.rows import TableRows
from node.partition.ingest import split_request, split_rows
from node.partition.rule import KeyRule
from node.sql.executor import SqlExecutor
from tests.partition import differential
from tests.server.conftest import Running

pytestmark = pytest.mark.integration

RULE = KeyRule(("host",), differential.PARTITIONS)


def _partition(host: str) -> int:
    return int(RULE.of({"host": pa.array([host])}, 1)[0])


def test_splits_follow_the_key_rule(tmp_path: Path) -> None:
    with open_standalone(str(tmp_path / "db"), wal_sync="never") as engine:
        sql = SqlExecutor(engine)
        sql.execute(differential.DDL)
        table = sql.partitions.find("t")
        assert table is not None
        rows = TableRows("t")
        hosts = [f"h{i}" for i in range(30)]
        for i, name in enumerate(hosts):
            rows.timestamps.append(i)
            rows.column("host", is_tag=True, type=ColumnType.STRING).put(i, name)
        split = split_rows(table, rows)
        assert sum(s.num_rows for s in split) == len(hosts)
        for part in split:
            for host in part.columns["host"].array(part.num_rows).to_pylist():
                assert part.table == f"__t_{_partition(str(host))}"

        req = pb.WriteRequest()
        t = req.table_requests.add(table="t", tag_names=["host"], field_names=["cpu"])
        for name in hosts:
            entry = t.entries.add()
            entry.tags.add(name_index=0, value=pb.Value(string_value=name))
            entry.field_groups.add(timestamp=1).fields.add(
                name_index=0, value=pb.Value(float64_value=1.0)
            )
        for sub in split_request(req, sql.partitions).table_requests:
            for entry in sub.entries:
                assert sub.table == f"__t_{_partition(entry.tags[0].value.string_value)}"

        t.field_names.append("new_column")
        try:
            split_request(req, sql.partitions)
            raise AssertionError("a write adding a column was split")
        except InvalidArgument as e:
            assert "new_column" in e.message


def test_every_write_path_of_a_server(gnomon: Running) -> None:
    status, body = gnomon.sql(differential.DDL)
    assert status == 200, body
    data = differential.rows(random.Random(3))[:600]
    grpc_rows, line_rows, sql_rows = data[:200], data[200:400], data[400:]
    grpc_rows = [r for r in grpc_rows if any(r[n] is not None for n in differential.FIELDS)]
    line_rows = [r for r in line_rows if any(r[n] is not None for n in differential.FIELDS)]
    code, error = differential.grpc_write(gnomon.grpc_endpoint, grpc_rows)
    assert code == 200, error
    status, _, answer = gnomon.request(
        "POST",
        "/influxdb/v1/write?db=public&precision=ms",
        "\n".join(differential.line(r) for r in line_rows).encode(),
    )
    assert status == 204, answer
    for statement in differential.inserts(sql_rows):
        status, body = gnomon.sql(statement)
        assert status == 200, body
    written = grpc_rows + line_rows + sql_rows

    status, body = gnomon.sql("SELECT host, count(*) AS n FROM t GROUP BY host ORDER BY host")
    assert status == 200, body
    assert {r["host"]: r["n"] for r in body["rows"]} == Counter(r["host"] for r in written)
    for i in range(differential.PARTITIONS):
        status, body = gnomon.sql(f'SELECT DISTINCT host FROM "__t_{i}"')
        assert status == 200, body
        assert {_partition(r["host"]) for r in body["rows"]} <= {i}
    # A Flight query ticket naming one sub-table that reads the rows of all of them (what a
    # node asks of the owner of several).
    subs = [f"__t_{i}" for i in range(differential.PARTITIONS)]
    with FlightClient(f"127.0.0.1:{gnomon.flight_port}") as client:
        counted = client.query('SELECT count(*) AS n FROM "__t_1"', {"__t_1": subs})
        alone = client.query('SELECT count(*) AS n FROM "__t_1"')
    assert counted.column("n").to_pylist() == [len(written)]
    assert alone.column("n").to_pylist() == [sum(_partition(r["host"]) == 1 for r in written)]

    # A column the table lacks: refused whole, nothing written.
    status, _, answer = gnomon.request(
        "POST",
        "/influxdb/v1/write?db=public&precision=ms",
        b"t,host=h1,region=eu cpu=1.0 1\nt,host=h2,region=eu extra=2.0 2",
    )
    assert status == 400 and b"extra" in answer, answer
    status, body = gnomon.sql("SELECT count(*) AS n FROM t")
    assert json.dumps(body["rows"]) == json.dumps([{"n": len(written)}])
