"""The README's examples run as written (ports aside) against `gnomon standalone --demo`, as
`make run` starts it: every curl and `gnomon sql` command and every Python snippet but Spark's
(tests/spark/test_readme_spark.py runs that one), each succeeding with a sane answer. A block
of a kind no test knows fails here, so a new example cannot go untried."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from tests.cli.conftest import Demo, start_demo
from tests.docs.readme import ROOT, Block, Ports, blocks

pytestmark = pytest.mark.integration

EXAMPLES = sorted((ROOT / "examples").glob("*.py"))


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Demo]:
    root = tmp_path_factory.mktemp("readme")
    running = start_demo(root / "data", root / "server.log")
    yield running
    running.stop()


def _ports(demo: Demo) -> Ports:
    return Ports(demo.http_port, demo.grpc_port, demo.flight_port)


def _run(cmd: str, cwd: Path, stdin: str = "") -> str:
    done = subprocess.run(
        ["bash", "-c", cmd], cwd=cwd, input=stdin, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, f"{cmd}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def _check_command(cmd: str, out: str, cwd: Path) -> None:
    """What each kind of command must answer."""
    if " -o " in cmd:  # an Arrow IPC stream saved to a file
        path = cwd / cmd.rsplit(" -o ", 1)[1].strip()
        assert pa.ipc.open_stream(path.read_bytes()).read_all().num_rows >= 1
    elif "/influxdb/" in cmd:
        assert out == "", out  # 204: written
    elif "/api/v1/" in cmd:  # the Prometheus query API's envelope
        assert json.loads(out)["status"] == "success", out
    elif cmd.startswith("curl"):
        answer = json.loads(out)
        assert "rows" in answer or "affected_rows" in answer, answer
    else:  # gnomon sql
        assert "row" in out and "error" not in out, out


def _shell_blocks() -> list[Block]:
    return [b for b in blocks() if b.lang == "" and b.commands()]


def test_every_block_is_run_somewhere() -> None:
    for b in blocks():
        # bash blocks are the Cluster section's: tests/cluster/test_readme_cluster.py runs them.
        # The Deploy section's shell block needs Docker: tests/deploy/test_compose.py checks
        # it against docker-compose.yml and the CLI instead.
        runnable = (
            b.lang in ("", "bash")
            or (b.lang == "shell" and "docker compose" in b.text)
            # The Security section's: tests/security/test_readme_security.py runs it.
            or (b.lang == "shell" and "gnomon admin users" in b.text)
            # The etcd setup's: tests/security/test_readme_etcd.py runs it on a real etcd.
            or (b.lang == "shell" and "etcdctl auth enable" in b.text)
            # The Prometheus section's: tests/prom/test_prometheus_remote.py runs Prometheus
            # with it.
            or (b.lang == "yaml" and "remote_write" in b.text)
            or (
                b.lang == "python"
                and any(
                    k in b.text for k in ("horaedb_client", "node.backends", "gnomon_app.spark")
                )
            )
            # An excerpt of an example, word for word: the example's own test runs it.
            or (b.lang == "python" and any(b.text in e.read_text() for e in EXAMPLES))
        )
        assert runnable, f"README line {b.line}: no test runs this {b.lang or 'shell'} block"
    assert len(_shell_blocks()) >= 4


def test_the_shell_examples(demo: Demo, tmp_path: Path) -> None:
    ports = _ports(demo)
    for block in _shell_blocks():
        for cmd in block.commands():
            real = ports.apply(cmd)
            # The interactive shell reads its statements from standard input.
            interactive = "gnomon sql" in cmd and " -e " not in cmd
            out = _run(real, tmp_path, stdin="SHOW TABLES;\n" if interactive else "")
            _check_command(real, out, tmp_path)
    # The answers themselves, beyond their success.
    status, body = demo.sql("SELECT host, v FROM demo")
    assert status == 200 and body["rows"] == [{"host": "a", "v": 1.5}], body
    status, body = demo.sql("SELECT city, temperature, humidity FROM weather")
    assert body["rows"] == [{"city": "paris", "temperature": 21.5, "humidity": 40}], body


def test_the_demo_query_and_the_interactive_shell(demo: Demo, tmp_path: Path) -> None:
    ports = _ports(demo)
    first = _shell_blocks()[0].commands()
    top = _run(ports.apply(first[0]), tmp_path)
    assert top.count("host_") == 5 and "(5 rows)" in top, top
    shell = _run(ports.apply(first[1]), tmp_path, stdin="SHOW TABLES;\n")
    assert "demo_cpu" in shell and f"connected to http://127.0.0.1:{demo.http_port}" in shell


def _python(block: str) -> Block:
    return next(b for b in blocks() if b.lang == "python" and block in b.text)


def test_the_horaedb_sdk_snippet(demo: Demo, tmp_path: Path) -> None:
    code = _ports(demo).apply(_python("horaedb_client").text)
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    # The SDK's tokio threads now and then crash the interpreter as it exits, after the work
    # is done (see testkit/sdk.py): a SIGSEGV, or an abort while the runtime finalizes,
    # is the SDK's; the output is judged.
    at_exit = done.returncode == -signal.SIGSEGV or (
        done.returncode == -signal.SIGABRT and "Python runtime state: finalizing" in done.stderr
    )
    assert done.returncode == 0 or at_exit, done.stderr
    assert "'site': 'a'" in done.stdout and "'value': 0.5" in done.stdout, done.stdout


def test_the_engine_snippet(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _python("node.engine").text],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "'host': 'b', 'usage': 0.7" in done.stdout, done.stdout
    assert (tmp_path / "data" / "mydb").is_dir()
