"""Concurrent small writes of one table go to the engine as one write: one WAL record (and
fsync) for the group, each writer answered only once that record is durable, and a write the
engine refuses does not take the rest of its group down with it; so for writes as Arrow and as
plain values (node/engine/plain.py) alike."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gnomon.errors import InvalidArgument
from gnomon.wal.api import Ticket
from gnomon.wal.region_wal import RegionWal
from node.backends import open_standalone
from node.engine.engine import Engine
from node.engine.schema import Column, ColumnType, Schema
from node.ingest import line_protocol
from node.ingest.writer import Ingestor

pytestmark = pytest.mark.unit

#: Bound on every wait here; none is expected to come near it.
WAIT_S = 10.0


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    e = open_standalone(
        str(tmp_path / "db"), wal_sync="always", compaction_check_interval_s=0, gc_interval_s=0
    )
    yield e
    e.close()


def _queued(ingest: Ingestor, table: str) -> int:
    """Writes queued in the table's combiners (of Arrow and of plain writes)."""
    plain = ingest._plain_combiners.get(table)
    combiners = [ingest._combiners.get(table), None if plain is None else plain[1]]
    return sum(len(c._queue) for c in combiners if c is not None)


def _run_held(
    ingest: Ingestor, monkeypatch: pytest.MonkeyPatch, table: str, bodies: list[str]
) -> tuple[list[int], dict[int, object]]:
    """Write each of ``bodies`` from its own thread while the WAL write of the first one is
    held until the others are queued behind it; returns the table ids of the WAL records
    written and each body's answer (rows written or the error)."""
    records: list[int] = []
    held, release = threading.Event(), threading.Event()
    append = RegionWal.append

    def counting(
        self: RegionWal[Any], region_id: int, table_id: int, payload: bytes, **how: bool
    ) -> Ticket:
        records.append(table_id)
        if len(records) == 1:
            held.set()
            assert release.wait(WAIT_S)
        return append(self, region_id, table_id, payload, **how)

    monkeypatch.setattr(RegionWal, "append", counting)
    answers: dict[int, object] = {}

    def one(i: int) -> None:
        try:
            answers[i] = ingest.write(line_protocol.parse(bodies[i], precision="ms")[0])
        except InvalidArgument as e:
            answers[i] = e

    first = threading.Thread(target=one, args=(0,))
    first.start()
    assert held.wait(WAIT_S)
    rest = [threading.Thread(target=one, args=(i,)) for i in range(1, len(bodies))]
    for t in rest:
        t.start()
    deadline = time.monotonic() + WAIT_S
    while _queued(ingest, table) < len(rest) and time.monotonic() < deadline:
        time.sleep(0.005)
    # Nobody is answered before its record is durable.
    assert answers == {}
    release.set()
    for t in [first, *rest]:
        t.join(WAIT_S)
    monkeypatch.undo()
    return records, answers


def test_concurrent_small_writes_share_one_wal_record(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    ingest = Ingestor(engine)
    ingest.write(line_protocol.parse("t,host=a v=0 1", precision="ms")[0])
    bodies = [f"t,host=h{i} v={i} {i + 10}" for i in range(16)]
    records, answers = _run_held(ingest, monkeypatch, "t", bodies)
    assert answers == {i: 1 for i in range(16)}
    assert "t" in ingest._plain_combiners  # written as plain values
    # The first write alone, then the fifteen queued behind it together.
    assert len(records) == 2
    got = engine.read_all("t").sort_by("timestamp")
    assert got.column("host").to_pylist() == ["a", *(f"h{i}" for i in range(16))]


@pytest.mark.parametrize("plain", [False, True], ids=["arrow", "plain"])
def test_a_refused_write_leaves_the_rest_of_its_group_written(
    engine: Engine, monkeypatch: pytest.MonkeyPatch, plain: bool
) -> None:
    engine.create_table(
        "t",
        Schema.build(
            [
                Column("host", ColumnType.STRING, is_tag=True),
                Column("need", ColumnType.DOUBLE, nullable=False),
                Column("v", ColumnType.DOUBLE),
                Column("ts", ColumnType.TIMESTAMP),
            ],
            timestamp_key="ts",
        ),
    )
    ingest = Ingestor(engine)
    if plain:
        # A table written through the ingestor before takes small writes as plain values.
        ingest.write(line_protocol.parse("t,host=z need=1 0", precision="ms")[0])
    bodies = [
        "t,host=a need=1,v=0 1",
        "t,host=b need=1,v=1 2",
        "t,host=c v=2 3",  # lacks the NOT NULL column: refused by the engine
        "t,host=d need=1,v=3 4",
    ]
    records, answers = _run_held(ingest, monkeypatch, "t", bodies)
    assert answers[0] == answers[1] == answers[3] == 1
    assert isinstance(answers[2], InvalidArgument) and "'need'" in answers[2].message
    assert set(engine.read_all("t").column("host").to_pylist()) == {"a", "b", "d"} | (
        {"z"} if plain else set()
    )
    # The group of three was refused whole, then written one by one.
    assert len(records) == 3
