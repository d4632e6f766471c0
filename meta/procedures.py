"""The steps of every kind of procedure.

A procedure is a persisted state machine (``meta_procedures``): its kind, its parameters and the
index of its next step. A step reads the in-memory state and returns a :class:`StepResult`; the
runner (``meta/runner.py``) commits the step's changes *together with* the procedure's advance in
one store transaction. A crash therefore leaves a step either wholly done and recorded or not
done at all, and after a restart the new leader simply runs the recorded next step: steps are
idempotent by construction, and each re-checks the state it acts on (a shard whose epoch moved
since the plan is left alone).

Kinds:

- ``failover``, ``assign``, ``rebalance``, ``migrate``, ``switch_role``, ``add_follower``
  move shards (params
  ``moves``, see :class:`~meta.planner.Move`; ``node``, the offline node of a failover):
  *lock* the shards, ask each live leader that loses one to *let go* of it (it flushes and
  closes it, so the next leader replays little), *apply* the new leaders and followers (epoch
  + 1 on a leader change; ``migrate`` and ``switch_role`` pin the shard to its new leader),
  *release* them.
- ``split`` (params ``shard``): *prepare* a new shard on the same nodes and pick the half of
  the tables that go there, have the leader *let go* of those tables, *move* them (100 per
  step), *release* both.
- ``merge`` (params ``shard``, ``other``): *lock* both, have the other's leader *let go* of
  its tables, *move* them in (100 per step), *drop* the other shard and release.

Letting go is the one step that calls a data node (:mod:`gnomon.shard_control`); the runner
makes the call outside its lock, then records the step. A table re-homed by a split or merge
has its unflushed rows in the WAL region of its old shard, which its new shard's owner never
reads: so its old owner must have flushed it and stopped writing it first, and a split or
merge whose shard has no reachable leader fails (and lets go of its shards) instead.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from typing import Any

from gnomon.errors import Conflict, GnomonError, InvalidArgument, NotFound, Unavailable
from gnomon.shard_control import NodeCalls
from meta.events import ShardEvent, changed, opened
from meta.model import Procedure, Shard, ShardStatus
from meta.planner import Move
from meta.state import ClusterState
from meta.store import NEXT_SHARD_ID
from meta.tables import Batch

log = logging.getLogger("gnomon.meta.procedures")

#: Tables re-homed per step by split and merge (one store transaction each).
TABLES_PER_STEP = 100

#: Leaders asked to let go of shards at once by one step.
RELEASES_IN_PARALLEL = 8
#: How often a release in progress asks whether its node still holds its lease.
LEASE_WATCH_S = 0.5

#: Kinds whose moves are an operator's: their new leader holds (``Shard.pinned``).
OPERATOR_MOVES = frozenset({"migrate", "switch_role"})


@dataclass
class StepResult:
    batch: Batch = field(default_factory=Batch)
    events: list[ShardEvent] = field(default_factory=list)
    #: New parameters to persist (None keeps them).
    params: dict[str, Any] | None = None
    #: Run this step again next (a step working through a list in chunks).
    repeat: bool = False
    #: Calls to data nodes, made outside the runner's lock before the step is recorded; an
    #: error fails the procedure.
    act: Callable[[NodeCalls], None] | None = None


Step = Callable[[ClusterState, Procedure], StepResult]


def _moves(proc: Procedure) -> list[Move]:
    return [Move.from_json(m) for m in proc.params.get("moves", [])]


def _lockable(shard: Shard | None, proc: Procedure) -> bool:
    return shard is not None and (
        shard.status is not ShardStatus.BUSY or shard.procedure == proc.id
    )


def _locked(shard: Shard, proc: Procedure) -> Shard:
    return replace(shard, status=ShardStatus.BUSY, procedure=proc.id)


def _released(shard: Shard) -> Shard:
    status = ShardStatus.READY if shard.leader else ShardStatus.UNASSIGNED
    return replace(shard, status=status, procedure=None)


def release_all(state: ClusterState, proc: Procedure) -> Batch:
    """Unlock every shard ``proc`` holds (a failed procedure must not keep them busy)."""
    held = [s for s in state.shards.values() if s.procedure == proc.id]
    return Batch(shards=[_released(s) for s in held])


# -- moving shards --------------------------------------------------------------------------------


def lock_moves(state: ClusterState, proc: Procedure) -> StepResult:
    kept: list[Move] = []
    result = StepResult()
    for m in _moves(proc):
        shard = state.shards.get(m.shard_id)
        if shard is None or shard.epoch != m.epoch or not _lockable(shard, proc):
            continue  # changed since planned: the next scheduling round looks again
        kept.append(m)
        result.batch.shards.append(_locked(shard, proc))
    node = state.nodes.get(proc.params.get("node") or "")
    if node is not None and node.online and node.name not in state.live:
        result.batch.nodes.append(replace(node, online=False))
    result.params = {**proc.params, "moves": [m.to_json() for m in kept]}
    return result


def let_go_of_moves(state: ClusterState, proc: Procedure) -> StepResult:
    """Ask each live leader losing a shard to let go of it first. One that cannot be reached
    loses it all the same: the epoch fence keeps it from writing once the next leader opens."""
    asks = []
    for m in _moves(proc):
        shard = state.shards.get(m.shard_id)
        if (
            shard is not None
            and shard.procedure == proc.id
            and shard.leader
            and shard.leader != m.leader
            and shard.leader in state.live
        ):
            asks.append((shard.leader, shard.id, shard.epoch))

    def act(calls: NodeCalls) -> None:
        def ask(node: str, shard_id: int, epoch: int) -> None:
            try:
                calls.release(node, shard_id, epoch, None)
            except GnomonError as e:
                log.warning(
                    "leader did not let go of its shard; moving it anyway (fenced)",
                    extra={"procedure": proc.id, "shard": shard_id, "node": node, "error": str(e)},
                )

        # A leader that stops answering (paused, cut off) would hold a release until its
        # deadline, and the shards moved with it as long, while the round that would fail
        # them over waits for this procedure. Once its lease lapses (asked of the lease
        # store: the round's view is stale meanwhile) it is passed over, as an unreachable
        # leader already is.
        pool = ThreadPoolExecutor(RELEASES_IN_PARALLEL, thread_name_prefix="gnomon-release")
        try:
            pending = {pool.submit(ask, *a): a for a in asks}
            while pending:
                done, _ = wait(pending, timeout=LEASE_WATCH_S)
                for f in done:
                    f.result()
                    del pending[f]
                if not pending:
                    break
                leased = state.leases()
                for f, (node, shard_id, _) in list(pending.items()):
                    if node not in leased:
                        log.warning(
                            "leader's lease lapsed while it let go of its shard; moving it "
                            "anyway (fenced)",
                            extra={"procedure": proc.id, "shard": shard_id, "node": node},
                        )
                        del pending[f]
        finally:
            pool.shutdown(wait=False)

    return StepResult(act=act if asks else None)


def _let_go_of_tables(state: ClusterState, shard_id: int, table_ids: Sequence[int]) -> StepResult:
    """Have the leader of ``shard_id`` flush ``table_ids`` and stop writing them (they are
    about to move to another shard); fails without a leader that answers."""
    shard = _shard(state, shard_id)
    if not table_ids:
        return StepResult()
    leader = shard.leader
    if not leader or leader not in state.live:
        raise Unavailable(
            f"shard {shard_id} has no live leader to flush its tables before they move; "
            "retry once it has one"
        )

    def act(calls: NodeCalls) -> None:
        calls.release(leader, shard_id, shard.epoch, table_ids)

    return StepResult(act=act)


def apply_moves(state: ClusterState, proc: Procedure) -> StepResult:
    """The new leaders and followers. An operator's choice of leader pins the shard there;
    any other change of leader (a failover) ends the pin."""
    result = StepResult()
    by_operator = proc.kind in OPERATOR_MOVES
    for m in _moves(proc):
        shard = state.shards.get(m.shard_id)
        if shard is None or shard.procedure != proc.id:
            continue
        same_leader = m.leader == shard.leader
        new = replace(
            shard,
            leader=m.leader,
            followers=m.followers,
            epoch=shard.epoch if same_leader else shard.epoch + 1,
            pinned=by_operator or (shard.pinned and same_leader),
        )
        result.batch.shards.append(new)
        result.events.extend(changed(shard, new))
    return result


def release_moves(state: ClusterState, proc: Procedure) -> StepResult:
    return StepResult(batch=release_all(state, proc))


# -- split ----------------------------------------------------------------------------------------


def _shard(state: ClusterState, shard_id: int) -> Shard:
    shard = state.shards.get(shard_id)
    if shard is None:
        raise NotFound(f"shard {shard_id} does not exist")
    return shard


def prepare_split(state: ClusterState, proc: Procedure) -> StepResult:
    shard = _shard(state, proc.params["shard"])
    if not _lockable(shard, proc):
        raise Conflict(f"shard {shard.id} is busy with procedure {shard.procedure}")
    tables = sorted(state.shard_tables.get(shard.id, ()))
    new_id = state.counter(NEXT_SHARD_ID)
    new = Shard(new_id, shard.leader, shard.followers, 1, ShardStatus.BUSY, proc.id)
    batch = Batch(shards=[_locked(shard, proc), new], counters={NEXT_SHARD_ID: new_id + 1})
    moving = tables[len(tables) // 2 :]
    return StepResult(batch, params={**proc.params, "new_shard": new_id, "tables": moving})


def _rehome(state: ClusterState, proc: Procedure, table_ids: Sequence[int], to: int) -> StepResult:
    """Move the first chunk of ``table_ids`` to shard ``to``; repeat while more remain."""
    chunk, rest = list(table_ids[:TABLES_PER_STEP]), list(table_ids[TABLES_PER_STEP:])
    tables = [replace(state.tables[t], shard_id=to) for t in chunk if t in state.tables]
    return StepResult(
        Batch(tables=tables), params={**proc.params, "tables": rest}, repeat=bool(rest)
    )


def let_go_of_split_tables(state: ClusterState, proc: Procedure) -> StepResult:
    return _let_go_of_tables(state, proc.params["shard"], proc.params["tables"])


def move_split_tables(state: ClusterState, proc: Procedure) -> StepResult:
    return _rehome(state, proc, proc.params["tables"], proc.params["new_shard"])


def release_split(state: ClusterState, proc: Procedure) -> StepResult:
    result = StepResult(batch=release_all(state, proc))
    new = state.shards.get(proc.params["new_shard"])
    if new is not None:
        result.events = changed(replace(new, leader=None, followers=()), new)
    # The shard split keeps its nodes, but nodes must hear of it too: their routes still
    # place the moved tables there, and its followers copy fewer tables now.
    old = state.shards.get(proc.params["shard"])
    if old is not None:
        result.events.extend(opened(old))
    return result


# -- merge ----------------------------------------------------------------------------------------


def lock_merge(state: ClusterState, proc: Procedure) -> StepResult:
    shard, other = _shard(state, proc.params["shard"]), _shard(state, proc.params["other"])
    if shard.id == other.id:
        raise InvalidArgument(f"cannot merge shard {shard.id} with itself")
    for s in (shard, other):
        if not _lockable(s, proc):
            raise Conflict(f"shard {s.id} is busy with procedure {s.procedure}")
    return StepResult(Batch(shards=[_locked(shard, proc), _locked(other, proc)]))


def let_go_of_merged_tables(state: ClusterState, proc: Procedure) -> StepResult:
    other = proc.params["other"]
    return _let_go_of_tables(state, other, sorted(state.shard_tables.get(other, ())))


def move_merge_tables(state: ClusterState, proc: Procedure) -> StepResult:
    other = proc.params["other"]
    remaining = sorted(state.shard_tables.get(other, ()))
    return _rehome(state, proc, remaining, proc.params["shard"])


def drop_merged(state: ClusterState, proc: Procedure) -> StepResult:
    result = StepResult()
    other = state.shards.get(proc.params["other"])
    if other is not None:
        result.batch.dropped_shards.append(other.id)
        result.events = changed(other, replace(other, leader=None, followers=()))
    shard = state.shards.get(proc.params["shard"])
    if shard is not None and shard.procedure == proc.id:
        result.batch.shards.append(_released(shard))
        # Its followers copy the tables it took in.
        result.events.extend(opened(shard))
    return result


_MOVE_STEPS: tuple[Step, ...] = (lock_moves, let_go_of_moves, apply_moves, release_moves)

#: Kind -> its steps, in order.
KINDS: dict[str, tuple[Step, ...]] = {
    "failover": _MOVE_STEPS,
    "assign": _MOVE_STEPS,
    "rebalance": _MOVE_STEPS,
    "migrate": _MOVE_STEPS,
    "switch_role": _MOVE_STEPS,
    "add_follower": _MOVE_STEPS,
    "split": (prepare_split, let_go_of_split_tables, move_split_tables, release_split),
    "merge": (lock_merge, let_go_of_merged_tables, move_merge_tables, drop_merged),
}
