"""The forwarding ingestor without a cluster: an entry node whose placer says the ``far_*``
tables live on another node sends their rows to an in-process owner's Flight endpoint as
ingest puts, writes the rest itself, and reports what each part did: the owner's refusals
named, a request partly stored never passed off as refused whole, a forwarded request
never sent on."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from gnomon.errors import InvalidArgument, NotOwner, Status, Unavailable
from gnomon.flight.client import gnomon_error
from gnomon.flight.ticket import PutSpec
from node.backends import Storage, open_engine, open_standalone
from node.cluster import rows_wire
from node.cluster.ingest_forward import ForwardingIngestor, Owners, PartlyWritten
from node.cluster.router import LocalRouter
from node.cluster.routes import Route
from node.engine.engine import Engine
from node.engine.options import TableOptions
from node.engine.placement import LocalPlacer, Placed
from node.engine.schema import Schema
from node.engine.shard import STANDALONE_SHARD
from node.ingest import line_protocol
from node.ingest.writer import Ingestor
from node.server.flight import FlightService
from testkit.procs import free_port

pytestmark = pytest.mark.unit

OWNER = "owner:1"


class _Elsewhere(LocalPlacer):
    """The entry node's placer: new ``far_*`` tables go to a shard ``OWNER`` serves."""

    def __init__(self) -> None:
        self.placed: set[str] = set()

    def place(self, name: str, schema: Schema, options: TableOptions) -> Placed:
        if not name.startswith("far_"):
            return super().place(name, schema, options)
        self.placed.add(name)
        return Placed(STANDALONE_SHARD + 1, 1000 + len(self.placed), OWNER)

    def locate(self, name: str, *, fresh: bool = False) -> Placed | None:
        return Placed(STANDALONE_SHARD + 1, 99, OWNER) if name in self.placed else None


class _Routes(LocalRouter):
    """The entry node's routes: the tables ``placer`` placed are at ``OWNER``, whose Flight
    endpoint is ``flight_at``."""

    def __init__(self, placer: _Elsewhere, flight_at: str) -> None:
        super().__init__()
        self.placer = placer
        self.flight_at = flight_at
        self.moved: list[NotOwner] = []

    def remote_routes(self, tables: Sequence[str]) -> dict[str, Route]:
        return {
            t: Route(t, 99, STANDALONE_SHARD + 1, OWNER, 1, {"flight": self.flight_at})
            for t in tables
            if t in self.placer.placed
        }

    def owner_moved(self, error: NotOwner) -> None:
        self.moved.append(error)


@pytest.fixture
def owner(tmp_path: Path) -> Iterator[tuple[Engine, FlightService]]:
    engine = open_standalone(str(tmp_path / "owner"))
    writer = ForwardingIngestor(Ingestor(engine), LocalRouter(), None)
    service = FlightService(engine, port=0, ingestor=writer)
    yield engine, service
    service.shutdown()
    engine.close()


def _entry(tmp_path: Path, flight_at: str, owners: Owners) -> tuple[Engine, ForwardingIngestor]:
    placer = _Elsewhere()
    engine = open_engine(str(tmp_path / "entry"), Storage(), placer=placer)
    engine.open_shard(STANDALONE_SHARD)
    return engine, ForwardingIngestor(Ingestor(engine), _Routes(placer, flight_at), owners)


@pytest.fixture
def entry(
    tmp_path: Path, owner: tuple[Engine, FlightService]
) -> Iterator[tuple[Engine, ForwardingIngestor]]:
    owners = Owners("entry:1")
    engine, writer = _entry(tmp_path, f"127.0.0.1:{owner[1].port}", owners)
    yield engine, writer
    owners.close()
    engine.close()


def _rows(engine: Engine, table: str) -> list[dict[str, object]]:
    data = pa.Table.from_batches(list(engine.scan(table)))
    return data.drop_columns(["tsid"]).sort_by("timestamp").to_pylist()


def test_each_part_is_written_by_its_owner(
    owner: tuple[Engine, FlightService], entry: tuple[Engine, ForwardingIngestor]
) -> None:
    engine, writer = entry
    text = (
        "near,host=a v=1 1000\n"
        "far_cpu,host=a usage=0.5,n=3i 1000\nfar_cpu,host=b usage=1.5 2000\n"
        "far_mem,dc=eu,host=c free=7u,ok=true 3000"
    )
    assert writer.write_all(line_protocol.parse(text, precision="ms")) == 4
    assert [(r["host"], r["v"]) for r in _rows(engine, "near")] == [("a", 1.0)]
    # Created at the owner, typed by the rows, tags as tags.
    schema = owner[0].describe("far_cpu").schema
    assert [(c.name, c.type.value, c.is_tag) for c in schema.columns if c.name != "tsid"] == [
        ("timestamp", "timestamp", False),
        ("host", "string", True),
        ("n", "int64", False),
        ("usage", "double", False),
    ]
    assert [(r["host"], r["usage"], r["n"]) for r in _rows(owner[0], "far_cpu")] == [
        ("a", 0.5, 3),
        ("b", 1.5, None),
    ]
    assert [(r["dc"], r["free"], r["ok"]) for r in _rows(owner[0], "far_mem")] == [("eu", 7, True)]
    # A new field through the entry node: the owner adds the column.
    assert writer.write_all(line_protocol.parse("far_cpu,host=a idle=2 4000", precision="ms")) == 1
    assert owner[0].describe("far_cpu").schema.has_column("idle")


def test_a_refusal_by_the_owner_names_it_and_stores_nothing(
    owner: tuple[Engine, FlightService], entry: tuple[Engine, ForwardingIngestor]
) -> None:
    _, writer = entry
    writer.write_all(line_protocol.parse("far_t v=1 1000", precision="ms"))
    with pytest.raises(InvalidArgument, match=rf"column:v.*\(at {OWNER}\)"):
        writer.write_all(line_protocol.parse('far_t v="text" 2000', precision="ms"))
    assert len(_rows(owner[0], "far_t")) == 1


def test_a_request_stored_in_part_says_so_and_is_no_refusal(
    owner: tuple[Engine, FlightService], entry: tuple[Engine, ForwardingIngestor]
) -> None:
    engine, writer = entry
    writer.write_all(line_protocol.parse("far_t v=1 1000", precision="ms"))
    with pytest.raises(PartlyWritten) as caught:
        writer.write_all(line_protocol.parse('near v=1 1000\nfar_t v="text" 2000', precision="ms"))
    # A caller retrying refused writes one by one must not take it for one.
    assert not isinstance(caught.value, InvalidArgument)
    assert caught.value.status is Status.INVALID_ARGUMENT
    assert "'near' were written" in caught.value.message and OWNER in caught.value.message
    assert len(_rows(engine, "near")) == 1


def test_a_table_created_here_but_placed_elsewhere_after_the_split_reaches_its_owner(
    owner: tuple[Engine, FlightService], entry: tuple[Engine, ForwardingIngestor]
) -> None:
    """The request meets "not owner" at a table known elsewhere before creating its new
    one; that one, created as the part kept here, is placed on the owner too."""
    engine, writer = entry
    writer.write_all(line_protocol.parse("far_old v=1 1000", precision="ms"))
    routes = writer.router
    assert isinstance(routes, _Routes) and not routes.moved
    text = "far_old v=2 2000\nfar_new,host=h w=3i 3000\nnear v=4 4000"
    assert writer.write_all(line_protocol.parse(text, precision="ms")) == 3
    assert len(routes.moved) == 1
    assert [r["w"] for r in _rows(owner[0], "far_new")] == [3]
    assert len(_rows(owner[0], "far_old")) == 2
    assert [r["v"] for r in _rows(engine, "near")] == [4.0]


def test_rows_that_do_not_fit_their_type_are_refused_before_anything_is_written(
    entry: tuple[Engine, ForwardingIngestor],
) -> None:
    engine, writer = entry
    writer.write_all(line_protocol.parse("far_t v=1 1000", precision="ms"))
    rows = line_protocol.parse("near v=1 1000\nfar_t v=2 2000", precision="ms")
    rows[1].columns["v"].values = ["not a number"]
    with pytest.raises(InvalidArgument, match="table 'far_t', column 'v'"):
        writer.write_all(rows)
    assert "near" not in engine.list_tables()


def test_a_forwarded_request_is_never_sent_on(
    entry: tuple[Engine, ForwardingIngestor],
) -> None:
    _, writer = entry
    with pytest.raises(NotOwner, match=OWNER):
        writer.write_all(line_protocol.parse("far_t v=1 1000", precision="ms"), forwarded=True)


def test_an_unreachable_owner_is_named(tmp_path: Path) -> None:
    owners = Owners("entry:1", timeout_s=5)
    engine, writer = _entry(tmp_path, f"127.0.0.1:{free_port()}", owners)
    try:
        with pytest.raises(Unavailable, match=rf"\(at {OWNER}\)"):
            writer.write_all(line_protocol.parse("far_t v=1 1000", precision="ms"))
    finally:
        owners.close()
        engine.close()


def _put(port: int, spec: PutSpec, data: pa.Table) -> int:
    client = flight.connect(f"grpc+tcp://127.0.0.1:{port}")
    try:
        writer, reader = client.do_put(
            flight.FlightDescriptor.for_command(spec.to_json()), data.schema
        )
        with writer:
            writer.write_table(data)
            writer.done_writing()
            ack = reader.read()  # type: ignore[attr-defined]
        return int(ack is not None)
    except flight.FlightError as e:
        raise gnomon_error(e) from None
    finally:
        client.close()


def test_an_ingest_put_that_is_not_of_the_form_is_refused(
    owner: tuple[Engine, FlightService],
) -> None:
    data = pa.table({"v": [1.0]})
    with pytest.raises(InvalidArgument, match="start with the timestamps"):
        _put(owner[1].port, PutSpec(table="t", ingest=True), data)
    assert "t" not in owner[0].list_tables()


def test_an_ingest_put_is_refused_where_no_ingestor_serves(tmp_path: Path) -> None:
    engine = open_standalone(str(tmp_path / "plain"))
    service = FlightService(engine, port=0)
    try:
        rows = line_protocol.parse("t v=1 1000", precision="ms")[0]
        with pytest.raises(InvalidArgument, match="takes no ingest puts"):
            _put(service.port, PutSpec(table="t", ingest=True), rows_wire.encode(rows))
    finally:
        service.shutdown()
        engine.close()


def test_put_descriptors_without_ingest_are_what_they_were() -> None:
    assert PutSpec(table="t", revision=3).to_json() == b'{"table": "t", "revision": 3}'
    spec = PutSpec(table="t", ingest=True, forwarded_from="a:1")
    assert PutSpec.from_json(spec.to_json()) == spec


@pytest.mark.parametrize(
    ("doc", "problem"),
    [
        (b'{"table": "t", "ingest": true, "revision": 2}', "takes no revision"),
        (b'{"table": "t", "forwarded_from": "a:1"}', "for ingest puts only"),
        (b'{"table": "t", "ingest": "yes"}', "ingest: Input should be a valid boolean"),
    ],
)
def test_inconsistent_put_descriptors_are_refused(doc: bytes, problem: str) -> None:
    with pytest.raises(InvalidArgument, match=problem):
        PutSpec.from_json(doc)
