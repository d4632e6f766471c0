"""A request writing several tables, one of which starts moving after another was written:
the ingestor says which tables it stored (MovedPartway), so that only the others are sent on
and nothing is stored twice."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gnomon.errors import MovedPartway, NotOwner, Unavailable
from node.backends import open_standalone
from node.engine.engine import Engine
from node.ingest import line_protocol
from node.ingest.writer import Ingestor

pytestmark = pytest.mark.unit

BODY = "a,h=x v=1 {ts}\nb,h=x v=2 {ts}\nc,h=x v=3 {ts}"


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    e = open_standalone(str(tmp_path / "db"), compaction_check_interval_s=0, gc_interval_s=0)
    yield e
    e.close()


def _counts(engine: Engine) -> list[int]:
    return [engine.read_all(t).num_rows for t in "abc"]


def test_a_table_moving_after_another_was_written_is_named_with_what_was_stored(
    engine: Engine,
) -> None:
    ingest = Ingestor(engine)
    assert ingest.write_all(line_protocol.parse(BODY.format(ts=1), precision="ms")) == 3
    engine.table("b").stop_writes(NotOwner("shard 1 is being moved", shard_id=1))
    with pytest.raises(MovedPartway) as moved:
        ingest.write_all(line_protocol.parse(BODY.format(ts=2), precision="ms"))
    assert moved.value.written == {"a"} and moved.value.rows == 1
    assert moved.value.shard_id == 1
    assert "'a' were written" in moved.value.message
    assert _counts(engine) == [2, 1, 1]


def test_the_first_table_moving_is_a_plain_not_owner(engine: Engine) -> None:
    ingest = Ingestor(engine)
    ingest.write_all(line_protocol.parse(BODY.format(ts=1), precision="ms"))
    engine.table("a").stop_writes(NotOwner("shard 1 is being moved", shard_id=1))
    with pytest.raises(NotOwner) as moved:
        ingest.write_all(line_protocol.parse(BODY.format(ts=2), precision="ms"))
    assert not isinstance(moved.value, MovedPartway)
    assert _counts(engine) == [1, 1, 1]


def test_a_table_let_go_of_right_after_its_write_still_counts_as_written(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ingestor keeps each table it wrote for the next write's fast path, looking it up
    after writing; a table let go of in between (a split took it) answers that look-up with
    NotOwner. The rows were written: the write must say so, not NotOwner, on which servers
    write the rows again at the table's new home (the chaos test found them stored twice)."""
    Ingestor(engine).write_all(line_protocol.parse(BODY.format(ts=1), precision="ms"))
    ingest = Ingestor(engine)

    def let_go(name: str) -> object:
        raise NotOwner(f"table {name!r} is in shard 2, served by elsewhere:1")

    monkeypatch.setattr(ingest.tables, "table", let_go)
    assert ingest.write_all(line_protocol.parse(BODY.format(ts=2), precision="ms")) == 3
    assert _counts(engine) == [2, 2, 2]


def test_a_table_named_twice_and_stored_in_part_is_no_not_owner(engine: Engine) -> None:
    """Requests a, b, a (a gRPC write may name a table twice): "b" moving after the first
    "a" was stored leaves "a" stored in part, which no list of tables written can say, so
    the answer is neither NotOwner nor MovedPartway: sending the rest on would skip or
    double rows of "a"."""
    ingest = Ingestor(engine)
    ingest.write_all(line_protocol.parse(BODY.format(ts=1), precision="ms"))
    engine.table("b").stop_writes(NotOwner("shard 1 is being moved", shard_id=1))
    rows = [
        *line_protocol.parse("a,h=x v=1 5", precision="ms"),
        *line_protocol.parse("b,h=x v=2 5", precision="ms"),
        *line_protocol.parse("a,h=y v=3 5", precision="ms"),
    ]
    with pytest.raises(Unavailable, match="stored in part") as failed:
        ingest.write_all(rows)
    assert not isinstance(failed.value, NotOwner)
    assert _counts(engine) == [2, 1, 1]
