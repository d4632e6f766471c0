"""A shard keeper's passes while the meta service moves tables between shards: what it opens
when its view of the placement is a moment old. Two engines share what a cluster shares
(catalog, manifests, SSTs, WAL regions) and stand for two nodes; the meta service's answers
are set by the test, so the pass sees exactly the interleaving a loaded cluster produced."""

from __future__ import annotations

from typing import cast

import pytest

from gnomon.proto import meta_pb2 as pb
from meta.client import MetaClient
from meta.model import ShardStatus
from node.cluster import tables
from node.cluster.keeper import ShardKeeper
from node.engine.engine import Engine
from node.engine.options import TableOptions

from .conftest import CPU, cpu_batch

pytestmark = pytest.mark.unit

A, B = "127.0.0.1:1", "127.0.0.1:2"
TABLE_ID = 7


class Placement:
    """The meta service's answers to a pass, as the test sets them."""

    def __init__(self) -> None:
        self.shard_infos: list[pb.ShardInfo] = []
        self.table_infos: list[pb.TableInfo] = []

    def shards(self) -> list[pb.ShardInfo]:
        return list(self.shard_infos)

    def tables(self) -> list[pb.TableInfo]:
        return list(self.table_infos)

    def set(self, shards: dict[int, tuple[str, int, bool]], table_shard: int) -> None:
        """``shards``: id -> (leader, epoch, busy); the table ``mv`` placed in ``table_shard``."""
        self.shard_infos = [
            pb.ShardInfo(
                id=sid,
                leader=leader,
                epoch=epoch,
                status=(ShardStatus.BUSY if busy else ShardStatus.READY).value,
            )
            for sid, (leader, epoch, busy) in shards.items()
        ]
        schema = tables.encode(CPU, TableOptions())
        self.table_infos = [
            pb.TableInfo(id=TABLE_ID, name="mv", schema=schema, shard_id=table_shard)
        ]


def _keeper(engine: Engine, name: str, placement: Placement) -> ShardKeeper:
    return ShardKeeper(engine, cast(MetaClient, placement), name, lease=lambda: True)


def _usages(engine: Engine) -> list[float]:
    return sorted(cast(list[float], engine.read_all("mv").column("usage").to_pylist()))


def test_a_table_let_go_of_for_a_merge_is_not_opened_again_in_its_old_shard(
    nodes: tuple[Engine, Engine],
) -> None:
    """Node B leads shard 1 holding ``mv``; a merge moves ``mv`` into shard 0, led by A. B lets
    go of it, A opens it in shard 0 as soon as the move is recorded (and so forgets B's
    release), and a pass of B that read the placement before the move opens shard 1 after
    that. Were ``mv`` opened in shard 1 again, two nodes would take its writes into two logs
    and each commit against the other's view: acknowledged rows went missing so."""
    a, b = nodes
    placement = Placement()
    keeper_b = _keeper(b, B, placement)
    placement.set({0: (A, 3, False), 1: (B, 2, False)}, table_shard=1)
    keeper_b.reconcile()
    b.write("mv", cpu_batch(["h"], [1], [1.0]))

    # The merge holds both shards; B lets go of the table, which is flushed.
    placement.set({0: (A, 3, True), 1: (B, 2, True)}, table_shard=1)
    assert keeper_b.release(1, 2, [TABLE_ID]) == ["mv"]
    # The move is recorded and A opens the table in shard 0 while B's next pass still has
    # the placement from before the move.
    a.open_shard(0, epoch=3, table_ids=[TABLE_ID])
    keeper_b.reconcile()
    assert b.shard_tables() == {1: set()}, "a table let go of was opened in its old shard"

    a.write("mv", cpu_batch(["h"], [2], [2.0]))
    # The merge ends: shard 1 is dropped, and B closes it.
    placement.set({0: (A, 3, False)}, table_shard=0)
    keeper_b.reconcile()
    assert b.shard_tables() == {}
    assert _usages(a) == [1.0, 2.0]


def test_tables_placed_in_a_held_shard_open_while_its_procedure_runs(
    nodes: tuple[Engine, Engine],
) -> None:
    """The other half: a table moved into (or created in) a shard a procedure holds opens at
    the next pass, as its placement is recorded only after its old home let go of it; waiting
    for the procedure would refuse its writes on its owner until then."""
    a, b = nodes
    placement = Placement()
    keeper_a = _keeper(a, A, placement)
    placement.set({0: (A, 3, False), 1: (B, 2, False)}, table_shard=1)
    b.define_table("mv", CPU, TableOptions(), table_id=TABLE_ID)
    b.open_shard(1, epoch=2, table_ids=[TABLE_ID])
    b.write("mv", cpu_batch(["h"], [1], [1.0]))
    keeper_a.reconcile()
    assert a.shard_tables() == {0: set()}

    assert b.release(1, 2, [TABLE_ID]) == ["mv"]
    placement.set({0: (A, 3, True), 1: (B, 2, True)}, table_shard=0)
    keeper_a.reconcile()
    assert a.shard_tables() == {0: {"mv"}}
    a.write("mv", cpu_batch(["h"], [2], [2.0]))

    placement.set({0: (A, 3, False)}, table_shard=0)
    keeper_a.reconcile()
    assert a.shard_tables() == {0: {"mv"}}
    assert _usages(a) == [1.0, 2.0]
