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
