"""The TSBS harness at tiny scale: request bodies decode to the data they were built from,
answers are normalised and compared across systems, and a whole run (real servers, every
system installable here) produces the report's JSON with every query cross-checked, after an
idle pause and back to back."""

from __future__ import annotations

import itertools
import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from rich.console import Console

from bench.tsbs import check, report
from bench.tsbs.clickhouse import Chdb
from bench.tsbs.cpu_only import FIELDS, TAGS, cpu_only_batches
from bench.tsbs.influx import result_table
from bench.tsbs.payloads import horaedb_request, line_protocol
from bench.tsbs.queries import QUERY_TYPES, Span, generate
from bench.tsbs.runner import WARM_RUNS, Bench, Options, schedule
from bench.tsbs.systems import NAMES, available, kinds
from gnomon.proto import storage_pb2
from node.ingest import line_protocol as lp_parser
from node.ingest.horaedb import decode_table_request

pytestmark = pytest.mark.integration

BATCH = next(cpu_only_batches(3, 4))


def _sorted(t: pa.Table) -> pa.Table:
    return t.select(["hostname", "timestamp", *TAGS[1:], *FIELDS]).sort_by(
        [("timestamp", "ascending"), ("hostname", "ascending")]
    )


def test_line_protocol_body_parses_back_to_the_batch() -> None:
    (rows,) = lp_parser.parse(line_protocol(BATCH).decode(), precision="ms")
    assert _sorted(rows.arrow("timestamp")).equals(_sorted(BATCH))


def test_horaedb_request_decodes_back_to_the_batch() -> None:
    req = storage_pb2.WriteRequest.FromString(horaedb_request(BATCH))
    assert req.context.database == "public"
    rows = decode_table_request(req.table_requests[0])
    assert _sorted(rows.arrow("timestamp")).equals(_sorted(BATCH))


def test_influx_json_becomes_a_table_with_whole_numbers_as_floats() -> None:
    doc = {
        "results": [
            {
                "series": [
                    {
                        "name": "cpu",
                        "tags": {"hostname": h},
                        "columns": ["time", "mean"],
                        "values": [[0, 100], [60_000, 1.5]],
                    }
                    for h in ("b", "a")
                ]
            }
        ]
    }
    t = result_table(doc)
    assert t.column_names == ["hostname", "time", "mean"]
    assert t.column("mean").type == pa.float64()
    assert t.column("mean").to_pylist() == [100.0, 1.5, 100.0, 1.5]


def _sql_answer() -> pa.Table:
    return pa.table(
        {
            "hour": pa.array([3_600_000, 0, 0], pa.timestamp("ms")),
            "hostname": ["a", "a", "b"],
            "mean_usage_user": [1.0, 2.0, 3.0],
        }
    )


def test_answers_agree_across_naming_order_and_empty_buckets() -> None:
    sql = check.normalise_sql(_sql_answer())
    assert sql.keys == ["time", "hostname"]
    influx = pa.table(
        {
            "hostname": ["b", "a", "a", "a"],
            "time": [0, 0, 3_600_000, 7_200_000],
            "mean": [3.0 + 1e-12, 2.0, 1.0, None],  # last bucket empty
        }
    )
    assert check.diff(("gnomon", sql), ("influxdb", check.normalise_influx(influx, sql))) is None


def test_a_differing_value_is_reported_with_the_rows() -> None:
    sql = check.normalise_sql(_sql_answer())
    other = _sql_answer().set_column(2, "mean_usage_user", pa.array([1.0, 2.0, 3.5]))
    problem = check.diff(("gnomon", sql), ("duckdb", check.normalise_sql(other)))
    assert problem is not None
    assert "3.5" in problem and "gnomon" in problem and "duckdb" in problem


def test_multi_field_last_compares_without_time() -> None:
    sql = check.normalise_sql(
        pa.table(
            {"hostname": ["a"], "timestamp": pa.array([5], pa.timestamp("ms")), "usage_user": [1.0]}
        )
    )
    influx = pa.table({"hostname": ["a"], "time": [0], "last_usage_idle": [9.0],
                       "last_usage_user": [1.0]})  # fmt: skip
    assert check.diff(("gnomon", sql), ("influxdb", check.normalise_influx(influx, sql))) is None


def test_an_empty_influx_answer_matches_an_empty_sql_one() -> None:
    # InfluxDB answers no rows with no columns; the SQL systems keep theirs.
    influx = pa.table({"time": pa.array([], pa.int64())})
    empty = check.normalise_sql(pa.table({"hostname": pa.array([], pa.string()), "v": []}))
    assert (
        check.diff(("gnomon", empty), ("influxdb", check.normalise_influx(influx, empty))) is None
    )
    full = check.normalise_sql(pa.table({"hostname": ["a"], "v": [1.0]}))
    problem = check.diff(("gnomon", full), ("influxdb", check.normalise_influx(influx, full)))
    assert problem is not None


def _run(tmp_path: Path, systems: tuple[str, ...], query_api: str = "http") -> dict[str, Any]:
    opts = Options(
        hosts=8, span_ms=3_600_000, reps=1, workers=2, batch=1_000, queries_per_type=1,
        systems=systems, scratch=tmp_path, settle_quiet_s=1.0, gnomon_query_api=query_api,
    )  # fmt: skip
    console = Console(width=160, record=True)
    res = Bench(opts, console).run()
    report.print_table(res, console)
    assert "ingest rows/s" in console.export_text()
    path = tmp_path / "out.json"
    report.write_json(res, path)
    report.write_png(res, tmp_path / "out.png")
    assert (tmp_path / "out.png").stat().st_size > 0
    doc: dict[str, Any] = json.loads(path.read_text())
    assert doc["mismatches"] == {}
    assert set(doc["ingest_rows_per_s"]) == set(systems)
    assert all(v > 0 for v in doc["ingest_rows_per_s"].values())
    assert doc["stored_rows"] == dict.fromkeys(systems, doc["config"]["rows"])
    queried = {s for s in systems if kinds()[s].dialect}
    assert list(doc["queries"]) == list(doc["queries_warm"]) == list(QUERY_TYPES)
    for q, per in doc["queries"].items():
        assert set(per) == set(doc["queries_warm"][q]) == queried, q
        assert sorted(doc["checked"][q]) == sorted(queried), q
        latencies = doc["query_latencies_ms"][q]
        warm = doc["query_latencies_warm_ms"][q]
        for s in queried:
            assert len(latencies[s]) == opts.reps * opts.queries_per_type, (q, s)
            assert min(latencies[s]) <= per[s] <= max(latencies[s]), (q, s)
            assert len(warm[s]) == len(latencies[s]) * WARM_RUNS, (q, s)
        # gnomon's own time for each timed query, as its metrics measured it (not compared
        # with the client's: over HTTP the server stops its clock after writing the answer,
        # which a busy machine may delay past the client's end).
        own = doc["gnomon_server_ms"][q]
        assert len(own) == len(latencies["gnomon"]) and all(o > 0 for o in own), (q, own)
    assert (
        doc["gnomon_metrics"]['gnomon_table_ssts{table="cpu",unit="rows"}'] == doc["config"]["rows"]
    )
    assert set(doc["bytes_per_row"]) == set(systems)
    assert all(v > 0 for v in doc["bytes_per_row"].values())
    return doc


@pytest.mark.parametrize("query_api", ["http", "grpc"])
def test_whole_run_gnomon_and_duckdb(tmp_path: Path, query_api: str) -> None:
    # Every query type's answers through either API agree with DuckDB's.
    doc = _run(tmp_path, ("gnomon", "duckdb"), query_api)
    assert doc["peak_rss_bytes"]["gnomon"] > 0
    assert doc["ingest_rows_per_s_by_loader"]["gnomon-line-protocol"] > 0


@pytest.mark.long
def test_whole_run_every_system(tmp_path: Path) -> None:
    # The Python ones are development dependencies; InfluxDB and VictoriaMetrics come from
    # apt-get, which needs root.
    names, reasons = available()
    assert {"gnomon", "duckdb", "duckdb-parquet", "chdb"} <= set(names), reasons
    if reasons:
        pytest.skip(f"not installable here: {reasons}")
    doc = _run(tmp_path, NAMES)
    assert doc["peak_rss_bytes"]["influxdb"] > 0
    assert doc["peak_rss_bytes"]["victoriametrics"] > 0
    assert "ingest vs influxdb" in doc["targets"]


def test_chdb_answers_time_buckets_as_timestamps(tmp_path: Path) -> None:
    # ClickHouse writes a DateTime as uint32 seconds in Arrow; the client reads it back.
    from chdb.session import Session

    chdb = Chdb(Session(str(tmp_path / "chdb")))
    try:
        got = chdb.query(
            "SELECT toStartOfHour(toDateTime64('2016-01-01 01:02:03', 3, 'UTC')) AS hour"
        )
    finally:
        chdb.stop()
    assert got.column("hour").type == pa.timestamp("s", tz="UTC")
    assert got.column("hour").cast(pa.int64()).to_pylist() == [1_451_610_000]


def test_gnomon_cli_has_the_bench_command() -> None:
    from click.testing import CliRunner

    from gnomon_app.cli import main

    result = CliRunner().invoke(main, ["bench", "tsbs", "--help"])
    assert result.exit_code == 0, result.output
    for flag in ("--hosts", "--span", "--reps", "--workers", "--batch", "--json", "--png"):
        assert flag in result.output


def test_timed_runs_put_each_system_after_each_other_equally_often() -> None:
    per_type, reps = Options().queries_per_type, Options().reps
    queries = generate(Span(hosts=10, start_ms=0, duration_ms=86_400_000), per_type=per_type)
    systems = ("gnomon", "influxdb", "duckdb")
    runs = schedule(queries, systems, reps, per_type)
    assert [q for q, _ in runs] == [*queries] * reps
    assert all(sorted(order) == sorted(systems) for _, order in runs)
    after: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    sequence = [(q.name, s) for q, order in runs for s in order]
    for (_, previous), (name, system) in itertools.pairwise(sequence):
        assert previous != system
        after[(name, system)][previous] += 1
    first_type = queries[0].name
    for (name, system), counts in after.items():
        others = {s: 3 for s in systems if s != system}
        if name != first_type:
            assert counts == others, (name, system)


def test_timed_runs_of_five_systems_spread_places_and_predecessors() -> None:
    # Five systems have 10 orders in a balanced design, more than a type's six instances:
    # the run as a whole goes through them, never running a system twice in a row.
    per_type, reps = Options().queries_per_type, Options().reps
    queries = generate(Span(hosts=10, start_ms=0, duration_ms=86_400_000), per_type=per_type)
    systems = tuple(n for n in NAMES if kinds()[n].dialect)
    assert len(systems) == 5
    runs = schedule(queries, systems, reps, per_type)
    sequence = [s for _, order in runs for s in order]
    assert all(a != b for a, b in itertools.pairwise(sequence))
    places = Counter((s, i) for _, order in runs for i, s in enumerate(order))
    assert len(places) == 25 and max(places.values()) - min(places.values()) <= 2
    pairs = Counter(itertools.pairwise(sequence))
    assert len(pairs) == 20 and max(pairs.values()) <= 2 * min(pairs.values())
