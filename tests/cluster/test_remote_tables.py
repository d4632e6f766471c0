"""Remote tables without a cluster: the predicate encoding (the filters DataFusion pushes,
round-tripped and applied as the owner applies them), a reader's SQL executor joining its own
table with one read from an in-process owner's Flight endpoint, and malformed predicates."""

from __future__ import annotations

import base64
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import datafusion
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.substrait as substrait
import pytest

from gnomon.errors import InvalidArgument, NotOwner
from gnomon.flight.client import FlightClient
from gnomon.flight.ticket import ScanSpec
from node.backends import Storage, open_engine, open_standalone
from node.cluster.remote import FlightTableReader
from node.engine.engine import Engine
from node.engine.placement import LocalPlacer, Placed
from node.engine.scan.wire import decode_predicate, encode_predicate
from node.engine.schema import Schema
from node.engine.shard import STANDALONE_SHARD
from node.server.flight import FlightService
from node.sql.executor import SqlExecutor
from node.sql.remote_tables import FlightTable

pytestmark = pytest.mark.unit

DDL = (
    "CREATE TABLE {} (host string TAG, region string, v double, n bigint, "
    "ts timestamp NOT NULL, TIMESTAMP KEY(ts))"
)
ROWS = (
    "INSERT INTO {} (host, region, v, n, ts) VALUES "
    "('a', 'eu', 1.5, 1, 1700000000000), ('b', NULL, 2.5, 2, 1700000001000), "
    "('c', 'us', NULL, 3, 1700000002000), ('a', 'us', 4.0, 4, 1700000003000), "
    "('d''q', 'eu', -1.0, NULL, 1700000004000)"
)
WHERES = [
    "host = 'a'",
    "host <> 'a' AND v > 1",
    "host IN ('a', 'c', 'x', 'y', 'z')",
    "host NOT IN ('a')",
    "region IS NULL OR n <= 2",
    "v IS NOT NULL AND n IS NULL",
    "ts >= TIMESTAMP '2023-11-14 22:13:21' AND ts < to_timestamp_millis(1700000004000)",
    "ts BETWEEN to_timestamp_millis(1700000001000) AND to_timestamp_millis(1700000003000)",
    "NOT (n = 2) OR host = 'd''q'",
    "v >= -1 AND region <> 'us'",
]


@pytest.fixture
def owner(tmp_path: Path) -> Iterator[tuple[Engine, FlightService]]:
    engine = open_standalone(str(tmp_path / "owner"))
    ex = SqlExecutor(engine)
    ex.execute(DDL.format("rt"))
    ex.execute(ROWS.format("rt"))
    service = FlightService(engine, port=0)
    yield engine, service
    service.shutdown()
    engine.close()


class _Found:
    """The remote tables a cluster node would find: ``rt`` at the in-process owner."""

    def __init__(self, tables: dict[str, FlightTable]) -> None:
        self.tables = tables
        self.asked: list[list[str]] = []

    def find(self, names: Sequence[str]) -> Mapping[str, FlightTable]:
        self.asked.append(list(names))
        return {n: t for n, t in self.tables.items() if n in names}


class _Elsewhere(LocalPlacer):
    """A reader's placer: ``rt`` lives in a shard served by ``owner:1``."""

    def locate(self, name: str, *, fresh: bool = False) -> Placed | None:
        return Placed(STANDALONE_SHARD + 1, 99, "owner:1") if name == "rt" else None


@pytest.fixture
def reader(
    tmp_path: Path, owner: tuple[Engine, FlightService]
) -> Iterator[tuple[SqlExecutor, _Found, FlightClient]]:
    engine = open_engine(str(tmp_path / "reader"), Storage(), placer=_Elsewhere())
    engine.open_shard(STANDALONE_SHARD)
    client = FlightClient(f"127.0.0.1:{owner[1].port}")
    found = _Found({"rt": FlightTable("rt", FlightTableReader("owner:1", client))})
    ex = SqlExecutor(engine, found)
    ex.execute(DDL.format("lt"))
    ex.execute(ROWS.format("lt"))
    yield ex, found, client
    client.close()
    engine.close()


class _Capturing(ds.InMemoryDataset):  # type: ignore[misc]
    """A dataset that keeps the filters DataFusion pushes into it."""

    def __init__(self, table: pa.Table, seen: list[pc.Expression]) -> None:
        self.table = table
        self.seen = seen
        super().__init__(pa.Table.from_batches([], schema=table.schema))  # type: ignore[call-arg]

    def get_fragments(self, filter: pc.Expression | None = None) -> list[Any]:
        return [self]

    def scanner(  # type: ignore[override]  # the fragment protocol DataFusion calls
        self, schema: Any = None, columns: Any = None, filter: Any = None, **_: Any
    ) -> ds.Scanner:
        if filter is not None:
            self.seen.append(filter)
        t = self.table if filter is None else self.table.filter(filter)
        t = t if columns is None else t.select(columns)
        return ds.Scanner.from_batches(iter(t.to_batches()), schema=t.schema)


def _pushed(table: pa.Table, where: str) -> pc.Expression:
    seen: list[pc.Expression] = []
    ctx = datafusion.SessionContext()
    ctx.register_dataset("t", _Capturing(table, seen))
    ctx.sql(f"SELECT v FROM t WHERE {where}").to_arrow_table()
    assert seen and all(str(e) == str(seen[0]) for e in seen), where
    return seen[0]


@pytest.mark.parametrize("where", WHERES)
def test_pushed_filters_round_trip_and_select_the_same_rows(
    owner: tuple[Engine, FlightService], where: str
) -> None:
    engine, _ = owner
    schema: Schema = engine.describe("rt").schema
    table = pa.Table.from_batches(list(engine.scan("rt")))
    expr = _pushed(table, where)
    encoded = encode_predicate(expr, schema)
    assert encoded is not None, str(expr)
    decoded = decode_predicate(encoded, "rt", schema)
    wanted = ["host", "v"]
    arranged = table.select(decoded.read_columns(wanted))
    got = pa.Table.from_batches(
        [decoded.apply(b, wanted) for b in arranged.to_batches()], decoded_schema(table, wanted)
    )
    assert got.to_pylist() == table.filter(expr).select(wanted).to_pylist()
    assert got.num_rows < table.num_rows


def decoded_schema(table: pa.Table, wanted: list[str]) -> pa.Schema:
    return pa.schema([table.schema.field(c) for c in wanted])


def test_a_filter_substrait_cannot_carry_is_not_encoded(
    owner: tuple[Engine, FlightService],
) -> None:
    schema = owner[0].describe("rt").schema
    assert encode_predicate(pc.utf8_length(pc.field("host")) > 1, schema) is None


@pytest.mark.parametrize(
    ("predicate", "problem"),
    [
        ("not base64!", "no Substrait expression"),
        ("AAAA", "no Substrait expression"),
    ],
)
def test_malformed_predicates_are_refused(
    owner: tuple[Engine, FlightService], predicate: str, problem: str
) -> None:
    engine, service = owner
    schema = engine.describe("rt").schema
    with pytest.raises(InvalidArgument, match=problem):
        decode_predicate(predicate, "rt", schema)
    with FlightClient(f"127.0.0.1:{service.port}") as c, pytest.raises(InvalidArgument):
        c.read_all(ScanSpec("rt", predicate=predicate))


def test_a_predicate_on_a_column_of_another_type_is_refused(
    owner: tuple[Engine, FlightService],
) -> None:
    engine, _ = owner
    schema = engine.describe("rt").schema
    # v is a double: a predicate declaring it an integer is of another table (or version).
    raw = substrait.serialize_expressions(
        [pc.field("v") > 1], ["p"], pa.schema([("v", pa.int64())])
    )
    encoded = base64.b64encode(bytes(raw)).decode()
    with pytest.raises(InvalidArgument, match="'v'"):
        decode_predicate(encoded, "rt", schema)


JOINS = [
    "SELECT l.host, l.v, r.n FROM lt l JOIN rt r ON l.host = r.host AND l.ts = r.ts "
    "WHERE r.v > 1 ORDER BY l.ts",
    "SELECT host, ts FROM lt WHERE region = 'eu' UNION ALL "
    "SELECT host, ts FROM rt WHERE n >= 3 ORDER BY ts, host",
    "SELECT (SELECT count(*) FROM rt) AS r, (SELECT count(*) FROM lt WHERE host = 'a') AS l",
    "SELECT host, count(*) AS c FROM (SELECT host FROM lt UNION ALL SELECT host FROM rt "
    "WHERE ts >= to_timestamp_millis(1700000002000)) GROUP BY host ORDER BY host",
]


@pytest.mark.parametrize("query", JOINS)
def test_a_query_of_a_local_and_a_remote_table(
    reader: tuple[SqlExecutor, _Found, FlightClient], owner: tuple[Engine, FlightService],
    query: str,
) -> None:  # fmt: skip
    ex, _, _ = reader
    # The reference: both tables in one engine (the owner's, given a copy of lt).
    both = SqlExecutor(owner[0])
    both.execute(DDL.format("lt"))
    both.execute(ROWS.format("lt"))
    assert ex.execute(query).table().to_pylist() == both.execute(query).table().to_pylist()


def test_the_remote_scan_reads_only_what_the_query_needs(
    reader: tuple[SqlExecutor, _Found, FlightClient],
) -> None:
    ex, _, client = reader
    plan = ex.execute(
        "EXPLAIN ANALYZE SELECT l.v, r.n FROM lt l JOIN rt r ON l.ts = r.ts WHERE r.host = 'a'"
    ).table()
    lines = [p for t, p in zip(*plan.to_pydict().values(), strict=True) if t == "gnomon_scan"]
    (remote,) = [line for line in lines if "owner=owner:1" in line]
    assert "table=rt" in remote and 'filter=(host == "a")' in remote
    projection = remote.split("projection=")[1].split(" filter=")[0]
    assert set(eval(projection)) == {"n", "ts"}  # the columns the query reads of rt
    assert "rows_received=2" in remote
    scan_id = remote.split("scan_id=")[1].split()[0]
    # The owner applied the filter: two of its five rows left it.
    assert client.scan_stats(scan_id)["rows_returned"] == 2


def test_a_query_of_remote_tables_only_goes_to_their_owner(
    reader: tuple[SqlExecutor, _Found, FlightClient],
) -> None:
    ex, found, _ = reader
    with pytest.raises(NotOwner) as e:
        ex.execute("SELECT count(*) FROM rt")
    assert e.value.owner == "owner:1"
    assert found.asked  # it looked for the query's other tables first


def test_a_query_its_node_cannot_plan_goes_to_the_owner_of_its_tables(
    reader: tuple[SqlExecutor, _Found, FlightClient],
) -> None:
    """Integers compared with a remote table's timestamps are for its owner to read (it
    knows the column is one): the query goes there whole instead of failing here."""
    ex, _, _ = reader
    with pytest.raises(NotOwner) as e:
        ex.execute("SELECT count(*) FROM rt WHERE ts >= 1700000001000")
    assert e.value.owner == "owner:1"
    # A local table's timestamps compared so are read here as ever.
    assert ex.execute("SELECT count(*) AS n FROM lt WHERE ts >= 1700000001000").table()[
        "n"
    ].to_pylist() == [4]
