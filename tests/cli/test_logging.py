"""The log level and format of `gnomon`: ``--log-level`` beats ``GNOMON_LOG_LEVEL``, which beats
the config file, which beats the default; every log line is one JSON object, whatever the
message holds."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from gnomon.config import StandaloneConfig
from gnomon.errors import InvalidArgument
from testkit.procs import Server
from tests.cli.conftest import wait_for_output

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def _json_lines(text: str) -> list[dict[str, object]]:
    """The log lines of a server's output (the rest is what it prints for its user)."""
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def _serve_and_stop(tmp_path: Path, name: str, *group_flags: str) -> str:
    """Run `gnomon [group_flags] standalone` with GNOMON_LOG_LEVEL=INFO and a config file
    saying DEBUG, answer one query, stop it; its output."""
    config = tmp_path / f"{name}.toml"
    config.write_text('[standalone]\nlog_level = "DEBUG"\n')
    log = tmp_path / f"{name}.log"
    server, _ = Server.start_gnomon(
        [
            sys.executable,
            "-m",
            "gnomon_app.cli",
            *group_flags,
            "standalone",
            "--config",
            str(config),
            "--data-dir",
            str(tmp_path / name),
            "--http-port=0",
            "--grpc-port=0",
            "--flight-port=0",
        ],
        log=log,
        env={"GNOMON_LOG_LEVEL": "INFO"},
        cwd=ROOT,
    )
    try:
        wait_for_output(server)
    finally:
        server.kill(signal.SIGTERM)
        server.proc.wait(timeout=60)
        server.stop()
    return log.read_text()


def test_the_log_level_flag_beats_the_environment_and_the_config(tmp_path: Path) -> None:
    quiet = _json_lines(_serve_and_stop(tmp_path, "quiet", "--log-level", "ERROR"))
    assert [line for line in quiet if line["level"] in ("DEBUG", "INFO", "WARNING")] == []
    # Without the flag the environment's INFO holds (over the config file's DEBUG).
    normal = _json_lines(_serve_and_stop(tmp_path, "normal"))
    assert any(line["msg"] == "engine closed" for line in normal)
    assert all(line["level"] != "DEBUG" for line in normal)


@pytest.mark.parametrize(
    ("file_level", "env", "flag", "expected"),
    [
        (None, {}, None, "INFO"),
        ("debug", {}, None, "DEBUG"),
        ("DEBUG", {"GNOMON_LOG_LEVEL": "warning"}, None, "WARNING"),
        ("DEBUG", {"GNOMON_LOG_LEVEL": "WARNING"}, "ERROR", "ERROR"),
    ],
)
def test_log_level_precedence(
    tmp_path: Path, file_level: str | None, env: dict[str, str], flag: str | None, expected: str
) -> None:
    config = tmp_path / "g.toml"
    config.write_text(f'log_level = "{file_level}"\n' if file_level else "")
    assert (
        StandaloneConfig.load(str(config), env=env, flags={"log_level": flag}).log_level == expected
    )


def test_an_unknown_log_level_is_named() -> None:
    with pytest.raises(InvalidArgument, match="environment: invalid log level 'LOUD'"):
        StandaloneConfig.load(None, env={"GNOMON_LOG_LEVEL": "LOUD"})
    bad = subprocess.run(
        [sys.executable, "-m", "gnomon_app.cli", "sql", "--help"],
        env={"GNOMON_LOG_LEVEL": "LOUD", "PATH": "/usr/bin:/bin"},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and "invalid log level 'LOUD'" in bad.stderr, bad.stderr


def test_log_lines_are_json_whatever_the_message_holds() -> None:
    message = 'a "quoted" message\\ with a backslash and a\nnewline'
    program = (
        "import logging, sys\n"
        "from gnomon_app.cli import main\n"
        "try:\n"
        "    main(['--log-level', 'INFO', 'sql', '--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        f"logging.getLogger('gnomon.test').warning({message!r}, extra={{'table': 't\"1'}})\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    doc = json.loads(lines[0])
    assert doc["msg"] == message and doc["level"] == "WARNING" and doc["table"] == 't"1'
