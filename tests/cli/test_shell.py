"""`gnomon sql` against a real server: driven through a pseudo-terminal as a user types (Ctrl-C
cancels the line, Ctrl-D quits), endpoints given as host:port or URLs, a clear error when
nothing listens, and large answers cut to ``--max-rows``."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import signal
import subprocess
import sys
import termios
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from gnomon import shell
from gnomon.cli import main
from gnomon.errors import InvalidArgument
from tests.server.conftest import Running, start_standalone
from tests.support.procs import free_port

ROOT = Path(__file__).resolve().parents[2]
ROWS = 20_000


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    root = tmp_path_factory.mktemp("shell")
    running = start_standalone(root / "data", root / "server.log")
    lines = "\n".join(f"many,k=k{i} v={i}i {i}" for i in range(ROWS))
    status, _, body = running.request("POST", "/influxdb/v1/write?precision=ms", lines.encode())
    assert status in (200, 204), body
    yield running
    running.server.stop()


class Terminal:
    """``gnomon sql`` on a pseudo-terminal: what is typed goes through the terminal's line
    discipline, so Ctrl-C is a SIGINT and Ctrl-D an end of input, as for a user."""

    def __init__(self, home: Path, *args: str) -> None:
        self.fd, child = pty.openpty()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gnomon.cli", "sql", *args],
            stdin=child,
            stdout=child,
            stderr=child,
            cwd=ROOT,
            start_new_session=True,
            # The terminal becomes the new session's controlling one, so Ctrl-C signals.
            preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0),
            env={**os.environ, "HOME": str(home), "TERM": "dumb"},
        )
        os.close(child)
        self.seen = ""

    def type(self, text: str) -> None:
        os.write(self.fd, text.encode())

    def wait_for(self, text: str, timeout_s: float) -> bool:
        """Read the terminal until ``text`` appeared or ``timeout_s`` passed (bounded in reads
        too); whether it appeared."""
        deadline = time.monotonic() + timeout_s
        for _ in range(10_000):
            left = deadline - time.monotonic()
            if text in self.seen or left <= 0:
                break
            ready, _, _ = select.select([self.fd], [], [], min(left, 1.0))
            if ready:
                try:
                    self.seen += os.read(self.fd, 65536).decode(errors="replace")
                except OSError:  # the child closed the terminal
                    break
        return text in self.seen

    def expect(self, text: str, timeout_s: float = 30.0) -> None:
        assert self.wait_for(text, timeout_s), f"no {text!r} in {self.seen[-2000:]!r}"

    def close(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)
        os.close(self.fd)


def test_ctrl_c_cancels_the_line_and_ctrl_d_quits(server: Running, tmp_path: Path) -> None:
    term = Terminal(tmp_path, "--endpoint", f"127.0.0.1:{server.http_port}")
    try:
        term.expect("gnomon> ")
        term.type("SELECT 'never' AS x\r")
        term.expect("-> ")
        # Ctrl-C: the unfinished statement is dropped. A Ctrl-C that lands while the prompt
        # is being drawn is only seen with the next key (Python's readline checks signals when
        # its wait for input is interrupted), so press it again until the shell answers.
        for _ in range(30):
            term.type("\x03")
            if term.wait_for("^C", timeout_s=1.0):
                break
        term.expect("^C")
        term.expect("gnomon> ", timeout_s=30.0)
        term.seen = term.seen.split("^C")[-1]
        term.type("SELECT 41 + 1 AS answer;\r")
        term.expect("(1 row)")
        assert "42" in term.seen and "never" not in term.seen
        assert term.proc.poll() is None
        # Ctrl-D on an empty line leaves; typed once the prompt is drawn, when readline has set
        # the terminal up to read it.
        term.seen = term.seen.split("(1 row)")[-1]
        term.expect("gnomon> ")
        term.type("\x04")
        assert term.proc.wait(timeout=30) == 0
    finally:
        term.close()


def test_ctrl_c_while_a_query_runs_returns_to_the_prompt(
    server: Running, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = shell.run_sql
    calls: list[str] = []

    def interrupted_once(url: str, sql: str) -> dict[str, object]:
        calls.append(sql)
        if len(calls) == 1:
            raise KeyboardInterrupt  # what Ctrl-C raises while waiting for the answer
        return real(url, sql)

    monkeypatch.setattr(shell, "run_sql", interrupted_once)
    typed = iter(["SELECT count(*) AS n FROM many;", "SELECT 7 AS seven;"])

    def read_line(prompt: str) -> str:
        try:
            return next(typed)
        except StopIteration:
            raise EOFError from None

    console = Console(record=True, width=120, file=open(os.devnull, "w"))  # noqa: SIM115
    shell.repl(f"http://127.0.0.1:{server.http_port}", console, read_line=read_line)
    out = console.export_text()
    assert "cancelled" in out and "seven" in out and "(1 row)" in out
    assert len(calls) == 2


def test_nothing_listening_is_a_clear_error() -> None:
    port = free_port()
    for args in (["-e", "SHOW TABLES"], []):
        result = CliRunner().invoke(main, ["sql", "--endpoint", f"127.0.0.1:{port}", *args])
        assert result.exit_code == 1, result.output
        assert f"cannot connect to gnomon at http://127.0.0.1:{port}" in result.output
        assert "connected to" not in result.output


@pytest.mark.parametrize(
    "form", ["127.0.0.1:{port}", "http://127.0.0.1:{port}", "http://127.0.0.1:{port}/"]
)
def test_endpoints_as_host_port_or_url(server: Running, form: str) -> None:
    endpoint = form.format(port=server.http_port)
    result = CliRunner().invoke(main, ["sql", "--endpoint", endpoint, "-e", "SELECT 3 AS three"])
    assert result.exit_code == 0, result.output
    assert "three" in result.output and "(1 row)" in result.output


@pytest.mark.parametrize(
    ("endpoint", "url"),
    [
        ("localhost", "http://localhost:5440"),
        ("10.0.0.1:6000", "http://10.0.0.1:6000"),
        ("https://db.example:8443/", "https://db.example:8443"),
        ("[::1]:5440", "http://[::1]:5440"),
    ],
)
def test_base_url(endpoint: str, url: str) -> None:
    assert shell.base_url(endpoint) == url


@pytest.mark.parametrize("endpoint", ["ftp://h:1", "h:notaport", "http://"])
def test_a_bad_endpoint_is_named(endpoint: str) -> None:
    with pytest.raises(InvalidArgument, match="invalid endpoint"):
        shell.base_url(endpoint)


def test_a_large_answer_is_cut_to_max_rows(server: Running) -> None:
    endpoint = f"127.0.0.1:{server.http_port}"
    query = "SELECT k, v FROM many ORDER BY v"
    result = CliRunner().invoke(main, ["sql", "--endpoint", endpoint, "-e", query])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[-1] == f"({ROWS:,} rows, {ROWS - 1000:,} not shown; --max-rows sets how many are)"
    assert len(lines) == 1000 + 3  # header, rule, rows, footer
    assert lines[2].split("|")[1].strip() == "0"
    fewer = CliRunner().invoke(
        main, ["sql", "--endpoint", endpoint, "--max-rows", "5", "-e", query]
    )
    assert len(fewer.output.splitlines()) == 5 + 3
    assert "19,995 not shown" in fewer.output
