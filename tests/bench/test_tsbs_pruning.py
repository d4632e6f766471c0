"""The layout the TSBS benchmark gives gnomon (small row groups, each listing its series)
lets a query on a few hosts read only their row groups, with the same rows as a full
filter."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from bench.engine_ingest import SCHEMA
from bench.tsbs.cpu_only import cpu_only_batches
from node.backends import open_standalone
from node.engine.engine import Engine
from node.engine.options import TableOptions

pytestmark = pytest.mark.unit

HOSTS, STEPS = 40, 720  # 2 h of readings: one segment window


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Engine, pa.Table]]:
    engine = open_standalone(str(tmp_path_factory.mktemp("prune") / "db"), wal_sync="never")
    engine.create_table(
        "cpu", SCHEMA, TableOptions.from_strings({"num_rows_per_row_group": "1440"})
    )
    batches = list(cpu_only_batches(HOSTS, STEPS))
    for b in batches:
        engine.write("cpu", b)
    engine.flush()
    yield engine, pa.concat_tables(batches)
    engine.close()


def _scan(engine: Engine, predicate: pc.Expression) -> tuple[pa.Table, int, int]:
    scan = engine.plan_scan("cpu", columns=["hostname", "timestamp", "usage_user"],
                            predicate=predicate)  # fmt: skip
    table = pa.Table.from_batches(list(scan))
    return table, scan.stats.row_groups_read, scan.stats.row_groups_total


def _sorted(t: pa.Table) -> pa.Table:
    return t.sort_by([("hostname", "ascending"), ("timestamp", "ascending")])


@pytest.mark.parametrize("hosts", [["host_3"], ["host_0", "host_17", "host_39"]])
def test_host_filter_reads_only_row_groups_of_those_hosts(
    loaded: tuple[Engine, pa.Table], hosts: list[str]
) -> None:
    engine, data = loaded
    predicate = pc.field("hostname").isin(hosts) & (pc.field("usage_user") >= 0.0)
    got, read, total = _scan(engine, predicate)
    want = data.filter(predicate).select(got.column_names)
    assert _sorted(got).to_pydict() == _sorted(want).to_pydict()
    assert total >= 15  # 28,800 rows in row groups of 1,440
    assert read <= 2 * len(hosts)


def test_filter_without_tags_is_not_pruned_by_series(loaded: tuple[Engine, pa.Table]) -> None:
    engine, data = loaded
    predicate = pc.field("usage_user") > 99.0
    got, read, total = _scan(engine, predicate)
    assert got.num_rows == data.filter(predicate).num_rows
    assert read <= total


def test_other_tag_and_negation_keep_every_matching_row(loaded: tuple[Engine, pa.Table]) -> None:
    engine, data = loaded
    for predicate in (
        pc.field("region") == "eu-west-1",
        ~(pc.field("hostname") == "host_5"),
        (pc.field("hostname") == "host_5") | (pc.field("usage_idle") > 95.0),
    ):
        got, _, _ = _scan(engine, predicate)
        assert got.num_rows == data.filter(predicate).num_rows, str(predicate)
