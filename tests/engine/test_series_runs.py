"""The series directory's row offsets: each SST row group lists its series in row order with
the first row of each, and a scan bounded on tags reads only those runs of rows, narrowed to
its time range by binary search, with exactly the rows a full filter keeps."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from node.backends import open_standalone
from node.engine.bounds import Bounds, Range
from node.engine.engine import Engine
from node.engine.options import TableOptions, UpdateMode
from node.engine.scan import ScanStats
from node.engine.schema import TSID, Column, ColumnType, Schema
from node.engine.sst import reader
from node.engine.sst.writer import SERIES_KEY

from .conftest import CPU, rows

pytestmark = pytest.mark.unit

HOSTS = [f"h{i:02d}" for i in range(12)]
COLUMNS = [c for c in CPU.columns if c.name != TSID]
STEPS = 60  # one reading per host a minute, for an hour
T0 = 1_700_000_000_000 // 3_600_000 * 3_600_000  # on an hour: one segment window


def _data(schema_hosts: list[str] = HOSTS) -> pa.Table:
    hosts = [h for h in schema_hosts for _ in range(STEPS)]
    ts = [T0 + i * 60_000 for _ in schema_hosts for i in range(STEPS)]
    return pa.table(
        {
            "host": hosts,
            "region": ["eu" if int(h[1:]) % 2 else "us" for h in hosts],
            "usage": pa.array([float(i % 97) for i in range(len(hosts))], pa.float64()),
            "ts": pa.array(ts, pa.timestamp("ms")),
        }
    )


def _engine(data_dir: str, schema: Schema = CPU) -> Engine:
    e = open_standalone(data_dir, compaction_threads=0, gc_interval_s=0)
    # Row groups of 100 rows: a host's hour (60 rows) is cut by row group ends.
    e.create_table("cpu", schema, TableOptions(num_rows_per_row_group=100))
    return e


@pytest.fixture
def loaded(data_dir: str) -> Iterator[tuple[Engine, pa.Table]]:
    e = _engine(data_dir)
    data = _data()
    e.write("cpu", data)
    e.flush()
    yield e, data
    e.close()


def _sst_paths(data_dir: str) -> list[Path]:
    return sorted(Path(data_dir).rglob("*.parquet"))


def _directory(path: Path) -> dict[str, object]:
    raw = (pq.read_metadata(path).metadata or {})[SERIES_KEY.encode()]
    directory: dict[str, object] = json.loads(raw)
    return directory


def _scan(
    e: Engine, bounds: Bounds, predicate: pc.Expression | None = None
) -> tuple[pa.Table, int, int]:
    scan = e.plan_scan("cpu", columns=["host", "ts", "usage"], bounds=bounds, predicate=predicate)
    got = scan.to_table()
    return got, scan.stats.row_groups_read, scan.stats.row_groups_located


def _expected(data: pa.Table, bounds: Bounds, predicate: pc.Expression | None) -> pa.Table:
    keep = pc.scalar(True)
    for column, r in bounds.items():
        keep = keep & r.expression(column, data.schema.field(column).type)
    if predicate is not None:
        keep = keep & predicate
    return data.filter(keep).select(["host", "ts", "usage"])


def test_row_groups_list_their_series_in_row_order_with_first_rows(
    loaded: tuple[Engine, pa.Table], data_dir: str
) -> None:
    (path,) = _sst_paths(data_dir)
    directory = _directory(path)
    assert directory["tags"] == ["host", "region"]
    series = directory["series"]
    assert isinstance(series, list)
    groups, starts = directory["row_groups"], directory["starts"]
    assert isinstance(groups, list) and isinstance(starts, list)
    table = pq.read_table(path)
    assert len(starts) == len(groups) == pq.ParquetFile(path).num_row_groups > 1
    offset = 0
    for indexes, firsts in zip(groups, starts, strict=True):
        size = min(100, table.num_rows - offset)
        assert firsts[0] == 0
        ends = [*firsts[1:], size]
        for i, start, end in zip(indexes, firsts, ends, strict=True):
            run = table.slice(offset + start, end - start)
            assert start < end
            # Every row of the run is the listed series, and it is that series' only run.
            assert set(run.column("host").to_pylist()) == {series[i][0]}
            assert set(run.column("region").to_pylist()) == {series[i][1]}
        offset += size
    assert offset == table.num_rows == len(HOSTS) * STEPS


WINDOWS = [
    Range(lo=T0, hi=T0 + 3_600_000, hi_inclusive=False),  # the whole hour
    Range(lo=T0 + 10 * 60_000, hi=T0 + 25 * 60_000, hi_inclusive=False),
    Range(lo=T0 + 10 * 60_000, lo_inclusive=False, hi=T0 + 25 * 60_000),  # ends flipped
    Range(lo=T0 + 59 * 60_000),  # the last reading only
    Range(hi=T0),  # the first reading only
    Range(lo=T0 + 90 * 60_000),  # none
]


@pytest.mark.parametrize("window", WINDOWS, ids=range(len(WINDOWS)))
@pytest.mark.parametrize(
    "hosts",
    [["h03"], ["h00", "h07", "h11"], [f"h{i:02d}" for i in range(12)]],
    ids=["one", "three", "all"],
)
def test_tag_and_time_bounds_read_located_runs_with_the_filtered_rows(
    loaded: tuple[Engine, pa.Table], window: Range, hosts: list[str]
) -> None:
    e, data = loaded
    bounds: Bounds = {"host": Range(values=frozenset(hosts)), "ts": window}
    got, read, located = _scan(e, bounds)
    want = _expected(data, bounds, None)
    assert rows(got) == rows(want)
    assert located == read  # every row group read was read at its series' rows only
    if len(hosts) == 1:
        assert read <= 2  # one host's hour spans at most two row groups of 100


@pytest.mark.parametrize("window", WINDOWS[1:4], ids=range(1, 4))
def test_many_runs_are_filtered_by_time_rather_than_narrowed(
    loaded: tuple[Engine, pa.Table], window: Range, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reader, "NARROWED_RUNS", 0)
    e, data = loaded
    bounds: Bounds = {"host": Range(values=frozenset({"h00", "h05"})), "ts": window}
    got, read, located = _scan(e, bounds)
    assert rows(got) == rows(_expected(data, bounds, None))
    assert 0 < located == read


def test_few_row_groups_are_judged_on_statistics_as_many_are(
    loaded: tuple[Engine, pa.Table],
) -> None:
    e, _ = loaded
    table = e.table("cpu")
    version, _ = table.snapshot()
    (sst,) = [f for f in version.files if f.is_data]
    files = table.sst_files
    n = files.footer(sst.path).num_row_groups
    rng = random.Random(3)
    for _ in range(200):
        lo = T0 + rng.randrange(0, 70) * 60_000
        bounds: Bounds = {
            "ts": Range(lo=lo, hi=lo + rng.randrange(0, 20) * 60_000, hi_inclusive=False),
            "host": Range(lo=rng.choice(HOSTS), values=rng.choice([None, frozenset(HOSTS[3:6])])),
        }
        among = set(rng.sample(range(n), rng.randrange(0, reader.SCALAR_ROW_GROUPS + 1)))
        every = files.row_groups_within(sst.path, bounds)
        assert files.row_groups_within(sst.path, bounds, among) == [
            rg for rg in every if rg in among
        ]


def test_a_predicate_is_still_judged_on_located_rows(loaded: tuple[Engine, pa.Table]) -> None:
    e, data = loaded
    bounds: Bounds = {"host": Range(values=frozenset({"h01", "h02"}))}
    predicate = pc.field("usage") > 40.0
    got, read, located = _scan(e, bounds, predicate)
    assert rows(got) == rows(_expected(data, bounds, predicate))
    assert 0 < located == read


def test_a_tag_range_and_another_tag_locate_runs_too(loaded: tuple[Engine, pa.Table]) -> None:
    e, data = loaded
    for bounds in (
        {"host": Range(lo="h02", hi="h05")},
        {"region": Range(values=frozenset({"eu"})), "host": Range(lo="h06")},
    ):
        got, read, located = _scan(e, bounds)
        assert rows(got) == rows(_expected(data, bounds, None)), bounds
        assert 0 < located == read


def _rewrite_starts(path: Path, change: Callable[[list[list[int]]], object]) -> None:
    """The SST at ``path`` written again with its series directory's row offsets changed
    (as a file of an older writer, or a damaged one, would have them; None drops them)."""
    meta = pq.read_metadata(path)
    kv = dict(meta.metadata or {})
    directory = json.loads(kv[SERIES_KEY.encode()])
    starts = change(directory.pop("starts"))
    if starts is not None:
        directory["starts"] = starts
    kv[SERIES_KEY.encode()] = json.dumps(directory).encode()
    kv.pop(b"ARROW:schema", None)
    table = pq.read_table(path)
    pq.write_table(table.replace_schema_metadata(kv), path, row_group_size=100)


def _each(damage: Callable[[list[int]], list[int]]) -> Callable[[list[list[int]]], object]:
    """``damage`` applied to the offsets of every row group of more than one series."""
    return lambda starts: [damage(s) if len(s) > 1 else s for s in starts]


@pytest.mark.parametrize(
    "change",
    [
        lambda starts: None,
        lambda starts: starts[:1],
        lambda starts: "damaged",
        _each(lambda s: [0] * len(s)),
        _each(lambda s: [1, *s[1:]]),
        _each(lambda s: [*s[:-1], 1000]),
        lambda starts: [[float(v) for v in s] for s in starts],
    ],
    ids=[
        "written-before-offsets",
        "wrong-length",
        "not-a-list",
        "not-increasing",
        "not-from-0",
        "past-the-end",
        "not-integers",
    ],
)
def test_a_file_without_usable_offsets_is_read_whole_and_filtered(
    data_dir: str, change: Callable[[list[list[int]]], object]
) -> None:
    data = _data()
    with _engine(data_dir) as e:
        e.write("cpu", data)
        e.flush()
    (path,) = _sst_paths(data_dir)
    _rewrite_starts(path, change)
    with open_standalone(data_dir, compaction_threads=0, gc_interval_s=0) as e:
        bounds: Bounds = {
            "host": Range(values=frozenset({"h04"})),
            "ts": Range(lo=T0 + 5 * 60_000, hi=T0 + 50 * 60_000, hi_inclusive=False),
        }
        got, read, located = _scan(e, bounds)
        assert rows(got) == rows(_expected(data, bounds, None))
        assert located == 0
        assert 0 < read <= 2  # still pruned by the series each row group holds


@pytest.mark.parametrize("row_group", [50, 100], ids=["few-runs", "many-runs"])
def test_no_offsets_where_a_series_is_not_one_run(data_dir: str, row_group: int) -> None:
    """With the timestamp before the host in the primary key, the hosts of a region
    interleave: each row group lists its series, but none is one run of rows."""
    schema = Schema.build(COLUMNS, timestamp_key="ts", primary_key=["region", "ts", "host"])
    hosts = [f"h{i:02d}" for i in range(48)]
    regions = [f"r{i % 8}" for i in range(len(hosts)) for _ in range(STEPS)]
    data = _data(hosts).set_column(1, "region", pa.array(regions))
    with open_standalone(data_dir, compaction_threads=0, gc_interval_s=0) as e:
        e.create_table("cpu", schema, TableOptions(num_rows_per_row_group=row_group))
        e.write("cpu", data)
        e.flush()
        (path,) = _sst_paths(data_dir)
        directory = _directory(path)
        assert "starts" not in directory
        bounds: Bounds = {"host": Range(values=frozenset({"h09"}))}
        got, read, located = _scan(e, bounds)
        assert rows(got) == rows(_expected(data, bounds, None))
        assert located == 0
        assert read < pq.ParquetFile(path).num_row_groups  # still pruned by series


def test_runs_not_sorted_by_time_are_filtered_by_time(data_dir: str) -> None:
    """A field before the timestamp in the primary key: each series is one run, located,
    but not in time order, so its time range is judged row by row."""
    schema = Schema.build(
        [*COLUMNS, Column("n", ColumnType.INT64)],
        timestamp_key="ts",
        primary_key=["host", "n", "ts"],
    )
    data = _data()
    data = data.append_column("n", pa.array([i * 37 % STEPS for i in range(data.num_rows)]))
    with _engine(data_dir, schema) as e:
        e.write("cpu", data)
        e.flush()
        (path,) = _sst_paths(data_dir)
        assert "starts" in _directory(path)
        bounds: Bounds = {
            "host": Range(values=frozenset({"h05"})),
            "ts": Range(lo=T0 + 7 * 60_000, hi=T0 + 31 * 60_000, hi_inclusive=False),
        }
        got, read, located = _scan(e, bounds)
        assert rows(got) == rows(_expected(data, bounds, None))
        assert 0 < located == read


def test_no_offsets_where_the_directory_cannot_name_every_tag(data_dir: str) -> None:
    """A binary tag is not listed: a run of the listed tags may then be several series."""
    schema = Schema.build(
        [*COLUMNS, Column("blob", ColumnType.VARBINARY, is_tag=True)], timestamp_key="ts"
    )
    data = _data([f"h{i:02d}" for i in range(24)])
    data = data.append_column("blob", pa.array([b"x" if i % 2 else b"y" for i in range(len(data))]))
    with _engine(data_dir, schema) as e:
        e.write("cpu", data)
        e.flush()
        (path,) = _sst_paths(data_dir)
        assert "starts" not in _directory(path)
        bounds: Bounds = {
            "host": Range(values=frozenset({"h01"})),
            "ts": Range(lo=T0 + 5 * 60_000, hi=T0 + 9 * 60_000),
        }
        got, _, located = _scan(e, bounds)
        assert rows(got) == rows(_expected(data, bounds, None))
        assert located == 0


# -- located reads -----------------------------------------------------------------------------
# A scan bounded on one tag's values and a time range, over SSTs that need no merge, is read
# without the general plan: the series' runs, sliced and narrowed. Anything that could make
# those rows not the answer (rows elsewhere, shadowing, another filter) takes the general path.

TWO_HOSTS: Bounds = {"host": Range(values=frozenset({"h03", "h08"})), "ts": WINDOWS[1]}


def _located(
    e: Engine,
    bounds: Bounds,
    predicate: pc.Expression | None = None,
    *,
    dictionary_tags: bool = False,
) -> tuple[pa.Table, ScanStats]:
    scan = e.plan_scan(
        "cpu",
        columns=["host", "ts", "usage"],
        bounds=bounds,
        predicate=predicate,
        dictionary_tags=dictionary_tags,
    )
    return scan.to_table(), scan.stats


@pytest.mark.parametrize("window", WINDOWS, ids=range(len(WINDOWS)))
@pytest.mark.parametrize("hosts", [["h03"], ["h03", "h08"], ["h99"], []], ids=str)
def test_settled_series_in_a_time_range_are_a_located_read(
    loaded: tuple[Engine, pa.Table], window: Range, hosts: list[str]
) -> None:
    e, data = loaded
    bounds: Bounds = {"host": Range(values=frozenset(hosts)), "ts": window}
    got, stats = _located(e, bounds)
    assert stats.located
    assert rows(got) == rows(_expected(data, bounds, None))
    assert got.column_names == ["host", "ts", "usage"]
    assert stats.row_groups_located == stats.row_groups_read
    if not hosts or hosts == ["h99"]:
        assert stats.row_groups_read == 0


def test_a_located_read_estimates_its_runs_and_answers_as_the_general_read(
    loaded: tuple[Engine, pa.Table],
) -> None:
    e, _ = loaded
    one: Bounds = {"host": Range(values=frozenset({"h05"})), "ts": WINDOWS[0]}
    scan = e.plan_scan("cpu", columns=["host", "ts", "usage"], bounds=one)
    assert scan.estimated_rows() == STEPS  # the host's runs, not its row groups' rows
    for encoded in (False, True):
        got, stats = _located(e, TWO_HOSTS, dictionary_tags=encoded)
        # An always-true predicate keeps the same rows through the general plan.
        general, plain = _located(e, TWO_HOSTS, pc.field("usage") >= -1.0, dictionary_tags=encoded)
        assert stats.located and not plain.located
        assert got.schema == general.schema
        assert rows(got) == rows(general)
        assert pa.types.is_dictionary(got.schema.field("host").type) == encoded


def _write_over(e: Engine, data: pa.Table) -> None:
    e.write(
        "cpu",
        data.filter(pc.field("host") == "h03").set_column(2, "usage", pa.array([-5.0] * STEPS)),
    )


def _write_over_and_flush(e: Engine, data: pa.Table) -> None:
    _write_over(e, data)
    e.flush()


def _delete_a_row_and_flush(e: Engine, data: pa.Table) -> None:
    e.delete_rows("cpu", _data(["h03"]).slice(12, 1).select(["host", "region", "ts"]))
    e.flush()


def _delete_a_range(e: Engine, data: pa.Table) -> None:
    e.delete_range("cpu", tags={"host": "h03"}, time_range=(T0 + 15 * 60_000, T0 + 20 * 60_000))


FALLBACKS: dict[str, Callable[[Engine, pa.Table], None]] = {
    "memtable-rows": _write_over,
    "overlapping-files": _write_over_and_flush,
    "row-deletion": _delete_a_row_and_flush,
    "range-tombstone": _delete_a_range,
}


@pytest.mark.parametrize("change", FALLBACKS.values(), ids=FALLBACKS.keys())
def test_what_a_located_read_cannot_answer_takes_the_general_path(
    loaded: tuple[Engine, pa.Table], change: Callable[[Engine, pa.Table], None]
) -> None:
    e, data = loaded
    change(e, data)
    got, stats = _located(e, TWO_HOSTS)
    assert not stats.located
    want = e.plan_scan("cpu", columns=["host", "ts", "usage"], order="asc").to_table()
    assert rows(got) == rows(_expected(want, TWO_HOSTS, None))
    # The change shows: h03's readings are new (or some gone).
    assert rows(got) != rows(_expected(data, TWO_HOSTS, None))


def test_other_filters_take_the_general_path(loaded: tuple[Engine, pa.Table]) -> None:
    e, data = loaded
    for bounds, predicate in (
        (TWO_HOSTS, pc.field("usage") > 40.0),
        ({**TWO_HOSTS, "region": Range(values=frozenset({"eu"}))}, None),
        ({"host": Range(lo="h03", hi="h08")}, None),  # a range of tag values
        ({"host": TWO_HOSTS["host"], "ts": Range(values=frozenset({T0, T0 + 60_000}))}, None),
    ):
        got, stats = _located(e, bounds, predicate)
        assert not stats.located, bounds
        assert rows(got) == rows(_expected(data, bounds, predicate)), bounds


def test_append_mode_reads_overlapping_files_located(data_dir: str) -> None:
    data = _data()
    with open_standalone(data_dir, compaction_threads=0, gc_interval_s=0) as e:
        e.create_table(
            "cpu", CPU, TableOptions(num_rows_per_row_group=100, update_mode=UpdateMode.APPEND)
        )
        for _ in range(2):
            e.write("cpu", data)
            e.flush()
        got, stats = _located(e, TWO_HOSTS)
        assert stats.located and stats.ssts_read == 2
        want = _expected(data, TWO_HOSTS, None)
        assert rows(got) == sorted(rows(want) * 2)
        # A file holding deletion markers is merged: they shadow rows of the others.
        _delete_a_row_and_flush(e, data)
        got, stats = _located(e, TWO_HOSTS)
        assert not stats.located
        truth = e.plan_scan("cpu", columns=["host", "ts", "usage"], order="asc").to_table()
        assert rows(got) == rows(_expected(truth, TWO_HOSTS, None))
        assert got.num_rows < 2 * want.num_rows


def test_a_located_read_honours_the_ttl(data_dir: str) -> None:
    data = _data()
    # Rows older than half past the hour (and half a minute, so that the clock moving on
    # during the test changes nothing) have outlived the TTL.
    floor = T0 + 30 * 60_000 + 30_000
    options = TableOptions(
        num_rows_per_row_group=100, enable_ttl=True, ttl_ms=int(time.time() * 1000) - floor
    )
    with open_standalone(data_dir, compaction_threads=0, gc_interval_s=0) as e:
        e.create_table("cpu", CPU, options)
        e.write("cpu", data)
        e.flush()
        got, stats = _located(e, {"host": TWO_HOSTS["host"], "ts": WINDOWS[0]})
        assert stats.located
        live = {
            "host": TWO_HOSTS["host"],
            "ts": Range(lo=floor, hi=T0 + 3_600_000, hi_inclusive=False),
        }
        assert rows(got) == rows(_expected(data, live, None))
        assert got.num_rows == 2 * 29


def test_a_located_read_need_not_return_the_tag_it_is_bounded_on(
    loaded: tuple[Engine, pa.Table],
) -> None:
    e, data = loaded
    scan = e.plan_scan("cpu", columns=["ts", "usage"], bounds=TWO_HOSTS)
    got = scan.to_table()
    assert scan.stats.located
    assert got.column_names == ["ts", "usage"]
    want = _expected(data, TWO_HOSTS, None)
    assert rows(got) == rows(want, "ts", "usage")


def _arrays_and_table(
    e: Engine, bounds: Bounds, columns: list[str], predicate: pc.Expression | None = None
) -> tuple[reader.LocatedArrays | None, pa.Table]:
    arrays = e.plan_scan("cpu", columns=columns, bounds=bounds, predicate=predicate)
    return arrays.located_arrays(), e.plan_scan("cpu", columns=columns, bounds=bounds).to_table()


@pytest.mark.parametrize("window", WINDOWS, ids=range(len(WINDOWS)))
@pytest.mark.parametrize("hosts", [["h03"], ["h03", "h08"], ["h99"]], ids=str)
@pytest.mark.parametrize("mode", [UpdateMode.OVERWRITE, UpdateMode.APPEND], ids=str)
def test_a_located_read_gives_its_rows_as_numpy_arrays_as_the_table_holds_them(
    data_dir: str, window: Range, hosts: list[str], mode: UpdateMode
) -> None:
    data = _data()
    ts = data.column("ts").cast(pa.int64())
    if mode is UpdateMode.OVERWRITE:  # the hour in two files: a host's runs in both
        half = pa.scalar(T0 + 1_800_000)
        files = [data.filter(pc.less(ts, half)), data.filter(pc.greater_equal(ts, half))]
    else:  # the hour twice, in overlapping files
        files = [data, data]
    with open_standalone(data_dir, compaction_threads=0, gc_interval_s=0) as e:
        # Row groups of two or three hosts' half hours, as the series directory needs.
        e.create_table("cpu", CPU, TableOptions(num_rows_per_row_group=60, update_mode=mode))
        for rows_ in files:
            e.write("cpu", rows_)
            e.flush()
        bounds: Bounds = {"host": Range(values=frozenset(hosts)), "ts": window}
        arrays, table = _arrays_and_table(e, bounds, ["ts", "usage"])
        if not table.num_rows:
            assert arrays is None  # the table, which knows its types, answers
            return
        assert arrays is not None and list(arrays.columns) == ["ts", "usage"]
        # Timestamps as integers of their unit, rows in the table's order.
        times = arrays.columns["ts"]
        assert times.dtype == np.int64
        assert times.tolist() == table.column("ts").cast(pa.int64()).to_pylist()
        assert arrays.columns["usage"].tolist() == table.column("usage").to_pylist()
        want = _expected(data, bounds, None).num_rows
        assert len(times) == (want if mode is UpdateMode.OVERWRITE else 2 * want)
        # Said to be in time order exactly when they are.
        assert arrays.in_run_order == bool((times[1:] >= times[:-1]).all())
        if mode is UpdateMode.OVERWRITE and hosts == ["h03"]:
            assert arrays.in_run_order


def test_located_arrays_only_where_numpy_holds_the_columns_as_read(
    loaded: tuple[Engine, pa.Table],
) -> None:
    e, _ = loaded
    # A string column, and a scan that is no located read.
    assert _arrays_and_table(e, TWO_HOSTS, ["host", "ts"])[0] is None
    assert _arrays_and_table(e, TWO_HOSTS, ["ts"], pc.field("usage") > 1.0)[0] is None
    # A null among h08's values of the next hour (the files do not overlap): the same
    # scan's table is read instead, its files still there.
    later = _data()
    ts = pc.add(later.column("ts").cast(pa.int64()), pa.scalar(3_600_000))
    h08 = pc.equal(later.column("host"), pa.scalar("h08"))
    usage = pc.if_else(h08, pa.scalar(None, pa.float64()), later.column("usage"))
    e.write(
        "cpu", later.set_column(2, "usage", usage).set_column(3, "ts", ts.cast(pa.timestamp("ms")))
    )
    e.flush()
    scan = e.plan_scan("cpu", columns=["ts", "usage"], bounds={"host": TWO_HOSTS["host"]})
    assert scan.located_arrays() is None
    got = scan.to_table()
    assert scan.stats.located and got.column("usage").null_count == STEPS
    assert got.num_rows == 4 * STEPS
