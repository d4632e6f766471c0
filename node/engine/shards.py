"""The shards a node leads and follows: opening one (its fence, its WAL region, its tables
replayed), closing it, letting go of it or of some of its tables while the meta service moves
them, and following another node's shard as read-only copies. The engine's data and DDL calls
find the tables these open in :class:`Served`."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import cast

from gnomon.errors import Conflict, InvalidArgument, NotFound, NotOwner, Unavailable
from gnomon.wal.api import FollowableWal, Wal
from node.engine.catalog import Catalog, TableInfo
from node.engine.compaction.compactor import Compactor
from node.engine.fences import UNFENCED, ShardFences
from node.engine.follow import FollowedShard, FollowerGuard
from node.engine.releases import ReleasedTables
from node.engine.shard import ShardGuard
from node.engine.table import Table

log = logging.getLogger("gnomon.engine")


@dataclass
class OpenShard:
    guard: ShardGuard
    tables: set[str]


@dataclass
class Served:
    """What this node serves, under one lock: the open tables by name and their compactors,
    the shards open here, the guard of every table opened here (kept after its shard closes:
    a flush or compaction finishing late is fenced at the epoch it was opened with), the
    shards followed here, and what was let go of while a move goes on (not opened again here
    until it ends): whole shards, and the tables of a shard by id."""

    lock: threading.RLock = field(default_factory=threading.RLock)
    tables: dict[str, Table] = field(default_factory=dict)
    compactors: dict[str, Compactor] = field(default_factory=dict)
    shards: dict[int, OpenShard] = field(default_factory=dict)
    guards: dict[int, ShardGuard] = field(default_factory=dict)
    followed: dict[int, FollowedShard] = field(default_factory=dict)
    held: set[int] = field(default_factory=set)
    #: Kept beside the catalog's release rows, which the tables' new owner removes once it
    #: opens them: a pass reading the placement from before the move must still find them.
    let_go: dict[int, set[int]] = field(default_factory=dict)

    def by_id(self, table_id: int) -> Table | None:
        return next((t for t in self.tables.values() if t.table_id == table_id), None)


#: Opens a table led here under a guard, adopting its follower copy if one is given.
OpenTable = Callable[[TableInfo, ShardGuard, "Table | None"], Table]


class Shards:
    """Opens, closes and follows shards on the tables of :class:`Served`."""

    def __init__(
        self,
        served: Served,
        *,
        catalog: Catalog,
        wal: Wal,
        fences: ShardFences,
        released: ReleasedTables,
        open_table: OpenTable,
        new_table: Callable[[TableInfo, ShardGuard], Table],
        on_opened: Callable[[list[Table]], None],
        flush_on_close: bool,
    ) -> None:
        self._served = served
        self._catalog = catalog
        self._wal = wal
        self._fences = fences
        self._released = released
        self._open_table = open_table
        self._new_table = new_table
        #: Told of the tables a shard opening just opened (recover revisions, look at
        #: their compaction).
        self._on_opened = on_opened
        self._flush_on_close = flush_on_close

    def open(
        self,
        shard_id: int,
        *,
        epoch: int = UNFENCED,
        table_ids: Iterable[int] | None = None,
        lease: Callable[[], bool] | None = None,
    ) -> list[str]:
        """Serve shard ``shard_id``: take its fence at ``epoch`` (Fenced if a later epoch
        holds it), open its WAL region and its tables (``table_ids``; every table of the
        catalog when None, as in standalone) and replay each from its flushed sequence.
        ``lease`` says whether writes may still be acknowledged (see :class:`ShardGuard`).
        For a shard already open at ``epoch``, opens those of ``table_ids`` not yet open
        (tables created on the shard since). Returns the names of the tables opened."""
        with self._served.lock:
            if shard_id in self._served.held:
                raise NotOwner(f"shard {shard_id} is moving off this node", shard_id=shard_id)
            held = self._served.shards.get(shard_id)
            if held is not None and held.guard.epoch != epoch:
                raise Conflict(
                    f"shard {shard_id} is open here at epoch {held.guard.epoch}; "
                    f"close it before opening it at epoch {epoch}"
                )
            if held is None:
                self._fences.take(shard_id, epoch)
            # A follower promoted: its tables keep what they applied and replay the rest.
            adopted = self._stop_following(shard_id) if held is None else {}
            present = set() if held is None else held.tables
            # One read of the releases serves both the tables kept closed and those arriving.
            released = self._released.all()
            let_go = self._served.let_go.get(shard_id, set())
            wanted = (
                None
                if table_ids is None
                else {t for t in table_ids if released.get(t) != shard_id and t not in let_go}
            )
            infos = [
                i
                for i in self._catalog.list()
                if (wanted is None or i.table_id in wanted) and i.name not in present
            ]
            missing = (
                (wanted or set())
                - {i.table_id for i in infos}
                - {self._served.tables[n].table_id for n in present}
            )
            if missing:
                raise NotFound(f"shard {shard_id}: tables {sorted(missing)} are not in the catalog")
            clash = sorted(i.name for i in infos if i.name in self._served.tables)
            if clash:
                raise Conflict(f"shard {shard_id}: tables {clash} are open in another shard")
            guard = ShardGuard(shard_id, epoch, lease=lease) if held is None else held.guard
            if held is None:
                self._wal.open_region(shard_id, epoch)
            opened: list[Table] = []
            try:
                for info in infos:
                    table = self._open_table(info, guard, adopted.pop(info.table_id, None))
                    opened.append(table)
                    table.recover()
            except BaseException:
                for table in opened:
                    table.close()
                    self._served.compactors.pop(table.name).close()
                if held is None:
                    self._wal.close_region(shard_id)
                raise
            for table in opened:
                self._served.tables[table.name] = table
            arrived = [t.table_id for t in opened if t.table_id in released]
            if arrived:
                self._released.remove(table_ids=arrived)
            if held is None:
                self._served.shards[shard_id] = OpenShard(guard, {t.name for t in opened})
            else:
                held.tables.update(t.name for t in opened)
        self._on_opened(opened)
        # Passes open a shard held already again and again: only a real open is worth a line.
        if held is None:
            log.info(
                "opened shard", extra={"shard": shard_id, "epoch": epoch, "tables": len(opened)}
            )
        elif opened:
            log.info(
                "opened tables in shard",
                extra={"shard": shard_id, "epoch": epoch, "tables": len(opened)},
            )
        return sorted(t.name for t in opened)

    def close(self, shard_id: int) -> bool:
        """Stop serving a shard: refuse its writes, flush its tables (so the next owner
        replays little), close them and its WAL region. False if it was not open."""
        with self._served.lock:
            shard = self._served.shards.pop(shard_id, None)
            if shard is None:
                return False
            shard.guard.close()
            tables = [self._served.tables.pop(name) for name in sorted(shard.tables)]
        self._let_go(tables)
        self._wal.close_region(shard_id)
        log.info("closed shard", extra={"shard": shard_id, "tables": len(tables)})
        return True

    def release(self, shard_id: int, epoch: int, table_ids: Collection[int] | None) -> list[str]:
        """Let go of what the meta service is about to move: the whole shard (``table_ids``
        None; a migration) or some of its tables (a split or merge re-homes them). Each is
        flushed and closed, new writes answered NotOwner (retried at the new home), and it is
        not opened in this shard again until :meth:`unhold`. The names let go of."""
        with self._served.lock:
            shard = self._served.shards.get(shard_id)
            if shard is not None and epoch < shard.guard.epoch:
                raise Conflict(
                    f"shard {shard_id} is open here at epoch {shard.guard.epoch}, "
                    f"not {epoch}: the release request is stale"
                )
            if table_ids is None:
                self._served.held.add(shard_id)
        moving = NotOwner(f"shard {shard_id} is being moved: try its new home", shard_id=shard_id)
        if table_ids is None:
            names = [] if shard is None else sorted(shard.tables)
            with self._served.lock:
                tables = [self._served.tables[n] for n in names if n in self._served.tables]
            # Writes logged before this are flushed below, so they are acknowledged.
            for table in tables:
                table.stop_writes(moving)
            self.close(shard_id)
            return names
        # Recorded first: a restart in the middle must not reopen them here while the move
        # goes on (their rows written since would stay in a log their new shard never reads).
        self._released.add(shard_id, table_ids)
        with self._served.lock:
            self._served.let_go.setdefault(shard_id, set()).update(table_ids)
            tables = []
            if shard is not None:
                for name in sorted(shard.tables):
                    if self._served.tables[name].table_id in table_ids:
                        shard.tables.discard(name)
                        tables.append(self._served.tables.pop(name))
        for table in tables:
            table.stop_writes(moving)
        self._let_go(tables, strict=True)
        log.info("released tables", extra={"shard": shard_id, "tables": len(tables)})
        return [t.name for t in tables]

    def unhold(self, shard_id: int) -> None:
        """The meta service's move of (tables of) ``shard_id`` is over: open it as it says."""
        with self._served.lock:
            self._served.held.discard(shard_id)
            self._served.let_go.pop(shard_id, None)
        self._released.remove(shard_id=shard_id)

    def held(self) -> set[int]:
        """Shards that are, or have tables, let go of until a move ends."""
        with self._served.lock:
            held = self._served.held | set(self._served.let_go)
        return held | self._released.shards()

    def _let_go(self, tables: Sequence[Table], *, strict: bool = False) -> None:
        """Flush and close tables taken out of service. ``strict``: a failed flush is raised
        (the rows are in a log the table's next shard does not replay) after closing them."""
        with self._served.lock:
            compactors = [self._served.compactors.pop(t.name) for t in tables]
        for compactor in compactors:
            compactor.close()
        failed: Exception | None = None
        for table in tables:
            if self._flush_on_close or strict:
                try:
                    table.flush()
                except Exception as e:  # the WAL region keeps the rows
                    failed = failed or e
                    log.error(
                        "flush on release failed", extra={"table": table.name, "error": repr(e)}
                    )
            table.close()
        if strict and failed is not None:
            raise Unavailable(f"flushing tables before their move failed: {failed}") from failed

    def tables(self) -> dict[int, set[str]]:
        """The shards open here: id -> the names of their open tables."""
        with self._served.lock:
            return {sid: set(s.tables) for sid, s in self._served.shards.items()}

    def epochs(self) -> dict[int, int]:
        """The shards open here: id -> epoch."""
        with self._served.lock:
            return {sid: s.guard.epoch for sid, s in self._served.shards.items()}

    def follow(self, shard_id: int, *, table_ids: Iterable[int], leader: str) -> list[str]:
        """Follow shard ``shard_id``, led by ``leader``: read-only copies of its tables
        (``table_ids``) fed from its WAL region (``node/engine/follow.py``). Followed already
        with these tables: only the leader is updated; with others: followed anew. The names
        of the tables it follows."""
        wal = self._wal
        if not isinstance(wal, FollowableWal):
            raise InvalidArgument(
                "following a shard needs a WAL other nodes can read (a Kafka WAL, kafka://)"
            )
        wanted = set(table_ids)
        with self._served.lock:
            if shard_id in self._served.shards:
                raise Conflict(f"shard {shard_id} is led here; it cannot be followed too")
            current = self._served.followed.get(shard_id)
            if current is not None and set(current.tables) == wanted:
                for table in current.tables.values():
                    cast(FollowerGuard, table.guard).leader = leader
                return sorted(current.by_name())
        if current is not None:
            self.unfollow(shard_id)
        infos = [i for i in self._catalog.list() if i.table_id in wanted]
        guard = FollowerGuard(shard_id, leader)
        followed = FollowedShard(
            shard_id, wal, {i.table_id: self._new_table(i, guard) for i in infos}
        )
        with self._served.lock:
            self._served.followed[shard_id] = followed
        log.info(
            "following shard", extra={"shard": shard_id, "leader": leader, "tables": len(infos)}
        )
        return sorted(followed.by_name())

    def unfollow(self, shard_id: int) -> bool:
        """Stop following a shard and close its copies; False if it was not followed."""
        with self._served.lock:
            followed = shard_id in self._served.followed
        for table in self._stop_following(shard_id).values():
            table.close()
        return followed

    def _stop_following(self, shard_id: int) -> dict[int, Table]:
        with self._served.lock:
            followed = self._served.followed.pop(shard_id, None)
        return {} if followed is None else followed.stop()

    def followed(self) -> dict[int, FollowedShard]:
        """The shards followed here, by id."""
        with self._served.lock:
            return dict(self._served.followed)

    def follower_table(self, name: str) -> Table:
        """The follower copy of table ``name`` (for follower reads); NotOwner if this node
        follows no shard holding it."""
        with self._served.lock:
            for followed in self._served.followed.values():
                table = followed.by_name().get(name)
                if table is not None and followed.ready:
                    return table
                if table is not None:
                    raise NotOwner(
                        f"table {name!r} is followed here but its copy has not caught up yet",
                        owner=cast(FollowerGuard, table.guard).leader,
                        shard_id=followed.shard_id,
                    )
        raise NotOwner(f"table {name!r} is not followed on this node")
