"""Starting and stopping a standalone gnomon: listeners refuse ports in use (in one line naming
the port and its setting, nothing left open), one process per data directory, startup logs
before whatever a command prints once serving, log lines that stay JSON."""

from __future__ import annotations

import json
import logging
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gnomon.errors import Unavailable
from node.server import logfmt, standalone
from node.server.standalone import Standalone
from tests.server.conftest import REPO, start_standalone

pytestmark = pytest.mark.integration


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A port something else listens on (without SO_REUSEPORT)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield int(s.getsockname()[1])


def _standalone(
    data_dir: Path, *, http_port: int = 0, grpc_port: int = 0, flight_port: int = 0
) -> Standalone:
    return Standalone(
        str(data_dir),
        http_port=http_port,
        grpc_port=grpc_port,
        flight_port=flight_port,
        wal_sync="never",
        grace_s=1.0,
    )


def _reusable(data_dir: Path) -> None:
    """The data directory is free again: unlocked, its engine closed."""
    with _standalone(data_dir) as again:
        assert again.engine is not None


def test_second_server_on_the_same_grpc_port_is_refused(tmp_path: Path) -> None:
    """gRPC's default SO_REUSEPORT let a second server listen on a port in use and take
    half the connections (and acknowledged writes) to its own database."""
    with _standalone(tmp_path / "first") as first:
        second = _standalone(tmp_path / "second", grpc_port=first.grpc_port)
        with pytest.raises(Unavailable) as refused:
            second.start()
        assert refused.value.message == (
            f"gRPC port {first.grpc_port} on 127.0.0.1 is in use (set --grpc-port / grpc_port)"
        )
        assert second.engine is None
    _reusable(tmp_path / "second")


@pytest.mark.parametrize(
    ("kind", "what", "setting"),
    [
        ("grpc", "gRPC", "grpc_port"),
        ("http", "HTTP", "http_port"),
        ("flight", "Arrow Flight", "flight_port"),
    ],
)
def test_a_listener_failing_after_the_engine_opened_leaves_nothing_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str, what: str, setting: str
) -> None:
    """A port taken between the early check and the listener's own bind: the listeners
    started are closed, the engine too, and the data directory is unlocked."""
    monkeypatch.setattr(standalone, "check_free", lambda *args: None, raising=False)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = int(taken.getsockname()[1])
        server = _standalone(tmp_path / "data", **{setting: port})
        with pytest.raises(Unavailable) as refused:
            server.start()
    flag = "--" + setting.replace("_", "-")
    assert (
        refused.value.message
        == f"{what} port {port} on 127.0.0.1 is in use (set {flag} / {setting})"
    )
    assert server.engine is None
    _reusable(tmp_path / "data")


def _main(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gnomon_app.cli", "standalone", "--wal-sync", "never", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    ("flag", "what"),
    [("--grpc-port", "gRPC"), ("--http-port", "HTTP"), ("--flight-port", "Arrow Flight")],
)
def test_main_refuses_a_port_in_use_in_one_line(
    tmp_path: Path, taken_port: int, flag: str, what: str
) -> None:
    ports = {"--grpc-port": "0", "--http-port": "0", "--flight-port": "0", flag: str(taken_port)}
    proc = _main("--data-dir", str(tmp_path / "d"), *(x for kv in ports.items() for x in kv))
    setting = flag.removeprefix("--").replace("-", "_")
    assert proc.returncode != 0
    assert proc.stderr.strip().splitlines()[-1] == (
        f"gnomon standalone: {what} port {taken_port} on 127.0.0.1 is in use "
        f"(set {flag} / {setting})"
    ), proc.stderr
    assert "Traceback" not in proc.stderr


def test_second_process_on_a_data_dir_is_refused(tmp_path: Path) -> None:
    data = tmp_path / "data"
    running = start_standalone(data, tmp_path / "server.log")
    try:
        proc = _main(
            "--data-dir", str(data), "--http-port", "0", "--grpc-port", "0", "--flight-port", "0"
        )
        assert proc.returncode != 0
        assert (
            f"data directory {data} is in use by another gnomon (process {running.server.pid})"
            in proc.stderr
        ), proc.stderr
        assert "Traceback" not in proc.stderr
        status, body = running.sql("SHOW TABLES")
        assert status == 200, body
    finally:
        running.server.stop()
    records = [
        json.loads(line)
        for line in (tmp_path / "server.log").read_text().splitlines()
        if line.startswith("{")
    ]
    startup = [r["msg"] for r in records]
    # "serving" is startup's last line: a banner printed after start() follows every line.
    serving = startup.index("gnomon standalone serving")
    assert "startup objects frozen" in startup[:serving]
    _reusable(data)


def _format(**extra: object) -> dict[str, object]:
    record = logging.getLogger("gnomon.test").makeRecord(
        "gnomon.test",
        logging.INFO,
        __file__,
        1,
        'he said "stop"\n\tnow %s',
        ("{}",),
        None,
        extra=extra,
    )
    line = logfmt.JsonFormatter().format(record)
    assert "\n" not in line

    def no_constants(name: str) -> object:
        raise AssertionError(f"{name} is not JSON")

    doc: dict[str, object] = json.loads(line, parse_constant=no_constants)
    return doc


def test_log_lines_stay_json_whatever_they_carry() -> None:
    doc = _format(
        ratio=float("nan"), by_pair={(1, 2): 3}, raw=b"\xff", level="spoofed", error='x "y"'
    )
    assert doc["msg"] == 'he said "stop"\n\tnow {}'
    assert doc["level"] == "INFO" and doc["logger"] == "gnomon.test"
    assert doc["ratio"] == "nan" and doc["by_pair"] == "{(1, 2): 3}"
    assert doc["raw"] == repr(b"\xff") and doc["error"] == 'x "y"'
    assert _format(rows=3, names=["a"], ok=None) | {"ts": ""} == {
        "ts": "",
        "level": "INFO",
        "logger": "gnomon.test",
        "msg": 'he said "stop"\n\tnow {}',
        "rows": 3,
        "names": ["a"],
        "ok": None,
    }
