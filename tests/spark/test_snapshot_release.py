"""Letting go of held snapshots after their owners stopped, as a Spark job's driver does when
it outlives the servers it read (the Spark benchmark stops them first): nothing to warn
about, since each snapshot runs out with its lease."""

from __future__ import annotations

import logging

import pytest

from gnomon_app.spark import planning
from testkit.procs import free_port

pytestmark = pytest.mark.unit


def test_a_snapshot_whose_owner_is_gone_is_let_go_quietly(
    caplog: pytest.LogCaptureFixture,
) -> None:
    gone = [planning.Held(f"127.0.0.1:{free_port()}", f"pin-{i}", 60_000) for i in range(3)]
    with caplog.at_level(logging.DEBUG, logger="gnomon_app.spark"):
        planning.release(gone)
    records = [r for r in caplog.records if r.name == "gnomon_app.spark"]
    assert len(records) == 3 and all(r.levelno == logging.DEBUG for r in records), [
        (r.levelname, r.getMessage()) for r in records
    ]
