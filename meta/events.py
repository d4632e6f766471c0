"""Shard-assignment events: what the leader tells nodes (and watchers) after each committed
change, so a node opens a shard it now leads or follows and closes one it lost."""

from __future__ import annotations

import queue
import threading
from dataclasses import dataclass
from enum import StrEnum

from meta.model import Shard


class EventKind(StrEnum):
    OPEN = "open"
    CLOSE = "close"


class Role(StrEnum):
    LEADER = "leader"
    FOLLOWER = "follower"


@dataclass(frozen=True)
class ShardEvent:
    kind: EventKind
    shard_id: int
    node: str
    role: Role
    epoch: int


def opened(shard: Shard) -> list[ShardEvent]:
    """OPEN events for every node of ``shard``."""
    events = []
    if shard.leader:
        events.append(ShardEvent(EventKind.OPEN, shard.id, shard.leader, Role.LEADER, shard.epoch))
    events.extend(
        ShardEvent(EventKind.OPEN, shard.id, f, Role.FOLLOWER, shard.epoch) for f in shard.followers
    )
    return events


def changed(old: Shard, new: Shard) -> list[ShardEvent]:
    """What the nodes of a shard must do when it goes from ``old`` to ``new``: nodes that lost
    their role close it (at the old epoch), nodes that gained one open it (at the new)."""
    before = {e.node: e.role for e in opened(old)}
    after = {e.node: e.role for e in opened(new)}
    closes = [
        ShardEvent(EventKind.CLOSE, old.id, n, r, old.epoch)
        for n, r in before.items()
        if after.get(n) != r
    ]
    opens = [
        ShardEvent(EventKind.OPEN, new.id, n, r, new.epoch)
        for n, r in after.items()
        if before.get(n) != r or old.epoch != new.epoch
    ]
    return closes + opens


class EventBus:
    """Fan-out of events to subscribers, each with its own bounded queue; a subscriber that
    falls behind loses its subscription (its stream ends) rather than stalling the leader."""

    def __init__(self, capacity: int = 100_000) -> None:
        self._capacity = capacity
        self._lock = threading.Lock()
        self._subscribers: dict[int, tuple[str | None, queue.Queue[ShardEvent | None]]] = {}
        self._next = 0
        self._closed = False

    def subscribe(self, node: str | None) -> tuple[int, queue.Queue[ShardEvent | None]]:
        """A queue receiving the events of ``node`` (every event if None); None in it means the
        subscription ended."""
        q: queue.Queue[ShardEvent | None] = queue.Queue(self._capacity)
        with self._lock:
            self._next += 1
            if self._closed:
                q.put_nowait(None)
            else:
                self._subscribers[self._next] = (node, q)
            return self._next, q

    def unsubscribe(self, sub_id: int) -> None:
        with self._lock:
            self._subscribers.pop(sub_id, None)

    def publish(self, events: list[ShardEvent]) -> None:
        if not events:
            return
        with self._lock:
            subscribers = list(self._subscribers.items())
        for sub_id, (node, q) in subscribers:
            try:
                for e in events:
                    if node is None or e.node == node:
                        q.put_nowait(e)
            except queue.Full:
                self.unsubscribe(sub_id)
                self._end(q)

    def close(self) -> None:
        """End every subscription (the instance stopped leading)."""
        with self._lock:
            self._closed = True
            subscribers = list(self._subscribers.values())
            self._subscribers.clear()
        for _, q in subscribers:
            self._end(q)

    @staticmethod
    def _end(q: queue.Queue[ShardEvent | None]) -> None:
        while True:
            try:
                q.put_nowait(None)
                return
            except queue.Full:
                q.get_nowait()
