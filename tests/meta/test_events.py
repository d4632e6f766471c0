"""Shard events: what nodes are told on a change, and the fan-out to watchers."""

from __future__ import annotations

import pytest

from meta.events import EventBus, EventKind, Role, ShardEvent, changed
from meta.model import Shard, ShardStatus

pytestmark = pytest.mark.unit


def test_a_leader_change_closes_the_old_and_opens_the_new_at_the_new_epoch() -> None:
    old = Shard(3, "a", ("b",), 4, ShardStatus.READY)
    new = Shard(3, "b", (), 5, ShardStatus.READY)
    assert changed(old, new) == [
        ShardEvent(EventKind.CLOSE, 3, "a", Role.LEADER, 4),
        ShardEvent(EventKind.CLOSE, 3, "b", Role.FOLLOWER, 4),
        ShardEvent(EventKind.OPEN, 3, "b", Role.LEADER, 5),
    ]


def test_adding_a_follower_only_tells_the_follower() -> None:
    old = Shard(1, "a", (), 2, ShardStatus.READY)
    new = Shard(1, "a", ("c",), 2, ShardStatus.READY)
    assert changed(old, new) == [ShardEvent(EventKind.OPEN, 1, "c", Role.FOLLOWER, 2)]


def test_subscribers_get_their_node_s_events_and_an_end_mark_on_close() -> None:
    bus = EventBus()
    _, only_a = bus.subscribe("a")
    _, every = bus.subscribe(None)
    events = [
        ShardEvent(EventKind.OPEN, 1, "a", Role.LEADER, 1),
        ShardEvent(EventKind.OPEN, 2, "b", Role.LEADER, 1),
    ]
    bus.publish(events)
    bus.close()
    assert [only_a.get_nowait(), only_a.get_nowait()] == [events[0], None]
    assert [every.get_nowait() for _ in range(3)] == [*events, None]
    # Subscribing to a closed bus ends at once: the watcher goes to the new leader.
    _, late = bus.subscribe(None)
    assert late.get_nowait() is None


def test_a_subscriber_that_falls_behind_is_dropped() -> None:
    bus = EventBus(capacity=2)
    _, q = bus.subscribe(None)
    bus.publish([ShardEvent(EventKind.OPEN, i, "a", Role.LEADER, 1) for i in range(5)])
    drained = []
    while not q.empty():
        drained.append(q.get_nowait())
    assert drained[-1] is None
