"""`gnomon standalone` and `gnomon sql` as a user runs them: a real server subprocess, the SQL
client against it, a graceful stop on SIGTERM."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from gnomon_app.cli import main
from testkit.procs import Server, free_port
from tests.cli.conftest import wait_for_output

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def test_standalone_on_port_0_reports_its_ports_serves_and_stops(tmp_path: Path) -> None:
    """Started on port 0 (any free port), it writes the ports it listens on to its ports
    file once serving, and its banner names the same ones; it serves SQL there and stops
    gracefully on SIGTERM."""
    server, ports = Server.start_gnomon(
        [
            *(sys.executable, "-m", "gnomon_app.cli", "standalone"),
            *("--data-dir", str(tmp_path / "db")),
            *("--http-port", "0", "--grpc-port", "0", "--flight-port", "0"),
        ],
        log=tmp_path / "server.log",
        cwd=ROOT,
    )
    try:
        assert set(ports) == {"http", "grpc", "flight"} and 0 not in ports.values()
        for port in ports.values():
            server.wait_for_port(port, timeout_s=1)
        wait_for_output(server)
        assert (
            f"HTTP on 127.0.0.1:{ports['http']}, gRPC (HoraeDB protocol) on "
            f"127.0.0.1:{ports['grpc']}, Arrow Flight on 127.0.0.1:{ports['flight']}"
        ) in server.log.read_text()
        endpoint = f"127.0.0.1:{ports['http']}"
        runner = CliRunner()
        for stmt in (
            "CREATE TABLE t (h string TAG, v double, ts timestamp NOT NULL, TIMESTAMP KEY(ts))",
            "INSERT INTO t (h, v, ts) VALUES ('a', 1.5, 1000), ('b', 2.5, 2000)",
        ):
            result = runner.invoke(main, ["sql", "--endpoint", endpoint, "-e", stmt])
            assert result.exit_code == 0, result.output
        result = runner.invoke(
            main, ["sql", "--endpoint", endpoint, "-e", "SELECT h, v FROM t ORDER BY v"]
        )
        assert result.exit_code == 0 and "2.5" in result.output and "(2 rows)" in result.output
        bad = runner.invoke(main, ["sql", "--endpoint", endpoint, "-e", "SELECT * FROM nope"])
        assert bad.exit_code == 1 and "nope" in bad.output
        # Having written and answered, the server holds no pandas (a dev-only dependency):
        # none of its compiled modules is mapped.
        maps = Path(f"/proc/{server.proc.pid}/maps").read_text()
        assert "pyarrow" in maps and "pandas/_libs" not in maps
    finally:
        server.kill(signal.SIGTERM)
        assert server.proc.wait(timeout=60) == 0
        server.stop()
    assert "engine closed" in (tmp_path / "server.log").read_text()


def test_sql_client_reports_an_unreachable_server() -> None:
    result = CliRunner().invoke(
        main, ["sql", "--endpoint", f"127.0.0.1:{free_port()}", "-e", "SHOW TABLES"]
    )
    assert (
        result.exit_code == 1 and "cannot connect to gnomon at http://127.0.0.1:" in result.output
    )


def test_compaction_node_refuses_a_port_in_use_in_one_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = int(taken.getsockname()[1])
        proc = subprocess.run(
            [
                *(sys.executable, "-m", "gnomon_app.cli", "compaction-node"),
                *("--meta", "127.0.0.1:1"),
                *("--grpc-port", str(port), "--http-port", "0", "--data-dir", str(tmp_path / "cn")),
                *("--store", (tmp_path / "ssts").as_uri()),
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == (
        f"gnomon compaction-node: gRPC port {port} on 127.0.0.1 is in use "
        "(set --grpc-port / grpc_port)"
    ), proc.stderr
    assert "Traceback" not in proc.stderr
