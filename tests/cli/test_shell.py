"""`gnomon sql` against a real server: driven through a pseudo-terminal as a user types (Ctrl-C
cancels the line, Ctrl-D quits, the history recalls whole statements), endpoints given as
host:port or URLs, a clear error when nothing listens, large answers cut to ``--max-rows`` by
the server, EXPLAIN's plans shown whole and timestamps as ISO 8601 in the client's zone."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest
from click.testing import CliRunner
from rich.console import Console

from gnomon.errors import InvalidArgument
from gnomon_app import shell
from gnomon_app.cli import main
from testkit.procs import free_port
from tests.docs.readme import BIN
from tests.server.conftest import Running, start_standalone

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
ROWS = 20_000
#: 2023-11-14T22:13:20Z, the one timestamp of the table ``stamps``.
STAMP_MS = 1_700_000_000_000


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    root = tmp_path_factory.mktemp("shell")
    running = start_standalone(root / "data", root / "server.log")
    lines = "\n".join(f"many,k=k{i} v={i}i {i}" for i in range(ROWS))
    status, _, body = running.request("POST", "/influxdb/v1/write?precision=ms", lines.encode())
    assert status in (200, 204), body
    for statement in (
        "CREATE TABLE stamps (k string TAG, ts timestamp NOT NULL, TIMESTAMP KEY(ts))",
        f"INSERT INTO stamps (k, ts) VALUES ('a', {STAMP_MS})",
    ):
        status, _, body = running.request("POST", "/sql", json.dumps({"query": statement}).encode())
        assert status == 200, body
    yield running
    running.server.stop()


class Terminal:
    """``gnomon sql`` on a pseudo-terminal, as a person types it: what is typed goes through
    the terminal's line discipline, so Ctrl-C is a SIGINT and Ctrl-D an end of input. Its
    home (its history) is ``home``, the machine's time zone ``tz``."""

    def __init__(self, home: Path, *args: str, tz: str = "UTC") -> None:
        env = {**os.environ, "HOME": str(home), "TERM": "xterm", "TZ": tz}
        env.pop("GNOMON_TIME_ZONE", None)
        self.term: pexpect.spawn[str] = pexpect.spawn(
            str(BIN / "gnomon"), ["sql", *args], cwd=str(ROOT), env=env, encoding="utf-8"
        )

    def type(self, text: str) -> None:
        self.term.send(text)

    def expect(self, text: str, timeout_s: float = 30.0) -> str:
        """What the shell printed before ``text``, once it printed ``text``."""
        self.term.expect_exact(text, timeout=timeout_s)
        return str(self.term.before)

    def cancel(self) -> None:
        """Ctrl-C, pressed again until the shell answers: one that lands while the prompt is
        drawn is seen only with the next key (Python's readline checks signals when its wait
        for input is interrupted)."""
        for _ in range(30):
            self.term.sendintr()
            if self.term.expect_exact(["^C", pexpect.TIMEOUT], timeout=1) == 0:
                return
        raise AssertionError(f"Ctrl-C unanswered: {self.term.before!r}")

    def quit(self) -> None:
        """Ctrl-D on an empty line, typed once the prompt is drawn (when readline has set the
        terminal up to read it), which must end the shell."""
        self.expect("gnomon> ")
        self.term.sendeof()
        self.term.expect(pexpect.EOF, timeout=30)
        self.term.close()
        assert self.term.exitstatus == 0, self.term.signalstatus

    def close(self) -> None:
        self.term.close(force=True)


def test_ctrl_c_cancels_the_line_and_ctrl_d_quits(server: Running, tmp_path: Path) -> None:
    term = Terminal(tmp_path, "--endpoint", f"127.0.0.1:{server.http_port}")
    try:
        term.expect("gnomon> ")
        term.type("SELECT 'never' AS x\r")
        term.expect("-> ")
        term.cancel()  # the unfinished statement is dropped
        term.expect("gnomon> ")
        term.type("SELECT 41 + 1 AS answer;\r")
        shown = term.expect("(1 row)")
        assert "42" in shown and "never" not in shown
        term.quit()
    finally:
        term.close()


def test_ctrl_c_while_a_query_runs_returns_to_the_prompt(
    server: Running, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = shell.run_sql
    calls: list[str] = []

    def interrupted_once(url: str, sql: str, *, max_rows: int | None = None) -> shell.Answer:
        calls.append(sql)
        if len(calls) == 1:
            raise KeyboardInterrupt  # what Ctrl-C raises while waiting for the answer
        return real(url, sql, max_rows=max_rows)

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
    # The server sends only the rows shown, and says how many the answer had.
    answer = shell.run_sql(f"http://{endpoint}", query, max_rows=5)
    assert answer.rows is not None and answer.rows.num_rows == 5
    assert answer.total_rows == ROWS


def test_explain_shows_its_plans_whole(server: Running, tmp_path: Path) -> None:
    term = Terminal(tmp_path, "--endpoint", f"127.0.0.1:{server.http_port}")
    try:
        term.expect("gnomon> ")
        term.type("EXPLAIN SELECT k, sum(v) AS total FROM many WHERE v > 5 GROUP BY k;\r")
        shown = term.expect(" rows)")
        term.quit()
    finally:
        term.close()
    assert "…" not in shown, shown
    lines = shown.splitlines()
    # Each plan on lines of its own, indented as EXPLAIN indents it.
    assert "plan_type: logical_plan" in lines and "plan_type: physical_plan" in lines, shown
    scan = next(line for line in lines if "TableScan: many" in line)
    assert scan.startswith("    ") and scan.endswith("full_filters=[many.v > Int64(5)]"), shown
    partial = next(line for line in lines if "AggregateExec: mode=Partial" in line)
    assert partial.startswith("    ") and partial.endswith("aggr=[sum(many.v)]"), shown


@pytest.mark.parametrize(
    ("flags", "tz", "shown"),
    [
        ([], "Asia/Kolkata", "2023-11-15T03:43:20.000+05:30"),  # the machine's own zone
        (["--time-zone", "UTC"], "Asia/Kolkata", "2023-11-14T22:13:20.000+00:00"),
        (["--time-zone", "America/New_York"], "UTC", "2023-11-14T17:13:20.000-05:00"),
    ],
)
def test_timestamps_are_iso_8601_in_the_clients_zone(
    server: Running, tmp_path: Path, flags: list[str], tz: str, shown: str
) -> None:
    term = Terminal(tmp_path, "--endpoint", f"127.0.0.1:{server.http_port}", *flags, tz=tz)
    try:
        term.expect("gnomon> ")
        term.type("SELECT ts FROM stamps;\r")
        printed = term.expect("(1 row)")
        term.quit()
    finally:
        term.close()
    assert shown in printed, printed


def test_an_unknown_time_zone_is_refused(server: Running) -> None:
    endpoint = f"127.0.0.1:{server.http_port}"
    result = CliRunner().invoke(
        main, ["sql", "--endpoint", endpoint, "--time-zone", "Mars/Olympus", "-e", "SELECT 1"]
    )
    assert result.exit_code == 2 and "unknown time zone 'Mars/Olympus'" in result.output


def test_history_holds_whole_statements_only(server: Running, tmp_path: Path) -> None:
    endpoint = f"127.0.0.1:{server.http_port}"
    term = Terminal(tmp_path, "--endpoint", endpoint)
    try:
        term.expect("gnomon> ")
        term.type("SELECT 6 * 7\r")
        term.expect("-> ")
        term.type("AS answer;\r")
        term.expect("(1 row)")
        term.expect("gnomon> ")
        term.type("SELECT 'dropped'\r")  # begun, then cancelled
        term.expect("-> ")
        term.cancel()
        term.quit()
    finally:
        term.close()
    entries = shell.read_history(tmp_path / ".gnomon_history")
    assert entries == ["SELECT 6 * 7\nAS answer;"], entries
    # The next session recalls it whole: the up arrow, then Enter.
    again = Terminal(tmp_path, "--endpoint", endpoint)
    try:
        again.expect("gnomon> ")
        again.type("\x1b[A")
        again.expect("AS answer;")
        again.type("\r")
        assert "42" in again.expect("(1 row)")
        again.quit()
    finally:
        again.close()
