"""Signals a server process stops on: from the moment the handlers are in, SIGTERM asks for a
graceful stop instead of ending the process (a server still starting is stopped once
started, never killed mid-start)."""

from __future__ import annotations

import logging
import os
import signal
from pathlib import Path

import pytest

from gnomon.stopping import stop_signals
from node.server.standalone import Standalone

pytestmark = pytest.mark.unit


def test_sigterm_sets_the_event_and_the_old_handler_comes_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    before = signal.getsignal(signal.SIGTERM)
    with caplog.at_level(logging.INFO), stop_signals(logging.getLogger("test")) as stop:
        assert not stop.is_set()
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.wait(5)
    assert signal.getsignal(signal.SIGTERM) is before
    assert "stopping on signal" in caplog.text


def test_a_signal_before_serving_stops_the_server_once_started(tmp_path: Path) -> None:
    with stop_signals(logging.getLogger("test")) as stop:
        server = Standalone(
            str(tmp_path / "data"), http_port=0, grpc_port=0, flight_port=0, wal_sync="never"
        )
        server.start()
        os.kill(os.getpid(), signal.SIGTERM)  # while it starts: the process lives on
        server.run_forever(stop)  # returns at once, the server stopped
    assert server.engine is None
