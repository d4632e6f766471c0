"""Meta's choice of a compaction node: fresh heartbeats only, least loaded, what was sent since
the last heartbeat counted, turns among equals."""

from __future__ import annotations

import pytest

from meta.compaction import CompactionPicker
from testkit.clock import Clock

pytestmark = pytest.mark.unit


def test_a_node_whose_heartbeat_is_older_than_half_its_lease_is_not_picked() -> None:
    clock = Clock()
    picker = CompactionPicker(default_ttl_s=10, clock=clock)
    picker.beat("a:1", ttl_s=10)
    picker.beat("b:1", ttl_s=10)
    clock.now += 4
    picker.beat("b:1")
    assert {picker.pick(["a:1", "b:1"], {}, {}) for _ in range(4)} == {"a:1", "b:1"}
    clock.now += 1.5  # a's last heartbeat is 5.5 s old: past half its 10 s lease
    assert [picker.pick(["a:1", "b:1"], {}, {}) for _ in range(4)] == ["b:1"] * 4
    assert picker.age("a:1") == 5.5
    picker.beat("a:1")
    assert "a:1" in {picker.pick(["a:1", "b:1"], {}, {}) for _ in range(4)}


def test_a_node_never_heard_from_or_forgotten_is_not_picked() -> None:
    picker = CompactionPicker(default_ttl_s=10, clock=Clock())
    assert picker.pick(["a:1"], {}, {}) is None
    picker.beat("a:1")
    assert picker.pick(["a:1"], {}, {}) == "a:1"
    picker.forget("a:1")
    assert picker.pick(["a:1"], {}, {}) is None and picker.age("a:1") is None


def test_the_least_loaded_node_counting_what_was_sent_since_its_heartbeat() -> None:
    picker = CompactionPicker(default_ttl_s=10, clock=Clock())
    for node in ("a:1", "b:1"):
        picker.beat(node)
    loads = {"a:1": 0.5, "b:1": 0.0}
    slots = {"a:1": 2.0, "b:1": 2.0}
    # b takes 0.5 of its load per task sent (2 slots): b, then a tie broken by turns, ...
    picks = [picker.pick(["a:1", "b:1"], loads, slots) for _ in range(3)]
    assert picks[0] == "b:1" and sorted(picks[1:]) == ["a:1", "b:1"]
    # Heartbeats report the loads, which then count instead of the picks.
    picker.beat("a:1")
    picker.beat("b:1")
    loads["b:1"] = 1.0
    assert picker.pick(["a:1", "b:1"], loads, slots) == "a:1"
