"""What a table asks before it logs and before it acknowledges a write: is its shard still
served here?

A shard is the unit the meta service places: one WAL region and the tables assigned to it.
In a cluster a node may lose a shard two ways while writes are in flight: it is told to close
it (a migration), or it cannot renew its lease with the meta service and must assume a new
owner is being chosen. The guard turns both into an error before the write is acknowledged,
so no write is acknowledged by a node that no longer owns the shard; the manifest's epoch
fence (:mod:`node.engine.fences`) covers flushes and compactions the same way. Reads of the
leader's copy ask it too: a node paused past its lease must not answer from a copy the new
leader has moved past.
"""

from __future__ import annotations

from collections.abc import Callable

from gnomon.errors import Fenced, NotOwner
from node.engine.fences import UNFENCED

#: The shard (and WAL region) of every table of a standalone engine.
STANDALONE_SHARD = 0


class ShardGuard:
    def __init__(
        self,
        shard_id: int,
        epoch: int = UNFENCED,
        *,
        lease: Callable[[], bool] | None = None,
    ) -> None:
        self.shard_id = shard_id
        self.epoch = epoch
        #: True while this node may still acknowledge writes for its shards: in a cluster,
        #: until a safety margin before the meta service could see the node's lease expire.
        self._lease = lease
        self._closed = False

    @property
    def region(self) -> int:
        """The WAL region of the shard (region = shard)."""
        return self.shard_id

    def check(self) -> None:
        if self._closed:
            raise NotOwner(
                f"shard {self.shard_id} is not served here any more", shard_id=self.shard_id
            )
        if self._lapsed:
            raise Fenced(f"{self._lease_text} acknowledges no writes", shard_id=self.shard_id)

    def check_read(self) -> None:
        """Before a read of the leader's copy: once the lease lapsed the meta service may
        have made another node leader, which acknowledges writes this copy never sees, so
        the read is sent where the table is now (NotOwner) rather than answered stale."""
        if self._lapsed:
            raise NotOwner(
                f"{self._lease_text} answers no reads of its copy", shard_id=self.shard_id
            )

    @property
    def _lapsed(self) -> bool:
        return self._lease is not None and not self._lease()

    @property
    def _lease_text(self) -> str:
        return (
            f"shard {self.shard_id}: this node's lease with the meta service is not current, "
            "so until it renews it, it"
        )

    def close(self) -> None:
        self._closed = True
