"""The Flight endpoint of a standalone server (no Spark): reads with filters and pinned
versions, writes, the revision protocol over actions, error conventions, and a revision
surviving a SIGKILL of the server."""

from __future__ import annotations

import itertools
import json
import signal
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from gnomon.errors import InvalidArgument, NotFound, SchemaMismatch
from gnomon.flight.client import FlightClient
from gnomon.flight.ticket import ScanSpec
from tests.server.conftest import start_standalone

from .conftest import Node

pytestmark = pytest.mark.integration

SCHEMA = pa.schema([("host", pa.string()), ("v", pa.float64()), ("ts", pa.timestamp("ms"))])


def _rows(n: int, host: str = "a", start: int = 0) -> pa.Table:
    return pa.table(
        {
            "host": [host] * n,
            "v": [float(i) for i in range(n)],
            "ts": [start + i * 1000 for i in range(n)],
        },
        schema=SCHEMA,
    )


@pytest.fixture(scope="module")
def cpu(node: Node) -> str:
    node.sql(
        "CREATE TABLE fcpu (host string TAG, v double, ts timestamp NOT NULL, "
        "TIMESTAMP KEY(ts)) WITH (segment_duration='1h')"
    )
    return "fcpu"


def test_put_then_filtered_read_at_a_pinned_version(node: Node, cpu: str) -> None:
    with node.client() as c:
        assert c.put(cpu, _rows(100).to_batches(max_chunksize=7), SCHEMA) == 100
        spec = ScanSpec(cpu, columns=["v"], filters=[("host", "=", "a"), ("v", ">=", 90.0)])
        info = c.plan(spec)
        version = json.loads(info.app_metadata)["version"]
        assert info.schema == pa.schema([pa.field("v", pa.float64())])
        c.put(cpu, _rows(100, host="a", start=10**6).to_batches(), SCHEMA)
        # The planned tickets still read the version they pinned.
        got = pa.Table.from_batches([b for ep in info.endpoints for b in c.read(ep)])
        assert sorted(got.column("v").to_pylist()) == [float(i) for i in range(90, 100)]
        later = c.read_all(ScanSpec(cpu, filters=[("v", "in", [1.0, 2.0]), ("host", "!=", "b")]))
        assert later.num_rows == 4
        older = c.read_all(ScanSpec(cpu, version=version))
        assert older.num_rows == 100
        nulls = c.read_all(ScanSpec(cpu, filters=[("v", "is_null")]))
        assert nulls.num_rows == 0


def test_errors_are_gnomon_errors_and_change_nothing(node: Node, cpu: str) -> None:
    with node.client() as c:
        before = c.read_all(ScanSpec(cpu)).num_rows
        with pytest.raises(NotFound, match="table 'nope' does not exist"):
            c.read_all(ScanSpec("nope"))
        with pytest.raises(InvalidArgument, match="has no column 'zz'"):
            c.read_all(ScanSpec(cpu, columns=["zz"]))
        with pytest.raises(InvalidArgument, match="has no column 'zz'"):
            c.read_all(ScanSpec(cpu, filters=[("zz", "=", 1)]))
        with pytest.raises(InvalidArgument, match="does not fit column 'v'"):
            c.read_all(ScanSpec(cpu, filters=[("v", "=", "x")]))
        with pytest.raises(NotFound, match="table 'nope' does not exist"):
            c.put("nope", _rows(3).to_batches(), SCHEMA)
        bad = pa.table({"host": ["a"], "zz": [1]})
        with pytest.raises(SchemaMismatch, match="no column 'zz'"):
            c.put(cpu, bad.to_batches(), bad.schema)
        with pytest.raises(NotFound, match="revision 999"):
            c.commit(cpu, 999)
        assert c.read_all(ScanSpec(cpu)).num_rows == before


def test_aborted_and_expired_revisions_leave_no_files(node: Node, cpu: str) -> None:
    files = node.table_files(cpu)
    with node.client() as c:
        before = c.read_all(ScanSpec(cpu)).num_rows
        aborted = c.reserve(cpu)
        c.put(cpu, _rows(50, host="x").to_batches(), SCHEMA, revision=aborted)
        expired = c.reserve(cpu, lease_ms=50)
        c.put(cpu, _rows(50, host="y").to_batches(), SCHEMA, revision=expired)
        assert len(node.table_files(cpu) - files) == 2
        c.abort(cpu, aborted)
        time.sleep(0.1)  # past the 50 ms lease: the next reservation sweeps it
        c.abort(cpu, c.reserve(cpu))
        with pytest.raises(NotFound, match="already cancelled"):
            c.commit(cpu, expired)
        assert c.read_all(ScanSpec(cpu)).num_rows == before
    assert node.table_files(cpu) == files


def test_a_put_in_time_order_is_staged_window_by_window_while_it_streams(node: Node) -> None:
    """A staged put smaller than a chunk (a Spark task's share of a sub-table) whose rows
    move past a segment window has that window's rows written while the rest still streams;
    the batch straddling the two windows is split between them, so each window gets one SST,
    as if the put had been written whole at its end."""
    node.sql(
        "CREATE TABLE fstream (host string TAG, v double, ts timestamp NOT NULL, "
        "TIMESTAMP KEY(ts)) WITH (segment_duration='1h', update_mode='append')"
    )
    hour, n, early = 3_600_000, 200_000, 170_000  # early rows (>8 MB) in the first window
    second = 100 * hour
    ts = second - early * 10 + np.arange(n, dtype=np.int64) * 10
    rows = pa.table(
        {
            "host": pa.array(np.full(n, "h" * 40)),
            "v": pa.array(np.arange(n, dtype=np.float64)),
            "ts": pa.array(ts, pa.timestamp("ms")),
        },
        schema=SCHEMA,
    )
    batches = rows.to_batches(max_chunksize=7_000)  # batch 24 straddles the windows
    files = node.table_files("fstream")
    with node.client() as c:
        rev = c.reserve("fstream")
        with c.open_put("fstream", SCHEMA, revision=rev) as put:
            for b in batches[:26]:
                put.write(b)
            deadline = time.monotonic() + 60
            while not node.table_files("fstream") - files and time.monotonic() < deadline:
                time.sleep(0.05)
            assert len(node.table_files("fstream") - files) == 1, "nothing staged mid-stream"
            for b in batches[26:]:
                put.write(b)
            put.end()
            assert put.finish() == n
        assert len(node.table_files("fstream") - files) == 2
        assert c.commit("fstream", rev) == "latest"
        got = c.read_all(ScanSpec("fstream", filters=[("ts", "<", second)]))
        assert got.num_rows == early
        assert c.read_all(ScanSpec("fstream")).column("v").to_pylist() == list(range(n))


def test_a_staged_revision_survives_sigkill(tmp_path: Path) -> None:
    running = start_standalone(tmp_path / "data", tmp_path / "1.log")
    try:
        status, body = running.sql(
            "CREATE TABLE k (v double, ts timestamp NOT NULL, TIMESTAMP KEY(ts))"
        )
        assert status == 200, body
        rows = pa.table({"v": [1.0, 2.0], "ts": pa.array([1, 2], pa.timestamp("ms"))})
        with FlightClient(f"127.0.0.1:{running.flight_port}") as c:
            rev = c.reserve("k")
            c.put("k", rows.to_batches(), rows.schema, revision=rev)
        running.server.kill(signal.SIGKILL)
        running.server.proc.wait(timeout=30)
    finally:
        running.server.stop()
    running = start_standalone(tmp_path / "data", tmp_path / "2.log")
    try:
        with FlightClient(f"127.0.0.1:{running.flight_port}") as c:
            assert c.read_all(ScanSpec("k")).num_rows == 0
            assert c.commit("k", rev) == "latest"
            assert c.read_all(ScanSpec("k")).column("v").to_pylist() == [1.0, 2.0]
    finally:
        running.server.stop()


def test_time_splits_cover_the_range_with_even_rows() -> None:
    from node.engine.splits import time_splits

    hour = 3_600_000
    windows = {h * hour: 100 for h in range(10)}
    splits = time_splits(windows, hour, None, None, max_splits=4, min_split_rows=1)
    assert len(splits) == 4
    assert splits[0][0] is None and splits[-1][1] is None
    assert all(a[1] == b[0] for a, b in itertools.pairwise(splits))
    # Few rows: one split; a filter's range bounds the splits.
    assert time_splits(windows, hour, None, None, max_splits=4, min_split_rows=10_000) == [
        (None, None)
    ]
    bounded = time_splits(windows, hour, 2 * hour + 5, 6 * hour, max_splits=8, min_split_rows=1)
    assert bounded[0][0] == 2 * hour + 5 and bounded[-1][1] == 6 * hour and len(bounded) == 4
