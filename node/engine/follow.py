"""A shard followed here: read-only copies of its tables, fed from the leader's WAL region.

A follower serves reads a moment behind its leader and takes over fast when the leader goes:
its memtables already hold what the leader had not flushed, so promotion replays only the tail
it had not applied (:meth:`node.engine.table.Table.lead`). One thread per followed shard reads
the region (:class:`~gnomon.wal.api.Follower`) and, between reads, takes the leader's newest
manifest versions: what the leader flushed is then dropped from the memtables, so each row is
read once, from the SSTs or from a memtable. Writes are refused (:class:`FollowerGuard`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping

from gnomon.errors import GnomonError, NotOwner
from gnomon.wal.api import FollowableWal, Follower, WalRecord
from node.engine.shard import ShardGuard
from node.engine.table import Table

log = logging.getLogger("gnomon.engine.follow")

#: Seconds between looks at the leader's manifest versions.
CATCH_UP_EVERY_S = 0.25
#: Pause before following again after the log could not be read.
RETRY_PAUSE_S = 1.0


class FollowerGuard(ShardGuard):
    """Refuses every write: a follower's tables change only through its leader's log."""

    def __init__(self, shard_id: int, leader: str) -> None:
        super().__init__(shard_id)
        self.leader = leader

    def check(self) -> None:
        raise NotOwner(
            f"shard {self.shard_id} is followed here; its leader {self.leader or '(none yet)'} "
            "takes the writes",
            owner=self.leader,
            shard_id=self.shard_id,
        )


class FollowedShard:
    def __init__(
        self,
        shard_id: int,
        wal: FollowableWal,
        tables: Mapping[int, Table],
    ) -> None:
        self.shard_id = shard_id
        self._wal = wal
        #: By table id.
        self.tables = dict(tables)
        self._stop = threading.Event()
        self._follower: Follower | None = None
        self._last_catch_up = 0.0
        self._started = time.monotonic()
        self._thread = threading.Thread(
            target=self._run, name=f"gnomon-follow-{shard_id}", daemon=True
        )
        self._thread.start()

    def by_name(self) -> dict[str, Table]:
        return {t.name: t for t in self.tables.values()}

    @property
    def ready(self) -> bool:
        """Whether its copies have read the log to its end once: until then they may lack
        what the leader acknowledged long ago (a copy made anew reads from its tables'
        flushed data on), and reads go to the leader instead."""
        follower = self._follower
        return follower is not None and follower.caught_up_at is not None

    def lag(self) -> tuple[int, float]:
        """(records behind, seconds since it was last caught up, or since it started following
        if it never was); (0, 0.0) when caught up."""
        follower = self._follower
        behind = 0 if follower is None else follower.lag_records
        since = None if follower is None else follower.caught_up_at
        if since is None:
            return behind, time.monotonic() - self._started
        if behind == 0:
            return 0, 0.0
        return behind, time.monotonic() - since

    def _run(self) -> None:
        while not self._stop.is_set():
            floors = {tid: t.followed_to for tid, t in self.tables.items()}
            try:
                self._follower = self._wal.follow(self.shard_id, floors)
                self._follower.run(self._apply, self._stop, self._tick)
            except GnomonError as e:
                log.warning(
                    "following shard failed; trying again",
                    extra={"shard": self.shard_id, "error": str(e)},
                )
                self._stop.wait(RETRY_PAUSE_S)

    def _apply(self, record: WalRecord) -> None:
        table = self.tables.get(record.table_id)
        if table is not None:
            table.follow(record.seq, record.payload)

    def _tick(self) -> None:
        now = time.monotonic()
        if now - self._last_catch_up < CATCH_UP_EVERY_S:
            return
        self._last_catch_up = now
        for table in self.tables.values():
            try:
                table.catch_up()
            except GnomonError as e:
                log.warning(
                    "cannot read the leader's manifest",
                    extra={"table": table.name, "error": str(e)},
                )

    def stop(self) -> dict[int, Table]:
        """Stop following (the tables stay as they are: promoted, or closed by the caller)."""
        self._stop.set()
        self._thread.join(timeout=30)
        return self.tables
