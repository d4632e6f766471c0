"""Keeps the shards open on this node equal to what the meta service says it leads.

Level-triggered: every pass compares the meta service's shard table with the engine's open
shards and acts on the difference, so a lost event, a restart of this node or of the meta
leader, or a failover that happened while this node was paused all end in the same state.
Shard events only make the next pass come sooner.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Collection

from gnomon.errors import Conflict, GnomonError, InvalidArgument, NotFound, NotOwner
from gnomon.proto import meta_pb2 as pb
from meta.client import MetaClient
from meta.model import ShardStatus
from node.cluster import tables
from node.engine.engine import Engine

log = logging.getLogger("gnomon.node.keeper")


class ShardKeeper:
    def __init__(
        self,
        engine: Engine,
        client: MetaClient,
        name: str,
        *,
        lease: Callable[[], bool],
        interval_s: float = 2.0,
        on_event: Callable[[pb.ShardEvent], None] = lambda _e: None,
        on_pass: Callable[[float], None] = lambda _started: None,
    ) -> None:
        self.engine = engine
        self.client = client
        self.name = name
        self._lease = lease
        self._interval_s = interval_s
        #: Told of every node's shard events (route caches drop the shard's routes).
        self._on_event = on_event
        #: Told when a pass ends, with the monotonic time it began (see LeaseClock.caught_up).
        self._on_pass = on_pass
        self._wake = threading.Event()
        # One pass at a time: the loop's and those requests ask for (see MetaPlacer).
        self._pass = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        #: Passes completed (tests wait on it).
        self.passes = 0
        #: Ids of table records warned about as impossible to open here.
        self._undefinable: set[int] = set()

    def start(self) -> None:
        self.reconcile()
        for target, name in ((self._loop, "keeper"), (self._watch, "keeper-watch")):
            t = threading.Thread(target=target, name=f"gnomon-{name}", daemon=True)
            t.start()
            self._threads.append(t)

    def stop(self) -> None:
        """Stop passes (waiting for one running). The watch ends when its client closes."""
        self._stop.set()
        self._wake.set()
        for t in self._threads:
            if t.name == "gnomon-keeper":
                t.join(timeout=10)

    def poke(self) -> None:
        """Reconcile soon (a shard event arrived, or a request found a table missing)."""
        self._wake.set()

    def _watch(self) -> None:
        try:
            for event in self.client.watch_shards():
                if self._stop.is_set():
                    return
                self._on_event(event)
                if event.node == self.name:
                    self._wake.set()
        except GnomonError as e:  # the periodic pass still runs
            log.warning("shard watch ended", extra={"node": self.name, "error": str(e)})

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self._interval_s)
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                self.reconcile()
            except GnomonError as e:
                if self._stop.is_set():
                    return  # the meta client closed for the stop
                log.warning("shard pass failed", extra={"node": self.name, "error": str(e)})

    def release(self, shard_id: int, epoch: int, table_ids: Collection[int] | None) -> list[str]:
        """The meta service is about to move the shard (or those of its tables) elsewhere:
        let go of it now (see :meth:`Engine.release`). Between passes, so that a pass that
        read the shard before its procedure took it cannot open it again."""
        with self._pass:
            return self.engine.release(shard_id, epoch, table_ids)

    def reconcile(self) -> None:
        """One pass: close shards this node no longer leads (or leads at another epoch), open
        those it leads, open tables created on its shards since, and follow the shards it is
        a follower of (and no others)."""
        with self._pass:
            started = time.monotonic()
            self._reconcile()
        self._on_pass(started)

    def _reconcile(self) -> None:
        shards = self.client.shards()
        # What was let go of for a move stays closed while the move's procedure holds the
        # shard; once it lets go (done or failed) the shard opens as the meta service says.
        busy = {s.id for s in shards if s.status == ShardStatus.BUSY.value}
        for shard_id in self.engine.held() - busy:
            self.engine.unhold(shard_id)
        wanted = {s.id: s.epoch for s in shards if s.leader == self.name}
        following = {
            s.id: s.leader or "" for s in shards if self.name in s.followers and s.id not in wanted
        }
        for shard_id, epoch in self.engine.shards().items():
            if wanted.get(shard_id) != epoch:
                self.engine.close_shard(shard_id)
        if not (wanted or following or self.engine.followed()):
            self.passes += 1
            return
        # Taken before asking the meta service: a table open now was placed before, so one
        # missing from the answer was dropped (one placed meanwhile is not in here).
        before = self._open_tables()
        by_shard: dict[int, list[pb.TableInfo]] = {}
        known: set[int] = set()
        for t in self.client.tables():
            known.add(t.id)
            if t.HasField("shard_id"):
                by_shard.setdefault(t.shard_id, []).append(t)
        for name, table_id in before.items():
            if table_id not in known:
                self._drop_forgotten(name)
        self._let_go_of_misplaced(before, by_shard, busy)
        # Leaders first: a follower promoted here takes its copies over in open_shard.
        for shard_id, epoch in sorted(wanted.items()):
            infos = self._defined(by_shard.get(shard_id, []))
            try:
                self.engine.open_shard(
                    shard_id, epoch=epoch, table_ids=[t.id for t in infos], lease=self._lease
                )
            except NotOwner:
                continue  # let go of for a move that is not over
        for shard_id in set(self.engine.followed()) - set(following):
            self.engine.unfollow_shard(shard_id)
        for shard_id, leader in sorted(following.items()):
            infos = self._defined(by_shard.get(shard_id, []))
            self.engine.follow_shard(shard_id, table_ids=[t.id for t in infos], leader=leader)
        self.passes += 1

    def _open_tables(self) -> dict[str, int]:
        ids = {}
        for name in self.engine.list_tables():
            with contextlib.suppress(NotFound):
                ids[name] = self.engine.describe(name).table_id
        return ids

    def _let_go_of_misplaced(
        self, open_now: dict[str, int], by_shard: dict[int, list[pb.TableInfo]], busy: set[int]
    ) -> None:
        """Tables open here in a shard the meta service no longer places them in. No move
        leaves one so (tables are let go of before they are re-homed), so each is a fault
        worth a warning: it is flushed (its rows acknowledged here reach the table's SSTs)
        and closed, as a move would have done."""
        placed = {t.id: shard_id for shard_id, infos in by_shard.items() for t in infos}
        epochs = self.engine.shards()
        for here, names in sorted(self.engine.shard_tables().items()):
            for name in sorted(names):
                table_id = open_now.get(name)
                home = None if table_id is None else placed.get(table_id)
                if table_id is None or home is None or home == here or {home, here} & busy:
                    continue
                log.warning(
                    "table open in a shard it is not placed in; letting go of it",
                    extra={"table": name, "shard": here, "placed_in": home},
                )
                self.engine.release(here, epochs[here], [table_id])

    def _drop_forgotten(self, name: str) -> None:
        """A table open here that the meta service no longer knows was dropped (through a
        node that did not serve it, or by an operator): its data goes with it here, on its
        owner, which alone may delete it."""
        log.info("dropping a table the meta service forgot", extra={"table": name})
        self.engine.drop_table(name, if_exists=True)

    def _defined(self, infos: list[pb.TableInfo]) -> list[pb.TableInfo]:
        """Of ``infos``, those the catalog and manifest know now (their creator may have died
        between the meta service's commit and its own). A record that cannot be defined here
        (a name recorded before names were checked there, say) is left out with a warning
        once, so that it never keeps its shard's other tables closed."""
        defined = []
        for t in infos:
            try:
                schema, options = tables.decode(t.name, t.schema)
                self.engine.define_table(t.name, schema, options, table_id=t.id)
            except (InvalidArgument, Conflict) as e:
                if t.id not in self._undefinable:
                    self._undefinable.add(t.id)
                    log.warning(
                        "table record cannot be opened; its shard's other tables are",
                        extra={"table": t.name[:64], "table_id": t.id, "error": str(e)},
                    )
                continue
            defined.append(t)
        return defined
