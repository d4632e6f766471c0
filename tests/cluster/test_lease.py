"""The self-fencing rule: a node acknowledges writes only until its lease minus the margin,
counted from when the accepted heartbeat was sent (etcd counts the TTL from later, when it
handles the request, so the node always stops first)."""

from __future__ import annotations

import time

import pytest

from node.cluster.lease import MIN_MARGIN_S, LeaseClock, margin_s

pytestmark = pytest.mark.unit


def test_the_margin() -> None:
    assert margin_s(3) == MIN_MARGIN_S
    assert margin_s(10) == 2.0
    assert margin_s(60) == 12.0


def test_a_lease_is_current_until_ttl_minus_margin_after_the_send() -> None:
    clock = LeaseClock()
    assert not clock()  # never renewed: nothing may be acknowledged
    sent = time.monotonic()
    clock.renewed(sent, 10)
    assert clock()
    assert 7.5 < clock.remaining_s() <= 8.0
    # A renewal sent earlier than the one already counted never shortens the lease.
    clock.renewed(sent - 5, 10)
    assert 7.5 < clock.remaining_s() <= 8.0
    # A heartbeat sent long ago that meta only now accepted counts from its send time.
    stale = LeaseClock()
    stale.renewed(time.monotonic() - 9, 10)
    assert not stale()


def test_a_lease_renewed_after_a_lapse_waits_for_a_keeper_pass() -> None:
    """While the node was paused past its lease its shards may have gone to other nodes:
    only a keeper pass begun after the renewal tells what is still its own."""
    poked: list[bool] = []
    clock = LeaseClock(on_lapse_renewed=lambda: poked.append(True))
    clock.renewed(time.monotonic(), 10)
    before = time.monotonic()
    clock.renewed(time.monotonic() - 20, 10)  # lapsed long ago, then counted again
    assert clock()  # a late answer to an old heartbeat is no lapse
    lapsed = LeaseClock(on_lapse_renewed=lambda: poked.append(True))
    lapsed.renewed(time.monotonic() - 9, 10)
    assert not lapsed() and not poked
    lapsed.renewed(time.monotonic(), 10)
    assert poked == [True]
    assert not lapsed()
    lapsed.caught_up(before)  # a pass that read the shards before the renewal
    assert not lapsed()
    lapsed.caught_up(time.monotonic())
    assert lapsed()
